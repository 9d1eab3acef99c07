"""The projector: spool files -> the DuckDB event store, idempotently, crash-safely.

It reads each spool file from its last committed offset, stops at the last complete line (a torn
last line is read once it is completed), validates each line (``lines``), and commits valid
events, quarantined lines and the new offsets in one transaction. Replaying the same spool is a
no-op (unique ``event_id``; quarantined lines keyed by host, file, offset and hash). Each offset
keeps a fingerprint (the file's inode and a hash of the bytes just before it): a file replaced, or
truncated and rewritten past its offset, is read again from the start. Only regular files
directly in the spool folder are read (``spoolfiles``); a file that cannot be read now is
skipped with a line in the result and tried again on the next pass. It is the single owner of
a local database while it runs; on a lake it is one of many (one per host and spool), its
offsets kept under its host and spool folder. A projector that keeps running (``watch``, the
app's timer) runs the store's maintenance when its ``Maintenance`` says (on a lake: every few
minutes or few hundred commits) and once when it stops. Agents only ever append to the spool.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import duckdb

from analytics.errors import StoreError
from analytics.store import EventBatch, EventStore, QuarantinedLine
from analytics.store.batch import SpoolPosition
from analytics.store.chunks import Job, Parsed, Part, parse_chunk
from analytics.store.diagnosis import first_line
from analytics.store.lines import parse_line as parse_line
from analytics.store.location import redact
from analytics.store.maintenance import Maintenance
from analytics.store.spoolfiles import (
    TAIL_BYTES,
    SpoolDir,
    SpoolEntry,
    SpoolSkipError,
    read_at,
    read_failure,
    tail_sha256,
)
from analytics.store.spoolfiles import source_name as source_name

CHUNK_BYTES = 64 * 1024 * 1024
FIRST_CHUNK_BYTES = 4 * 1024 * 1024
"""Chunks start at this size and double up to ``chunk_bytes``, so the commits start while the
second chunk is parsed instead of after a whole large one."""
GIL_SWITCH_S = 0.0001
"""Python's GIL switch interval while the parse thread runs beside the commits. DuckDB's Python
client takes the GIL between the tasks of a query (to check for Ctrl-C); at the default 5 ms
each take waited for the parse thread, and the commits spent a third of their time so."""


@dataclass
class IngestResult:
    files: int = 0
    lines: int = 0
    new_events: int = 0
    duplicates: int = 0
    quarantined: int = 0
    bytes_read: int = 0
    commits: int = 0
    """Transactions committed to the store (one per chunk read)."""
    maintained: int = 0
    """How often the store's maintenance ran (``EventStore.checkpoint``)."""
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)
    """Spool files not read, one line each (``<file>: <why>``); a projector says each once
    while it lasts (``watch`` does not repeat it every pass)."""

    def add(self, other: IngestResult) -> None:
        for f in fields(self):  # the counts
            if isinstance(mine := getattr(self, f.name), int):
                setattr(self, f.name, mine + getattr(other, f.name))
        self.seconds += other.seconds
        self.skipped.extend(other.skipped)


@dataclass
class _Next:
    """What the parse thread found next: the chunk (None: no more) and the index of the job
    the next call goes on from (at the chunk's end), ``len(jobs)`` once every file is done."""

    at: int
    parsed: Parsed | None
    skipped: dict[str, str] = field(default_factory=dict)


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


class Projector:
    """Loads every ``*.jsonl`` file in ``spool_dir`` into ``store``; runs the store's
    maintenance when ``maintenance`` (default: ``Maintenance.for_store``) says it is due."""

    def __init__(
        self,
        store: EventStore,
        spool_dir: str | os.PathLike[str],
        *,
        chunk_bytes: int = CHUNK_BYTES,
        maintenance: Maintenance | None = None,
    ) -> None:
        self.store = store
        self.spool_dir = Path(spool_dir)
        self.chunk_bytes = chunk_bytes
        self.maintenance = maintenance or Maintenance.for_store(store)
        self._reported: dict[str, str] = {}
        """Skipped files already said, and why: said again only when the reason changes."""
        self.pass_lock = threading.Lock()
        """Held through each pass of ``watch``: a lender (``analytics.store.lending``) takes it
        to close the store and open it again between passes."""

    def pending_bytes(self) -> int:
        """Bytes of the spool not projected yet (from the listing: no file is opened)."""
        positions = self.store.positions(self.spool_dir)
        with SpoolDir(self.spool_dir).opened() as spool:
            entries, _skipped = spool.listing()
        total = 0
        for entry in entries:
            pos = positions.get(entry.source)
            same = pos is not None and pos.inode == entry.inode and pos.byte_offset <= entry.size
            total += entry.size - (pos.byte_offset if same and pos else 0)
        return total

    def ingest(self, progress: Progress | None = None, *, checkpoint: bool = True) -> IngestResult:
        """Project everything complete in the spool now; returns what was done.

        Commits are durable in DuckDB's write-ahead log; ``checkpoint`` folds the log into the
        database file once at the end (the store defers automatic checkpoints, which would
        otherwise run after nearly every batch and grow slower as the file grows)."""
        started = time.perf_counter()
        total = IngestResult()
        with SpoolDir(self.spool_dir).opened() as spool:
            jobs, skipped = self._plan(spool)
            total.files = len(jobs)
            if jobs:  # the usual poll has none: no thread pool, no switch interval change
                try:
                    self._run(spool, jobs, total, skipped, progress)
                except StoreError as exc:
                    self.maintenance.note(total.commits)
                    raise _so_far(exc, total) from exc
        total.skipped = self._news(skipped)
        self.maintenance.note(total.commits)
        if checkpoint and total.lines:
            try:
                self.maintenance.run(self.store)
            except StoreError as exc:
                raise _so_far(exc, total) from exc
            total.maintained += 1
        total.seconds = time.perf_counter() - started
        return total

    def _plan(self, spool: SpoolDir) -> tuple[list[Job], dict[str, str]]:
        """The files with bytes to read and where to start; {source: why} for files skipped."""
        positions = self.store.positions(self.spool_dir)
        entries, skipped = spool.listing()
        jobs = []
        for entry in entries:
            pos = positions.get(entry.source)
            if pos is not None and (pos.byte_offset, pos.inode) == (entry.size, entry.inode):
                continue  # unchanged (a rewrite to the very same length is read once it grows)
            try:
                job = self._resume(spool, entry, pos)
            except SpoolSkipError as exc:
                skipped[entry.source] = str(exc)
                continue
            if job is not None:
                jobs.append(job)
        return jobs, skipped

    @staticmethod
    def _resume(spool: SpoolDir, entry: SpoolEntry, pos: SpoolPosition | None) -> Job | None:
        """Where to read ``entry`` from: its committed position if the file there is still the
        one read (same inode, same bytes before the offset), else its start."""
        fd, info = spool.open(entry)
        try:
            entry = replace(entry, inode=info.st_ino, size=info.st_size)
            start = SpoolPosition(0, 0)
            if pos is not None and pos.inode == entry.inode and pos.byte_offset <= entry.size:
                lead = min(TAIL_BYTES, pos.byte_offset)
                before = read_at(fd, pos.byte_offset - lead, lead)
                if tail_sha256(before) == pos.tail_sha256:
                    start = pos
        except OSError as exc:
            raise read_failure(exc) from None
        finally:
            os.close(fd)
        return Job(entry, start) if entry.size > start.byte_offset else None

    def _run(
        self,
        spool: SpoolDir,
        jobs: list[Job],
        total: IngestResult,
        skipped: dict[str, str],
        progress: Progress | None,
    ) -> None:
        """Parse chunk after chunk in a thread while the previous one commits."""
        todo = sum(job.entry.size - job.start.byte_offset for job in jobs)
        # Parsing the next chunk (Python) overlaps committing this one (DuckDB, which releases
        # the GIL while it works): on two cores that hides most of the parsing time.
        with (
            self.store.one_thread(),
            _SWITCH_INTERVAL.lowered(GIL_SWITCH_S),
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="compactlens-parse") as pool,
        ):
            size = min(FIRST_CHUNK_BYTES, self.chunk_bytes)
            first = jobs[0].start
            pending: Future[_Next] = pool.submit(
                self._parse_next, spool, jobs, 0, first.byte_offset, first.lines, size
            )
            while True:
                found = pending.result()
                skipped.update(found.skipped)
                parsed = found.parsed
                if parsed is None:
                    return
                # the next chunk, of this file or the next one, is parsed during this commit
                size = min(size * 2, self.chunk_bytes)
                end = parsed.last
                pending = pool.submit(
                    self._parse_next,
                    spool,
                    jobs,
                    found.at,
                    end.end,
                    end.end_line,
                    size,
                    tail=end.tail_sha256,
                )
                total.add(self._commit(parsed))
                if progress:
                    progress(total.bytes_read, todo)

    def _parse_next(
        self,
        spool: SpoolDir,
        jobs: list[Job],
        at: int,
        offset: int,
        lines: int,
        size: int,
        *,
        tail: str | None = None,
    ) -> _Next:
        """The next ``size`` bytes or so from ``offset`` of ``jobs[at]``'s file, then from the
        start of the following files (their planned starts) while a file's new bytes end
        before ``size`` is reached; a file that cannot be read is skipped."""
        found = _Next(at, None)
        batch, bad, parts = EventBatch(), list[QuarantinedLine](), list[Part]()
        budget = size
        while found.at < len(jobs):
            job = jobs[found.at]
            try:
                part = parse_chunk(spool, job, offset, lines, budget, batch, bad, tail=tail)
            except SpoolSkipError as exc:
                found.skipped[job.entry.source] = str(exc)
                part = None
            if part is not None:
                parts.append(part)
                budget -= part.bytes
                if part.end < job.entry.size or budget <= 0:
                    break  # this file has more, or the chunk is full: go on from here
            found.at += 1  # past the last file: the next call finds nothing
            if found.at < len(jobs):
                offset, lines = jobs[found.at].start.byte_offset, jobs[found.at].start.lines
                tail = None  # the next file's own start, with its fingerprint
        if parts:
            batch.seal()
            found.parsed = Parsed(batch, bad, parts)
        return found

    def _commit(self, parsed: Parsed) -> IngestResult:
        """Events, quarantined lines and the new position of each file read, in one
        transaction."""
        positions = {
            part.entry.source: SpoolPosition(
                part.end, part.end_line, part.entry.inode, part.tail_sha256
            )
            for part in parsed.parts
        }
        done = self.store.commit_batch(parsed.batch, parsed.bad, positions, spool=self.spool_dir)
        return IngestResult(
            commits=1,
            lines=sum(part.end_line - part.lines_before for part in parsed.parts),
            new_events=done.events,
            duplicates=len(parsed.batch) - done.events,
            quarantined=done.quarantined,
            bytes_read=parsed.bytes,
        )

    def _news(self, skipped: dict[str, str]) -> list[str]:
        """The skip lines not said before by this projector (a file read again is forgotten)."""
        news = [
            f"{source}: {why}"
            for source, why in sorted(skipped.items())
            if self._reported.get(source) != why
        ]
        self._reported = dict(skipped)
        return news

    def maintain(self, *, stopping: bool = False) -> bool:
        """Run the store's maintenance if it is due (``stopping``: if anything was committed
        since it last ran); whether it ran. A failed run is put off (``Maintenance.failed``)
        and its ``StoreError`` raised."""
        if not (self.maintenance.pending if stopping else self.maintenance.due()):
            return False
        try:
            self.maintenance.run(self.store)
        except StoreError:
            self.maintenance.failed()
            raise
        return True

    def watch(
        self,
        *,
        interval_s: float = 0.5,
        stop: threading.Event | None = None,
        on_result: Callable[[IngestResult], None] | None = None,
        reconnect: Reconnect | None = None,
    ) -> IngestResult:
        """Ingest repeatedly until ``stop`` is set; a last ingest runs after it is set. The
        store's maintenance runs between passes when due, and at the end if anything was
        committed since it last ran. A file that cannot be read is skipped (said once) and
        tried again on every pass. With ``reconnect``, a pass whose store failed (its server
        gone, a maintenance run that failed) is told to ``reconnect.on_error``, the store is
        opened again after a wait that grows while the failures last, and watching goes on;
        a failure of the last pass, after ``stop``, is raised."""
        stop = stop or threading.Event()
        total = IngestResult()
        failures = 0
        closed = False
        while True:
            stopping = stop.is_set()
            try:
                with self.pass_lock:
                    if closed and reconnect is not None:
                        self.store = reconnect.reopen()
                        closed = False
                    result = self._pass(stopping, total)
            except (StoreError, duckdb.Error) as exc:
                if reconnect is None or stopping:
                    raise
                failures += 1
                wait = reconnect.wait_s(failures)
                reconnect.on_error(_said(exc), wait)
                if not closed:  # its connection may be dead: opened again before the next pass
                    with contextlib.suppress(Exception):
                        self.store.close()
                    closed = True
                stop.wait(wait)
                continue
            failures = 0
            if on_result is not None and (result.lines or result.quarantined or result.skipped):
                on_result(result)
            if stopping:
                return total
            stop.wait(interval_s)

    def _pass(self, stopping: bool, total: IngestResult) -> IngestResult:
        """One ingest and, when due, the maintenance; added to ``total`` as each is done (a
        maintenance that fails after the ingest committed leaves the ingest counted)."""
        result = self.ingest(checkpoint=False)
        total.add(result)
        maintained = self.maintain(stopping=stopping)
        result.maintained += maintained
        total.maintained += maintained
        return result


@dataclass
class Reconnect:
    """How a watching projector carries on after its store failed: ``reopen`` opens the store
    again (its ``StoreError`` is one more failure), ``on_error`` is told what failed and how
    long the projector waits before it tries again: ``first_s``, doubling with each failure in
    a row, at most ``max_s``."""

    reopen: Callable[[], EventStore]
    on_error: Callable[[str, float], None] = lambda said, wait_s: None
    first_s: float = 1.0
    max_s: float = 30.0

    def wait_s(self, failures: int) -> float:
        """The wait after the ``failures``-th failure in a row."""
        return min(self.first_s * 2.0 ** min(failures - 1, 32), self.max_s)


def _so_far(exc: StoreError, done: IngestResult) -> StoreError:
    """``exc`` (of its own class) saying what this ingest committed before it failed: a
    failure after some commits is no "nothing was committed"."""
    if done.commits:
        so_far = (
            f"Before that, this ingest committed {done.new_events:,} new events "
            f"({done.lines:,} spool lines in {done.commits:,} commits): they are stored, and "
            "the next ingest goes on after them."
        )
    else:
        so_far = "This ingest committed nothing."
    return type(exc)(f"{str(exc).rstrip('.')}. {so_far}", exc.path)


def _said(exc: BaseException) -> str:
    """What failed, in one line without any password (a ``StoreError`` says it already)."""
    if isinstance(exc, StoreError):
        return str(exc)
    return f"{type(exc).__name__}: {redact(first_line(exc))}"
