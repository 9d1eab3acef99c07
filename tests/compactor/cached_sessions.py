"""A session that reaches Warn with three offloadable tool results in its head and grows by a
fixed amount per turn, on a clock of the test's: what ``cache_priced_offload`` is judged on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    ToolCall,
)
from compactor.tokens import TokenEstimator
from compactor.writing.sinks import EventSink

WINDOW = 20_000
START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
READ, WRITE = 0.1, 1.25  # Anthropic's cache prices, as fractions of an uncached input token
SOFT_AT = 0.7 * WINDOW  # tokens at which Soft fires (default soft, no reserve)


def tool_result(lines: int) -> str:
    """A tool result of ``lines`` lines of 80 characters (offloadable past 50 lines)."""
    return "\n".join(f"{i:04d} " + "x" * 75 for i in range(lines))


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def raw_bytes(msg: Message) -> int:
    """Bytes as the estimator counts them: content, call ids, names and arguments."""
    total = len(msg.content.encode())
    for call in msg.tool_calls:
        total += len(call.id) + len(call.name) + len(call.arguments)
    return total + len(msg.tool_call_id or "")


def raw_tokens(msgs: list[Message]) -> int:
    return sum(raw_bytes(m) for m in msgs) // 4


def cached_session(
    tmp_path: Path,
    priced: bool,
    clock: Clock,
    sink: EventSink | None = None,
    *,
    results: int = 3,
    lines: int = 100,
    estimator: TokenEstimator | None = None,
) -> CompactionSession:
    """A session half full, its head holding ``results`` tool results of ``lines`` lines."""
    config = CompactorConfig(cache_priced_offload=priced, cache_read_price=READ)
    offloader = CompactionOffloader(tmp_path / ("on" if priced else "off"), "s")
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(), WINDOW, config=config, offloader=offloader, estimator=estimator
    )
    session = CompactionSession(
        compactor, "You fix bugs.", session_id="s", event_sink=sink, clock=clock
    )
    session.append(Message(role="user", content="Fix the failing parser test in src/parse.rs."))
    for i in range(results):
        call = ToolCall(id=f"call{i}", name="read_file", arguments='{"path": "src/parse.rs"}')
        session.append(Message(role="assistant", content="", tool_calls=[call]))
        session.append(Message(role="tool", content=tool_result(lines), tool_call_id=f"call{i}"))
    while raw_tokens(session.view()) < 0.5 * WINDOW:  # half full: below Warn
        session.append(Message(role="assistant", content="I read it. " * 40))
        session.append(Message(role="user", content="Go on. " * 60))
    return session


def grow(session: CompactionSession, tokens: int) -> None:
    """One turn's new messages: about ``tokens`` tokens in two plain messages."""
    session.append(Message(role="assistant", content="a" * (2 * tokens)))
    session.append(Message(role="user", content="u" * (2 * tokens)))


def first_warn_turn(
    session: CompactionSession, clock: Clock, growth: int, gap_s: float = 10
) -> tuple[list[Message], list[Message], list[Message], Any]:
    """Turns until the first at Warn: (view sent the turn before, view before, view sent,
    record) of that turn."""
    sent: list[Message] = []
    while True:
        before = session.view()
        clock.now += timedelta(seconds=gap_s)
        view, record = session.prepare()
        if raw_tokens(before) >= 0.6 * WINDOW:
            return sent, before, view, record
        sent = view
        grow(session, growth)
