"""``ingest``, ``ingest --watch`` and ``rebuild``: the commands that only project the spool.

Each opens the selected store (a local file as its one owner, a lake as one of many writers),
projects what is complete in the spool and reports the lines it quarantined. ``run_watch``
keeps projecting until SIGTERM or SIGINT, so that imports and agents can append to the spool
meanwhile. Nothing here prints.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from types import FrameType

import typer

from analytics.queries.stats import quarantined_since
from analytics.store import (
    DB_NAME,
    EventStore,
    Lake,
    LakeStore,
    QuarantinedLine,
    open_store,
    store_location,
)
from analytics.store.lending import StoreLender, lend_store
from analytics.store.maintenance import Maintenance
from analytics.store.projector import IngestResult, Progress, Projector, Reconnect
from analytics.store.rebuilding import rebuild

PathArg = str | os.PathLike[str]


@dataclass
class IngestReport:
    """One projection of the spool: what it did and the lines it quarantined."""

    result: IngestResult
    quarantined: list[QuarantinedLine]
    backup: Path | None = None
    """For a rebuild, where the old database file was moved."""
    backup_bytes: int = 0
    """Its size on disk, the write-ahead log included."""


def run_ingest(home: PathArg, *, on_ingest: Progress | None = None) -> IngestReport:
    """Project everything complete in the spool now."""
    root = Path(home)
    with open_store(root) as store:
        started = dt.datetime.now(dt.UTC)
        result = Projector(store, root / "spool").ingest(on_ingest)
        return IngestReport(result, quarantined_since(store, started))


MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = 86_400.0


def interval_seconds(value: float) -> float:
    """``--interval``, checked: a finite number of seconds from ``MIN_INTERVAL_S`` to
    ``MAX_INTERVAL_S`` (a day). ``inf`` made the watch's wait raise OverflowError and
    ``nan`` slipped past a range check (every comparison with it is false)."""
    if not (math.isfinite(value) and MIN_INTERVAL_S <= value <= MAX_INTERVAL_S):
        raise typer.BadParameter(
            f"{value:g} is not between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} seconds"
        )
    return value


@dataclass(frozen=True)
class MaintenanceTimes:
    """When a watching projector runs the store's maintenance, as the command line says it:
    None keeps the store's default for that count, 0 turns it off."""

    every_s: float | None = None
    every_commits: int | None = None

    def policy(self, store: EventStore) -> Maintenance:
        chosen = Maintenance.for_store(store)
        if self.every_s is not None:
            chosen = replace(chosen, every_s=self.every_s or None)
        if self.every_commits is not None:
            chosen = replace(chosen, every_commits=self.every_commits or None)
        return chosen


def run_watch(
    home: PathArg,
    *,
    interval_s: float,
    on_result: Callable[[IngestResult], None] | None = None,
    on_ready: Callable[[], None] | None = None,
    maintenance: MaintenanceTimes | None = None,
    on_error: Callable[[str, float], None] | None = None,
) -> IngestReport:
    """Project the spool every ``interval_s`` until SIGTERM or SIGINT, then once more; the
    store's maintenance runs as ``maintenance`` says (default: the store's policy).

    On a lake, a pass that fails (PostgreSQL restarting or gone, a maintenance run that
    failed) does not end the watch: ``on_error`` is told why and how long it waits, the lake
    is opened again (``RECONNECT_FIRST_S``, doubling while it keeps failing, at most
    ``RECONNECT_MAX_S``) and the events that waited in the spool meanwhile arrive. The local
    file has one owner, this process, and a failure there ends the watch as before.

    The projector runs in a worker thread; the main thread only waits, so that a signal handler
    never runs while the main thread holds a lock the handler needs.
    """
    root = Path(home)
    store = open_store(root)
    projector: Projector | None = None
    lender: StoreLender | None = None
    try:
        started = dt.datetime.now(dt.UTC)
        policy = (maintenance or MaintenanceTimes()).policy(store)
        projector = Projector(store, root / "spool", maintenance=policy)
        reconnect = (
            Reconnect(
                lambda: open_store(root),
                on_error or (lambda said, wait_s: None),
                RECONNECT_FIRST_S,
                RECONNECT_MAX_S,
            )
            if isinstance(store, LakeStore)
            else None
        )
        lender = _lender(root, projector)  # reading commands borrow a local store meanwhile
        stop = threading.Event()
        with _stop_on_signals(stop):
            if on_ready is not None:
                on_ready()
            watch = partial(
                projector.watch,
                interval_s=interval_s,
                stop=stop,
                on_result=on_result,
                reconnect=reconnect,
            )
            result = _in_thread(watch)
        if lender is not None:
            lender.close()  # no loan may close the store under the last read below
        return IngestReport(result, quarantined_since(projector.store, started))
    finally:
        if lender is not None:
            lender.close()
        (projector.store if projector is not None else store).close()


def _lender(root: Path, projector: Projector) -> StoreLender | None:
    """A lender of the watched store to reading commands (None for a lake: no owner)."""

    def release() -> None:
        projector.store.close()

    def reopen() -> None:
        projector.store = open_store(root)

    return lend_store(projector.store, projector.pass_lock, release, reopen)


RECONNECT_FIRST_S = 1.0
"""A watch on a lake whose pass failed waits this long before it opens the lake again ..."""
RECONNECT_MAX_S = 30.0
"""... twice as long after each failure in a row, at most this long."""


@dataclass
class _Outcome:
    result: IngestResult | None = None
    error: BaseException | None = None


def _in_thread(watch: Callable[[], IngestResult]) -> IngestResult:
    outcome = _Outcome()

    def work() -> None:
        try:
            outcome.result = watch()
        except BaseException as exc:
            outcome.error = exc

    worker = threading.Thread(target=work, name="compactlens-watch", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
    if outcome.error is not None:
        raise outcome.error
    assert outcome.result is not None
    return outcome.result


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


def run_rebuild(home: PathArg, *, on_ingest: Progress | None = None) -> IngestReport:
    """Recreate the database from the spool; refuses while another process holds it. A lake
    holds every host's events, more than this spool: its projections are recomputed from its
    events table instead, after this spool is projected."""
    root = Path(home)
    started = dt.datetime.now(dt.UTC)
    if isinstance(store_location(root), Lake):
        with open_store(root) as store:
            projected = Projector(store, root / "spool").ingest(on_ingest)
            store.rebuild_projections()
            return IngestReport(projected, quarantined_since(store, started))
    result = rebuild(root, on_ingest)
    with EventStore(root / DB_NAME, read_only=True) as store:
        quarantined = quarantined_since(store, started)
    return IngestReport(result.ingest, quarantined, result.backup, result.backup_bytes)
