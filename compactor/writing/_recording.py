"""SessionRecorder: a session's events, each built and emitted inside one fail-open guard.

Building a payload reads the agent's messages (hashes, sizes, ids), so it can fail on text the
agent never meant to be hostile; emitting can fail on a full disk or a broken sink. Both happen
here, under one ``try``: a failure is counted, logged by type and code once per kind
(``FaultLog``), and the agent goes on. For a resumed session it also tells where the sink left
it: the next ``seq`` (``next_seq_of``) and how many of its messages the sink durably holds
(``recorded_messages``), so that messages whose events a crash lost are written again. Nothing
here decides which events a session emits.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, NamedTuple

from pydantic import BaseModel

from compactor.events import EventFactory, MessageAppended
from compactor.writing._faults import FaultLog
from compactor.writing.sinks import EventSink, MemorySink, SpoolSink, TeeSink


class SessionRecorder:
    """Emits one session's events to ``sink`` with a gap-free ``seq`` from ``start_seq``.

    Attributes:
        errors: events or flushes that failed; ``last_error`` the newest as ``Type: message``
            (for the caller; it is never logged, since the message may quote content).
    """

    def __init__(
        self,
        sink: EventSink | None,
        session_id: str,
        start_seq: int,
        faults: FaultLog,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.sink = sink
        self.factory = EventFactory(session_id, start_seq=start_seq, clock=clock)
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


_MESSAGE_LINE = re.compile(
    rb'^\{"event_id":"[^"\n]*","type":"message_appended","schema_version":\d+,'
    rb'"session_id":("(?:[^"\\\n]|\\.)*"),"seq":\d+,[^\n]*?'
    rb',"payload":\{"type":"message_appended","index":(\d+)[,}][^\n]*\n',
    re.MULTILINE,
)
"""A whole ``message_appended`` line (a torn last line is no event): its session id as a JSON
string, and its message index. Inside a JSON string a quote is escaped, so the payload's start
cannot be matched inside the producer or the id."""

_TAIL_BYTES = 4 << 20
"""How much of the end of each spool file is read for a resumed session's newest messages."""

_MTIME_SLACK_S = 2.0
"""File systems with coarse timestamps: a spool file this much older than the session's index
file may still hold its newest events."""


def claim_session(sink: EventSink | None, session_id: str) -> Callable[[], None]:
    """Hold ``session_id`` open on every sink of ``sink`` that can (``claim``; a
    ``SpoolSink`` does), raising ``SessionInUseError`` when another writer holds it; returns
    what lets it go again. A refusal by one sink lets go of what the others held."""
    sinks = list(sink.sinks) if isinstance(sink, TeeSink) else [sink]
    held: list[Callable[[], None]] = []
    try:
        for one in sinks:
            if isinstance(one, TeeSink):
                held.append(claim_session(one, session_id))
                continue
            claim: Any = getattr(one, "claim", None)
            if callable(claim):
                claim(session_id)
                held.append(lambda s=one: s.release(session_id))  # type: ignore[misc]
    except BaseException:
        for release in held:
            release()
        raise

    def release_all() -> None:
        for release in held:
            release()

    return release_all


class Recorded(NamedTuple):
    """What a sink durably holds of a session's messages: how many (the first ``messages``), and
    the sha256 its newest one was recorded with (None: the sink cannot say)."""

    messages: int
    newest_sha256: str | None = None


def recorded_messages(sink: EventSink | None, session_id: str, faults: FaultLog) -> Recorded | None:
    """How many of ``session_id``'s first messages ``sink`` durably holds (their
    ``message_appended`` events), and the hash of the newest: a resumed session writes the
    others again, and checks that its history is the one recorded. None: the sink cannot tell
    (then the resumed messages are taken as recorded, as before).

    A sink may answer itself (``recorded_messages(session_id) -> int``, no hash). A
    ``SpoolSink`` is read from the end of its files: a process writes a session's events in
    order, and a resumed one writes what was lost before anything new, so the newest message
    found there has every earlier one before it. If it is not found there, more is written again
    than was lost (the store keeps one row per message index), never less.
    """
    try:
        return _recorded(sink, session_id)
    except Exception as exc:
        faults.report("resumed session's recorded messages unreadable", exc, then="rewriting all")
        return Recorded(0)


def _recorded(sink: EventSink | None, session_id: str) -> Recorded | None:
    own: Any = getattr(sink, "recorded_messages", None)
    if callable(own):
        return Recorded(int(own(session_id)))
    if isinstance(sink, TeeSink):
        known = [r for r in (_recorded(s, session_id) for s in sink.sinks) if r is not None]
        return min(known, key=lambda r: (r.messages, r.newest_sha256 is None)) if known else None
    if isinstance(sink, MemorySink):
        newest: MessageAppended | None = None
        for e in sink.events:
            payload = e.payload
            if e.session_id != session_id or not isinstance(payload, MessageAppended):
                continue
            if newest is None or payload.index >= newest.index:
                newest = payload
        return Recorded(0) if newest is None else Recorded(newest.index + 1, newest.sha256)
    if isinstance(sink, SpoolSink):
        sink.flush()  # what this process still buffers counts once it is written
        index, sha = _newest_in_spool(sink, session_id)
        return Recorded(index + 1, sha)
    return None


def _newest_in_spool(sink: SpoolSink, session_id: str) -> tuple[int, str | None]:
    """The newest message index of ``session_id`` at the end of the spool's files (-1: none)
    and the sha256 it was recorded with. Only files written since the session's index file was
    (less some slack) are read: the index is written before the events it covers."""
    try:
        since: float | None = sink.index.path_for(session_id).stat().st_mtime - _MTIME_SLACK_S
    except OSError:
        since = None  # no index file: any file may hold the session
    newest, sha = _newest_since(sink, session_id, since)
    if newest < 0 and since is not None:
        # the index was written by a process killed before its events were: older files
        # hold the session's messages (read them, or every message would be written twice)
        newest, sha = _newest_since(sink, session_id, None)
    return newest, sha


def _newest_since(sink: SpoolSink, session_id: str, since: float | None) -> tuple[int, str | None]:
    newest, line = -1, b""
    for path in sorted(sink.spool_dir.glob("*.jsonl")):
        try:
            tail = _tail(path, since)
        except OSError:
            continue  # unreadable: what it holds is written again
        for match in _MESSAGE_LINE.finditer(tail):
            if json.loads(match[1]) == session_id and int(match[2]) >= newest:
                newest, line = int(match[2]), match[0]
    return newest, _sha_of(line)


def _sha_of(line: bytes) -> str | None:
    try:
        sha = json.loads(line)["payload"]["sha256"]
    except (ValueError, KeyError, TypeError):
        return None
    return sha if isinstance(sha, str) else None


def _tail(path: os.PathLike[str], since: float | None) -> bytes:
    """The last ``_TAIL_BYTES`` of a regular file from a line start (empty if it is older than
    ``since`` or no regular file: a link is not followed)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (since is not None and st.st_mtime < since):
            return b""
        start = max(0, st.st_size - _TAIL_BYTES)
        data = os.pread(fd, st.st_size - start, start)
    finally:
        os.close(fd)
    if start:
        data = data[data.find(b"\n") + 1 :]  # the first line is cut: skip it
    return data
