"""Conversation builders shared by the compactor tests (plain functions, no fixtures)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from compactor import Message, PreviousCompaction, SummaryResult, ToolCall

TASK = "Fix the failing test in src/cache.py and keep the public API unchanged."

GOOD_SUMMARY = """## Anchors

### User Intent
Fix the failing cache test

### Execution Progress
- read src/cache.py

### Key Decisions
- keep the public API: callers depend on it

### Tried Solutions
- clearing the cache on write: test still failed

### Next Steps
- run the tests again

## Summary
Working on src/cache.py."""


def exchange(i: int, result_bytes: int, *, parallel: int = 1, error: bool = False) -> list[Message]:
    """An assistant message with ``parallel`` tool calls and their results."""
    calls = tuple(
        ToolCall(id=f"call_{i}_{k}", name="bash", arguments=json.dumps({"command": f"cat f{i}"}))
        for k in range(parallel)
    )
    out = [Message(role="assistant", content=f"step {i}", tool_calls=calls)]
    for call in calls:
        body = "\n".join(f"line {n} of {call.id}" for n in range(result_bytes // 20 + 1))
        out.append(
            Message(
                role="tool",
                tool_call_id=call.id,
                content=body[:result_bytes],
                is_error=error,
                name="bash",
            )
        )
    return out


def conversation(n: int, result_bytes: int = 1000, *, task: str = TASK) -> list[Message]:
    msgs = [
        Message(role="system", content="You are a coding agent."),
        Message(role="user", content=task),
    ]
    for i in range(n):
        msgs += exchange(i, result_bytes)
    return msgs


class ScriptedSummarizer:
    """Returns a fixed text (or raises) and records every call's arguments."""

    def __init__(
        self,
        text: str = GOOD_SUMMARY,
        *,
        error: Exception | None = None,
        block: threading.Event | None = None,
    ) -> None:
        self.text = text
        self.error = error
        self.block = block
        self.calls: list[tuple[list[Message], PreviousCompaction | None]] = []
        self.on_call: Callable[[], None] | None = None

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        self.calls.append((transcript, previous))
        if self.block is not None:
            self.block.wait(10)
        if self.error is not None:
            raise self.error
        return SummaryResult(text=self.text, model="scripted")


def window_for(msgs: list[Message], ratio: float) -> int:
    """The context window at which ``msgs`` fill ``ratio`` of it."""
    from compactor import estimate_tokens

    return int(estimate_tokens(msgs) / ratio)
