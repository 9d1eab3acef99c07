"""Event sinks: where the compactor and the session send events.

``SpoolSink`` appends JSONL, one file per producer process, buffered and flushed on every
compaction and on close; a disk error never raises into the agent: it is counted, the events stay
buffered (up to a cap) and the next flush retries. ``MemorySink`` keeps events in a list for
tests and in-process consumers; ``strict=True`` makes it check the contract and raise. Both
tell a resumed session where its ``seq`` goes on (``next_seq``). Text that UTF-8 cannot hold
(lone surrogates) is scrubbed on the way out, never raised on.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import uuid
import weakref
from collections import defaultdict
from pathlib import Path
from typing import Protocol, runtime_checkable

from compactor.encoding import utf8
from compactor.events import ENVELOPE_HEAD, Event, parse_event
from compactor.safepath import safe_name

log = logging.getLogger(__name__)


@runtime_checkable
class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class MemorySink:
    """Events in a list. With ``strict``, each event must round-trip through JSON and have the
    next ``seq`` of its session, or ``emit`` raises ``AssertionError``."""

    def __init__(self, *, strict: bool = True) -> None:
        self.events: list[Event] = []
        self.strict = strict
        self._next_seq: dict[str, int] = defaultdict(int)
        self.flushes = 0

    def emit(self, event: Event) -> None:
        if self.strict:
            line = event.to_json_line()
            if parse_event(line).to_json_line() != line:
                raise AssertionError(f"event {event.event_id} does not round-trip through JSON")
            expected = self._next_seq[event.session_id]
            if event.seq != expected:
                raise AssertionError(
                    f"session {event.session_id!r}: seq {event.seq} emitted, {expected} expected"
                )
        self._next_seq[event.session_id] = event.seq + 1
        self.events.append(event)

    def next_seq(self, session_id: str) -> int:
        return self._next_seq.get(session_id, 0)

    def of_type(self, type_: str) -> list[Event]:
        return [e for e in self.events if e.type == type_]

    def flush(self) -> None:
        self.flushes += 1

    def close(self) -> None:
        self.flush()


_OPEN_SPOOLS: weakref.WeakSet[SpoolSink] = weakref.WeakSet()


def _close_all() -> None:
    for sink in list(_OPEN_SPOOLS):
        sink.close()


atexit.register(_close_all)


class SpoolSink:
    """Append-only JSONL spool: ``<spool_dir>/<host>-<pid>-<random>.jsonl``.

    Attributes:
        errors: failed flushes so far; ``last_error`` holds the newest message.
        dropped: events discarded because the buffer cap was reached while the disk failed.
    """

    def __init__(
        self,
        spool_dir: str | os.PathLike[str],
        *,
        buffer_events: int = 256,
        max_buffered: int = 100_000,
        fsync: bool = False,
    ) -> None:
        self.spool_dir = Path(spool_dir)
        self.buffer_events = buffer_events
        self.max_buffered = max_buffered
        self.fsync = fsync
        self.errors = 0
        self.dropped = 0
        self.last_error = ""
        self.written = 0
        self._buffer: list[str] = []
        self._lock = threading.Lock()
        self._pid = -1
        self._path: Path | None = None
        self._seqs: dict[str, int] | None = None
        _OPEN_SPOOLS.add(self)

    @property
    def path(self) -> Path | None:
        """The file this process writes (None until the first flush)."""
        return self._path

    def emit(self, event: Event) -> None:
        line = event.to_json_line()
        with self._lock:
            if self._seqs is not None:
                self._seqs[event.session_id] = max(
                    self._seqs.get(event.session_id, 0), event.seq + 1
                )
            if len(self._buffer) >= self.max_buffered:
                self._buffer.pop(0)
                self.dropped += 1
            self._buffer.append(line)
            full = len(self._buffer) >= self.buffer_events
        if full:
            self.flush()

    def _file(self) -> Path:
        if self._path is None or self._pid != os.getpid():
            self._pid = os.getpid()
            host = safe_name(socket.gethostname() or "host")
            self._path = self.spool_dir / f"{host}-{self._pid}-{uuid.uuid4().hex[:8]}.jsonl"
        return self._path

    def flush(self) -> None:
        """Write buffered events; on failure keep them, count it, and never raise."""
        with self._lock:
            if not self._buffer:
                return
            data = utf8("\n".join(self._buffer) + "\n")
            try:
                self.spool_dir.mkdir(parents=True, exist_ok=True)
                fd = os.open(self._file(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    view = memoryview(data)
                    while view:
                        n = os.write(fd, view)
                        view = view[n:]
                    if self.fsync:
                        os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                self.errors += 1
                self.last_error = f"spool write to {self.spool_dir} failed: {exc}"
                log.warning("%s; %d events kept in memory", self.last_error, len(self._buffer))
                return
            self.written += len(self._buffer)
            self._buffer.clear()

    def next_seq(self, session_id: str) -> int:
        """The seq after the last event of ``session_id`` in the spool (0 if none). The spool is
        scanned once per sink, when a session first asks; later events are tracked as emitted."""
        with self._lock:
            if self._seqs is None:
                self._seqs = _scan_seqs(self.spool_dir)
                for line in self._buffer:
                    self._track(line)
            return self._seqs.get(session_id, 0)

    def _track(self, line: str) -> None:
        assert self._seqs is not None
        for _kind, sid, seq in ENVELOPE_HEAD.findall(line.encode("utf-8", "replace")):
            key = json.loads(sid)
            self._seqs[key] = max(self._seqs.get(key, 0), int(seq) + 1)

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def close(self) -> None:
        self.flush()


def _scan_seqs(spool_dir: Path) -> dict[str, int]:
    """The next seq of every session in the spool files under ``spool_dir``."""
    seqs: dict[str, int] = {}
    try:
        files = sorted(spool_dir.glob("*.jsonl"))
    except OSError:
        return seqs
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            log.warning("spool file %s unreadable while resuming a session: %s", path, exc)
            continue
        for _kind, sid, seq in ENVELOPE_HEAD.findall(data):
            try:
                key = json.loads(sid)
            except ValueError:
                continue
            seqs[key] = max(seqs.get(key, 0), int(seq) + 1)
    return seqs
