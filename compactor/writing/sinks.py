"""Event sinks: where the compactor and the session send events.

``SpoolSink`` appends JSONL, one file per producer process, buffered and flushed on every
compaction and on close; a disk error never raises into the agent: it is counted, logged once
per failure episode, the events stay buffered (up to a cap) and a later flush retries, writing
each event exactly once (a write torn by a full disk is cut back). ``MemorySink`` keeps events
in a list for tests and in-process consumers; ``strict=True`` makes it check the contract and
raise. Both tell a resumed session where its ``seq`` goes on (``next_seq``); the spool keeps a
per-session index for it (``seqindex``), so that resuming does not read the spool. Text that
UTF-8 cannot hold (lone surrogates) is scrubbed on the way out, never raised on.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import logging
import os
import socket
import threading
import uuid
import weakref
from collections import defaultdict, deque
from pathlib import Path
from typing import Protocol, runtime_checkable

from compactor.errors import SessionInUseError
from compactor.events import ENVELOPE_HEAD, Event, parse_event
from compactor.writing._appending import append_whole
from compactor.writing._encoding import utf8
from compactor.writing._faults import FaultLog
from compactor.writing._safepath import safe_name
from compactor.writing._seqindex import SeqIndex

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

    Each event is encoded once, when emitted. A flush writes the buffer in chunks, each whole or
    not at all (``append_whole``): a write a full disk stops part-way is cut back, so the file
    always ends at a complete line and nothing is written twice. While writes fail, events stay
    buffered (the oldest dropped beyond ``max_buffered``), a retry happens every
    ``buffer_events`` emits or on ``flush``, and one warning is logged per failure episode (until
    a write succeeds again). Sessions' next seqs are kept in ``SeqIndex`` files beside the spool
    (``<spool_dir>/.seq/``), written before the events they cover.

    Attributes:
        errors: failed flushes so far; ``last_error`` holds the newest message.
        dropped: events discarded because the buffer cap was reached while the disk failed.
        written: events written to the spool file.
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
        self.buffer_events = max(1, buffer_events)
        self.max_buffered = max(1, max_buffered)
        self.fsync = fsync
        self.errors = 0
        self.dropped = 0
        self.last_error = ""
        self.written = 0
        self.index = SeqIndex(self.spool_dir)
        self._buffer: deque[bytes] = deque()
        self._lock = threading.Lock()
        self._pid = -1
        self._path: Path | None = None
        self._size: int | None = None
        """Where this process's file ends after its last complete write."""
        self._emitted: dict[str, int] = {}
        """Per session, the seq after the newest event this sink was given."""
        self._unindexed: dict[str, int] = {}
        """Sessions whose newest seq the index does not hold yet."""
        self._scanned: dict[str, int] | None = None
        self._claims: dict[str, int] = {}
        """Sessions this sink holds open (``claim``): the descriptor of each one's lock file."""
        self._failing = False
        self._since_failure = 0
        self._index_warned = False
        _OPEN_SPOOLS.add(self)

    @property
    def path(self) -> Path | None:
        """The file this process writes (None until the first flush)."""
        return self._path

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def emit(self, event: Event) -> None:
        line = utf8(event.to_json_line() + "\n")
        sid, after = event.session_id, event.seq + 1
        with self._lock:
            if after > self._emitted.get(sid, 0):
                self._emitted[sid] = after
            if after > self._unindexed.get(sid, 0):
                self._unindexed[sid] = after
            if len(self._buffer) >= self.max_buffered:
                self._buffer.popleft()
                self.dropped += 1
            self._buffer.append(line)
            if self._failing:  # retry once per buffer_events emits, not on every one
                self._since_failure += 1
                due = self._since_failure >= self.buffer_events
            else:
                due = len(self._buffer) >= self.buffer_events
        if due:
            self.flush()

    def _file(self) -> Path:
        if self._path is None or self._pid != os.getpid():
            self._pid = os.getpid()
            host = safe_name(socket.gethostname() or "host")
            self._path = self.spool_dir / f"{host}-{self._pid}-{uuid.uuid4().hex[:8]}.jsonl"
            self._size = None
        return self._path

    def flush(self) -> None:
        """Write buffered events; on failure keep what was not written, count it, never raise."""
        with self._lock:
            if not self._buffer:
                return
            indexed = not self._unindexed or self.index.record(self._unindexed)
            if indexed:
                self._unindexed.clear()
            before = self.written
            try:
                self.spool_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # private
                fd = os.open(self._file(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    self._write_chunks(fd)
                finally:
                    os.close(fd)
            except OSError as exc:
                self._failed(exc, self.written - before, indexed)
                return
            if self._failing:
                log.info("spool writes to %s work again", self.spool_dir)
            self._failing = False
            if not indexed and not self._index_warned:  # the spool works, its index does not
                self._index_warned = True
                log.warning(
                    "%s; sessions resumed from this spool scan it instead (logged once)",
                    self.index.last_error,
                )

    def _write_chunks(self, fd: int) -> None:
        """Write the buffer in chunks of about ``_CHUNK_BYTES``; each lands whole or not at all
        and leaves the buffer only once written."""
        while self._buffer:
            chunk = list(itertools.islice(self._buffer, self.buffer_events))
            data = b"".join(chunk)
            while len(chunk) > 1 and len(data) > _CHUNK_BYTES:
                chunk = chunk[: len(chunk) // 2]
                data = b"".join(chunk)
            self._size = append_whole(fd, data, size=self._size)
            for _ in chunk:
                self._buffer.popleft()
            self.written += len(chunk)
        if self.fsync:
            os.fsync(fd)

    def _failed(self, exc: OSError, landed: int, indexed: bool) -> None:
        self.errors += 1
        self._since_failure = 0
        self.last_error = (
            f"spool write to {self.spool_dir} failed: {exc}; {len(self._buffer)} events kept in "
            f"memory (up to {self.max_buffered}) and retried every {self.buffer_events} events "
            "or on flush; free space or fix the folder's permissions"
        )
        if landed:
            self.last_error += f" ({landed} events were written before the failure)"
        if not indexed:
            self.last_error += f"; {self.index.last_error}"
        if not self._failing:
            self._failing = True
            log.warning("%s; further failures are counted until a write succeeds", self.last_error)

    def next_seq(self, session_id: str) -> int:
        """The seq after the last event of ``session_id`` in the spool (0 if none): from the
        session's index file, in O(1); only without a usable index is the spool scanned (once
        per sink, and the index rebuilt from what the scan found)."""
        with self._lock:
            stored = self.index.next_seq(session_id)
            if stored is None:
                if self._scanned is None:
                    self._scanned, complete = _scan_seqs(self.spool_dir)
                    if complete:
                        self.index.adopt(self._scanned)
                stored = self._scanned.get(session_id, 0)
            return max(stored, self._emitted.get(session_id, 0))

    def close(self) -> None:
        self.flush()
        for session_id in list(self._claims):
            self.release(session_id)

    def claim(self, session_id: str) -> None:
        """Hold ``session_id`` open on this spool until ``release`` (or this process ends): a
        second writer of it, in another process or through another claim in this one, is
        refused with ``SessionInUseError``, since the two would reuse each other's seqs. The
        lock is an ``flock`` on ``<spool>/.open/<session>`` (POSIX; elsewhere no guard). A
        spool where the lock file cannot be made is still written: the claim guards, it never
        stops an agent recording."""
        if os.name != "posix":
            return
        import fcntl  # POSIX only: imported here so that the package imports on Windows

        path = self.spool_dir / CLAIM_DIR / safe_name(session_id or "default")
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise SessionInUseError(session_id, str(self.spool_dir), holder) from None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        with self._lock:
            self._claims[session_id] = fd

    def release(self, session_id: str) -> None:
        """Let another writer open ``session_id`` (its claim's lock is dropped)."""
        with self._lock:
            fd = self._claims.pop(session_id, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


CLAIM_DIR = ".open"
"""Beside the spool, one lock file per session a writer holds open (a dot-folder: readers of
``<spool>/*.jsonl`` never see it)."""


def _holder(fd: int) -> str:
    """Who holds a claim, as its lock file says (the PID it wrote)."""
    try:
        pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        pid = ""
    if not pid.isdigit():
        return "another writer"
    return "this process" if int(pid) == os.getpid() else f"process {pid}"


_CHUNK_BYTES = 1 << 20
"""The largest write of one flush step: under a full disk a retry costs at most this much."""


def _scan_seqs(spool_dir: Path) -> tuple[dict[str, int], bool]:
    """The next seq of every session in the spool files under ``spool_dir``, and whether every
    file could be read."""
    seqs: dict[str, int] = {}
    try:
        files = sorted(spool_dir.glob("*.jsonl"))
    except OSError:
        return seqs, False
    complete = True
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            log.warning("spool file %s unreadable while resuming a session: %s", path, exc)
            complete = False
            continue
        for _kind, sid, seq in ENVELOPE_HEAD.findall(data):
            try:
                key = json.loads(sid)
            except ValueError:
                continue
            seqs[key] = max(seqs.get(key, 0), int(seq) + 1)
    return seqs, complete


class TeeSink:
    """Every event to each of ``sinks`` in turn (a spool and an ``OtlpSink``, say). A sink that
    raises does not keep the event from the others: it is counted in ``errors`` (and its type
    logged once), and the rest still get it."""

    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = sinks
        self.errors = 0
        self._faults = FaultLog(log)

    def _each(self, call: str, *args: Event) -> None:
        for sink in self.sinks:
            try:
                getattr(sink, call)(*args)
            except Exception as exc:  # one sink's failure is not the others'
                self.errors += 1
                self._faults.report(f"{type(sink).__name__}.{call} failed", exc)

    def emit(self, event: Event) -> None:
        self._each("emit", event)

    def flush(self) -> None:
        self._each("flush")

    def close(self) -> None:
        self._each("close")
