"""The scripted conversation every framework's agent runs, and the checks made on it.

Four user prompts of ten tool calls each (40 tool-calling turns, each answered by a final text),
at a 16k window, with tool results of 5 to 50 KB. Each test records the requests its framework's
test model received, turns each into compactor messages with its own small converter (not the
adapter's), and checks them here: within the window by the session's own estimator, every tool
call next to its results; then the spool and ``compactlens stats``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from compactor import MemorySink, Message, TokenEstimator, message_bytes
from compactor.events import CompactionRecorded

WINDOW = 16_000
PROMPTS = 4
CALLS_PER_PROMPT = 10
TOOL_TURNS = PROMPTS * CALLS_PER_PROMPT
REQUESTS = PROMPTS * (CALLS_PER_PROMPT + 1)
"""Each prompt: ten requests answered with a tool call, one answered with text."""
MIN_RESULT, MAX_RESULT = 5_000, 50_000
ROOT = Path(__file__).resolve().parents[3]


def result_sizes(seed: int = 30) -> list[int]:
    """The byte size of each tool result, 5–50 KB (the largest sizes included)."""
    rng = random.Random(seed)
    sizes = [rng.randint(MIN_RESULT, MAX_RESULT) for _ in range(TOOL_TURNS)]
    sizes[3], sizes[17] = MAX_RESULT, MIN_RESULT
    return sizes


def tool_output(path: str, size: int) -> str:
    """A file-like tool result of exactly ``size`` bytes (ASCII)."""
    lines: list[str] = []
    total = 0
    i = 0
    while total < size:
        line = f"{path}:{i}: value_{i} = compute({i}, {i * 7 % 13}) # " + "x" * 40
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines)[:size]


class Script:
    """The model's side of the conversation: which request gets which answer."""

    def __init__(self) -> None:
        self.sizes = result_sizes()
        self.requests = 0
        self.calls = 0

    def next_step(self) -> tuple[str, dict[str, Any]] | None:
        """The next tool call (its id and arguments), or None for the prompt's final text."""
        self.requests += 1
        if self.requests % (CALLS_PER_PROMPT + 1) == 0:
            return None
        size = self.sizes[self.calls]
        self.calls += 1
        return f"call_{self.calls:02d}", {"path": f"src/module_{self.calls}.py", "size": size}


def prompt(i: int) -> str:
    return f"Task {i}: read the modules the next step names and report what each one computes."


def tokens(messages: Sequence[Message], estimator: TokenEstimator) -> int:
    return estimator.tokens_for_bytes(sum(message_bytes(m) for m in messages))


def unpaired(messages: Sequence[Message]) -> list[str]:
    """Each tool call without its result right after its assistant message, and each result
    that does not follow its call's message (empty when every exchange is whole)."""
    problems: list[str] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        i += 1
        if msg.tool_call_id is not None:
            problems.append(f"result {msg.tool_call_id} at {i - 1} follows no call of its own")
            continue
        expected = {call.id for call in msg.tool_calls}
        while i < len(messages) and messages[i].tool_call_id is not None:
            if messages[i].tool_call_id not in expected:
                problems.append(f"result {messages[i].tool_call_id} at {i} answers another call")
            expected.discard(messages[i].tool_call_id or "")
            i += 1
        problems += [f"call {call} at {i - 1} has no result after it" for call in sorted(expected)]
    return problems


def spool_events(spool: Path, session_id: str, kind: str) -> list[dict[str, Any]]:
    events = []
    for path in sorted(spool.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event["type"] == kind and event["session_id"] == session_id:
                events.append(event)
    return events


def effective_compactions(spool: Path, session_id: str) -> int:
    """``compaction_recorded`` events of the session whose record says something changed."""
    events = spool_events(spool, session_id, "compaction_recorded")
    return sum(1 for e in events if e["payload"]["record"]["effective"])


def effective_in(sink: MemorySink) -> int:
    """Effective compactions among the events a ``MemorySink`` holds."""
    payloads = [e.payload for e in sink.of_type("compaction_recorded")]
    return sum(1 for p in payloads if isinstance(p, CompactionRecorded) and p.record.effective)


def stats(home: Path) -> dict[str, Any]:
    """``compactlens ingest`` then ``compactlens stats --json`` on ``home``, as a user runs them."""
    for args in (["ingest"], ["stats", "--json"]):
        done = subprocess.run(
            [sys.executable, "-m", "analytics.cli", *args, "--home", str(home)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def check_run(
    requests: Sequence[Sequence[Message]],
    estimator: TokenEstimator,
    home: Path,
    session_id: str,
) -> int:
    """Every request within the window with its exchanges whole; the spool's effective
    compactions equal to what ``stats`` counts. Returns that count."""
    assert len(requests) == REQUESTS
    over = [(i, n) for i, r in enumerate(requests) if (n := tokens(r, estimator)) > WINDOW]
    assert not over, f"requests over the {WINDOW}-token window (index, tokens): {over}"
    broken = [(i, p) for i, r in enumerate(requests) if (p := unpaired(r))]
    assert not broken, f"requests with a tool call apart from its result: {broken[:3]}"
    spool = home / "spool"
    compactions = effective_compactions(spool, session_id)
    assert compactions > 0, "40 turns of 5–50 KB results at 16k never compacted"
    assert spool_events(spool, session_id, "usage_reported"), "the framework's usage was not fed"
    figures = stats(home)
    assert figures["sessions"] == 1
    assert figures["compactions"]["total"] == compactions
    return compactions
