"""The projector: spool files -> the DuckDB event store, idempotently, crash-safely.

It reads each spool file from its last committed offset, stops at the last complete line (a torn
last line is read once it is completed), validates each line as an ``Event`` (upcasting older
schemas), and commits valid events, quarantined lines and the new offsets in one transaction.
Replaying the same spool is a no-op (unique ``event_id``). It is the single owner of the
database while it runs; agents only ever append to the spool.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from analytics.store import DB_NAME, EventBatch, EventStore, QuarantinedLine, claim_parent
from analytics.store.files import (
    BACKUP_STAMP,
    OwnerLock,
    foreign_lock_pid,
    locked,
    move_aside,
    prune_backups,
    unwritable,
    unwritable_reason,
)
from analytics.text import SURROGATE
from compactor.events import Event, parse_event

CHUNK_BYTES = 64 * 1024 * 1024
FIRST_CHUNK_BYTES = 4 * 1024 * 1024
"""Chunks start at this size and double up to ``chunk_bytes``, so the commits start while the
second chunk is parsed instead of after a whole large one."""
GIL_SWITCH_S = 0.0001
"""Python's GIL switch interval while the parse thread runs beside the commits. DuckDB's Python
client takes the GIL between the tasks of a query (to check for Ctrl-C); at the default 5 ms
each take waited for the parse thread, and the commits spent a third of their time so."""
MAX_RAW = 64 * 1024


@dataclass
class IngestResult:
    files: int = 0
    lines: int = 0
    new_events: int = 0
    duplicates: int = 0
    quarantined: int = 0
    bytes_read: int = 0
    seconds: float = 0.0

    def add(self, other: IngestResult) -> None:
        for name in ("files", "lines", "new_events", "duplicates", "quarantined", "bytes_read"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.seconds += other.seconds


@dataclass
class _Parsed:
    """One chunk of a spool file, read and validated, not yet committed."""

    path: Path
    batch: EventBatch
    bad: list[QuarantinedLine]
    end: int
    """Byte offset just after the chunk's last complete line."""
    end_line: int
    lines_before: int
    bytes: int = 0


Progress = Callable[[int, int], None]
"""Called with (bytes read so far, bytes to read) during an ingest."""


class _SwitchInterval:
    """Python's thread switch interval (process-wide), lowered while any ingest of this process
    runs: ingests may overlap, and the last one to end restores the interval they found."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._before = 0.0

    @contextlib.contextmanager
    def lowered(self, seconds: float) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._before = sys.getswitchinterval()
                sys.setswitchinterval(seconds)
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    sys.setswitchinterval(self._before)


_SWITCH_INTERVAL = _SwitchInterval()


def _reason(exc: Exception, text: str = "") -> str:
    if "surrogates not allowed" in str(exc) and (found := _lone_surrogate(text)):
        where, char = found
        return (
            f"invalid event: {where} holds a lone surrogate (\\u{ord(char):04x}), which is not "
            "Unicode text"
        )
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        return f"invalid event: {loc}: {err['msg']}" if loc else f"invalid event: {err['msg']}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc.msg} at column {exc.colno}"
    return f"invalid event: {exc}"


def _lone_surrogate(text: str) -> tuple[str, str] | None:
    """(where, the character): the first key or string of the JSON line ``text`` holding a lone
    surrogate, as a path such as ``payload.messages[2].content``; None if there is none."""
    try:
        stack: list[tuple[str, Any]] = [("the line", json.loads(text))]
    except (ValueError, RecursionError):
        return None
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key, inner in reversed(value.items()):
                path = key if where == "the line" else f"{where}.{key}"
                stack.append((path, inner))
                stack.append((f"a key of {where}", key))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", inner) for i, inner in reversed(list(enumerate(value))))
        elif isinstance(value, str) and (char := SURROGATE.search(value)):
            return where, char.group()
    return None


def source_name(path: Path) -> str:
    """The name a spool file is stored under (offsets, events, quarantine): its file name, with
    bytes that are not UTF-8 (a name Python decoded with ``surrogateescape``) written as
    ``\\xNN``, so that such a file loads instead of failing every commit."""
    return path.name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def parse_line(text: str) -> tuple[Event, str]:
    """(event, JSON to store) for one spool line; raises ValueError/ValidationError if invalid.

    ``Event`` accepts the current schema version of each type only; anything else goes through
    ``parse_event``, which upcasts older versions or raises a clean error."""
    try:
        return Event.model_validate_json(text), text
    except ValidationError:
        try:
            event = parse_event(text)
        except RecursionError:  # json.loads gives up past ~1,000 levels: a bad line, no crash
            raise ValueError("JSON nested too deeply to parse (over about 1,000 levels)") from None
        return event, event.model_dump_json()


_CANONICAL_START = '{"event_id":'
_PAYLOAD_KEY = ',"payload":'


def _payload_text(text: str, event: Event) -> str:
    """The payload's JSON text, sliced out of the line when the line is in the layout our
    serialiser writes (payload last; a bare ``"`` only ever delimits keys and strings, so the
    first ``,"payload":`` is the key), else serialised again."""
    if text.startswith(_CANONICAL_START) and text.endswith("}}"):
        at = text.find(_PAYLOAD_KEY)
        if at > text.find('"producer":') > 0:
            return text[at + len(_PAYLOAD_KEY) : -1]
    return event.payload.model_dump_json()


class Projector:
    """Loads every ``*.jsonl`` under ``spool_dir`` into ``store``."""

    def __init__(
        self,
        store: EventStore,
        spool_dir: str | os.PathLike[str],
        *,
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self.store = store
        self.spool_dir = Path(spool_dir)
        self.chunk_bytes = chunk_bytes

    def pending_bytes(self) -> int:
        offsets = self.store.offsets()
        return sum(
            max(0, f.stat().st_size - offsets.get(source_name(f), (0, 0))[0]) for f in self._files()
        )

    def _files(self) -> list[Path]:
        if not self.spool_dir.is_dir():
            return []
        return sorted(p for p in self.spool_dir.iterdir() if p.suffix == ".jsonl" and p.is_file())

    def ingest(self, progress: Progress | None = None, *, checkpoint: bool = True) -> IngestResult:
        """Project everything complete in the spool now; returns what was done.

        Commits are durable in DuckDB's write-ahead log; ``checkpoint`` folds the log into the
        database file once at the end (the store defers automatic checkpoints, which would
        otherwise run after nearly every batch and grow slower as the file grows)."""
        started = time.perf_counter()
        total = IngestResult()
        offsets = self.store.offsets()
        # Parsing the next chunk (Python) overlaps committing this one (DuckDB, which releases
        # the GIL while it works): on two cores that hides most of the parsing time.
        jobs: list[tuple[Path, int, int]] = []
        todo = 0
        for path in self._files():
            offset, lines = offsets.get(source_name(path), (0, 0))
            length = path.stat().st_size
            if length < offset:
                offset, lines = 0, 0  # replaced file: re-read; duplicates skipped by id
            if length != offset:
                jobs.append((path, offset, lines))
                todo += length - offset
        total.files = len(jobs)
        if not jobs:  # the usual poll: no thread pool, no process-wide switch interval change
            total.seconds = time.perf_counter() - started
            return total
        with (
            self.store.one_thread(),
            _SWITCH_INTERVAL.lowered(GIL_SWITCH_S),
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="compactlens-parse") as pool,
        ):
            size = min(FIRST_CHUNK_BYTES, self.chunk_bytes)
            pending: Future[tuple[int, _Parsed | None]] | None = pool.submit(
                self._parse_next, jobs, 0, *jobs[0][1:], size
            )
            while pending is not None:
                at, parsed = pending.result()
                if parsed is None:
                    break
                # the next chunk, of this file or the next one, is parsed during this commit
                size = min(size * 2, self.chunk_bytes)
                pending = pool.submit(self._parse_next, jobs, at, parsed.end, parsed.end_line, size)
                total.add(self._commit(parsed))
                if progress:
                    progress(total.bytes_read, todo)
        if checkpoint and total.lines:
            self.store.checkpoint()
        total.seconds = time.perf_counter() - started
        return total

    def _parse_next(
        self, jobs: list[tuple[Path, int, int]], at: int, offset: int, lines: int, size: int
    ) -> tuple[int, _Parsed | None]:
        """The next chunk from ``offset`` of ``jobs[at]``'s file, or else from the start of the
        following files (their committed offsets); (index of its file, chunk or None)."""
        while at < len(jobs):
            parsed = self._parse_chunk(jobs[at][0], offset, lines, size)
            if parsed is not None:
                return at, parsed
            at += 1
            if at < len(jobs):
                offset, lines = jobs[at][1], jobs[at][2]
        return at, None

    def _parse_chunk(self, path: Path, offset: int, lines: int, size: int) -> _Parsed | None:
        """Read and validate the complete lines in the ``size`` bytes after ``offset`` (more
        if one line is longer; None: nothing complete)."""
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read(size)
            if data and b"\n" not in data:  # one line longer than size: read on to its end
                pieces = [data]
                while b"\n" not in pieces[-1]:  # each piece scanned once, joined once
                    more = fh.read(size)
                    if not more:
                        return None  # only a torn last line: wait for the rest
                    pieces.append(more)
                data = b"".join(pieces)
        end = data.rfind(b"\n")
        if end < 0:
            return None
        chunk = data[: end + 1]
        parsed = _Parsed(path, EventBatch(), [], offset + len(chunk), lines, lines_before=lines)
        source = source_name(path)
        for raw in chunk.split(b"\n")[:-1]:
            parsed.end_line += 1
            if raw.strip():
                self._parse_into(raw, source, parsed.end_line, parsed.batch, parsed.bad)
        parsed.bytes = len(chunk)
        parsed.batch.seal()
        return parsed

    def _commit(self, parsed: _Parsed) -> IngestResult:
        """Events, quarantined lines and the new offset of one chunk, in one transaction."""
        offsets = {source_name(parsed.path): (parsed.end, parsed.end_line)}
        new = self.store.commit_batch(parsed.batch, parsed.bad, offsets)
        return IngestResult(
            lines=parsed.end_line - parsed.lines_before,
            new_events=new,
            duplicates=len(parsed.batch) - new,
            quarantined=len(parsed.bad),
            bytes_read=parsed.bytes,
        )

    @staticmethod
    def _parse_into(
        raw: bytes, source: str, line: int, batch: EventBatch, bad: list[QuarantinedLine]
    ) -> None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad.append(
                QuarantinedLine(
                    source,
                    line,
                    f"not UTF-8 text at byte {exc.start}",
                    raw[:MAX_RAW].decode("utf-8", "replace"),
                )
            )
            return
        try:
            event, stored = parse_line(text)
        except (ValueError, TypeError, KeyError, OverflowError, ValidationError) as exc:
            bad.append(QuarantinedLine(source, line, _reason(exc, text), text[:MAX_RAW]))
            return
        batch.event_id.append(event.event_id)
        batch.type.append(event.type)
        batch.schema_version.append(event.schema_version)
        batch.session_id.append(event.session_id)
        batch.seq.append(event.seq)
        batch.occurred_at.append(event.occurred_at)
        batch.payload.append(_payload_text(stored, event))
        batch.source.append(source)
        batch.line.append(line)

    def watch(
        self,
        *,
        interval_s: float = 0.5,
        stop: threading.Event | None = None,
        on_result: Callable[[IngestResult], None] | None = None,
    ) -> IngestResult:
        """Ingest repeatedly until ``stop`` is set; a last ingest runs after it is set."""
        stop = stop or threading.Event()
        total = IngestResult()
        while True:
            stopping = stop.is_set()
            result = self.ingest(checkpoint=stopping)
            total.add(result)
            if on_result is not None and (result.lines or result.quarantined):
                on_result(result)
            if stopping:
                return total
            stop.wait(interval_s)


@dataclass
class RebuildResult:
    ingest: IngestResult
    backup: Path | None
    """Where the old database file was moved (None if there was none); its write-ahead log,
    if it had one, is beside it with ``.wal`` appended."""
    backup_bytes: int = 0
    """Size of that backup (database file plus write-ahead log)."""
    pruned: list[Path] = field(default_factory=list)
    """Older backups deleted because only the newest ``keep_backups`` are kept."""


def rebuild(
    home: str | os.PathLike[str], progress: Progress | None = None, *, keep_backups: int = 1
) -> RebuildResult:
    """Recreate the database from the spool alone, whatever state the old file is in (corrupt,
    half-created, another version, a directory, read-only); the old file is kept as a full
    backup and only the newest ``keep_backups`` backups are kept. Refuses (StoreLockedError)
    while a live process holds the database, and StoreUnwritableError when the home itself
    cannot be written."""
    if keep_backups < 1:
        raise ValueError(
            f"keep_backups must be at least 1 (every rebuild keeps its backup), got {keep_backups}"
        )
    root = Path(home)
    db = root / DB_NAME
    claim_parent(db)
    lock = OwnerLock(db, exclusive=True)  # held from the move until the new store is closed
    try:
        pid = foreign_lock_pid(db)
        if pid is not None:
            raise locked(db, pid, "another program")
        stamp = dt.datetime.now(dt.UTC).strftime(BACKUP_STAMP)
        try:
            moved = move_aside(db, stamp)
            pruned = prune_backups(db, keep_backups)
        except OSError as exc:
            raise unwritable(db, unwritable_reason(db) or exc.strerror or str(exc)) from exc
        with EventStore(db, owner_lock=lock) as store:
            result = Projector(store, root / "spool").ingest(progress)
    finally:
        lock.release()
    return RebuildResult(result, moved.path if moved else None, moved.bytes if moved else 0, pruned)
