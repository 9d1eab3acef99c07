"""SessionRecorder: a session's events, each built and emitted inside one fail-open guard.

Building a payload reads the agent's messages (hashes, sizes, ids), so it can fail on text the
agent never meant to be hostile; emitting can fail on a full disk or a broken sink. Both happen
here, under one ``try``: a failure is counted, logged by type and code once per kind
(``FaultLog``), and the agent goes on. Nothing here decides which events a session emits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel

from compactor.events import EventFactory
from compactor.faults import FaultLog
from compactor.sinks import EventSink


class SessionRecorder:
    """Emits one session's events to ``sink`` with a gap-free ``seq`` from ``start_seq``.

    Attributes:
        errors: events or flushes that failed; ``last_error`` the newest as ``Type: message``
            (for the caller; it is never logged, since the message may quote content).
    """

    def __init__(
        self, sink: EventSink | None, session_id: str, start_seq: int, faults: FaultLog
    ) -> None:
        self.sink = sink
        self.factory = EventFactory(session_id, start_seq=start_seq)
        self.faults = faults
        self.errors = 0
        self.last_error = ""

    def emit(self, build: Callable[[], BaseModel]) -> bool:
        """Build one payload and emit it as the next event; False (counted) if either fails."""
        if self.sink is None:
            return False
        try:
            self.sink.emit(self.factory.make(build()))
        except Exception as exc:
            self._failed("session event not recorded", exc)
            return False
        return True

    def emit_each(self, build: Callable[[], Iterable[BaseModel]]) -> None:
        """Build several payloads at once and emit each (each failure counted)."""
        if self.sink is None:
            return
        try:
            payloads = list(build())
        except Exception as exc:
            self._failed("session event not recorded", exc)
            return
        for payload in payloads:
            self.emit(lambda p=payload: p)  # type: ignore[misc]

    def flush(self) -> None:
        if self.sink is None:
            return
        try:
            self.sink.flush()
        except Exception as exc:
            self._failed("session events not flushed", exc)

    def _failed(self, what: str, exc: Exception) -> None:
        self.errors += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        self.faults.report(what, exc, then="the agent goes on; the failures are counted")


def next_seq_of(sink: EventSink | None, session_id: str, faults: FaultLog) -> int:
    """The seq after the last one ``sink`` holds for ``session_id`` (0 for a new session, or
    when the sink cannot tell: that must not stop the agent)."""
    next_seq: Any = getattr(sink, "next_seq", None)
    if not callable(next_seq):
        return 0
    try:
        return int(next_seq(session_id))
    except Exception as exc:
        faults.report("resumed session's seq unreadable", exc, then="starting at 0")
        return 0
