"""Lake maintenance while a projector keeps running (issue 20: small commits must not leave one
Parquet file per commit forever).

A watching projector (``Projector.watch``, what ``ingest --watch`` runs) and the app's projector
(``app.owner.StoreOwner``) commit on every pass; on a lake they run the store's maintenance
(expire, ``CHECKPOINT``, clean up) every few commits or seconds. Here inlining is lowered so that
every small commit writes Parquet files, the spool grows by a small append per pass (appended
from the projector's own ``on_result``: no sleeps), and the catalog's live data files and the
Parquet files on disk are counted after each pass: they stay bounded while the commits grow,
and every event still arrives exactly once. On the local file nothing periodic runs; it is
checkpointed once when the watch stops, as before. Real PostgreSQL, real lake, real files.

CI watches ``PASSES`` = 12 passes (three maintenance cycles of ``EVERY_COMMITS`` commits: the
counts must fall back after each, never above the first cycle's peak); ``bench/lake_stress.py``
multiplies the passes by ``COMPACTLENS_STRESS_ROUNDS``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from analytics.store import EventStore, LakeStore, select, selected
from analytics.store import lake as lake_module
from analytics.store.lake import CATALOG
from analytics.store.maintenance import Maintenance
from analytics.store.projector import IngestResult, Projector
from app.owner import StoreOwner
from tests.analytics.spool_helpers import usage_lines, write_lines
from tests.analytics.store.conftest import Backend
from tests.analytics.store.test_lake_writers import STRESS_ROUNDS

PASSES = 12 * STRESS_ROUNDS
EVENTS_PER_PASS = 30
EVERY_COMMITS = 4
LIVE_FILES_SQL = f"""SELECT count(*) FROM __ducklake_metadata_{CATALOG}.ducklake_data_file
    WHERE end_snapshot IS NULL"""


@pytest.fixture
def no_inlining(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit writes its rows as Parquet (the case maintenance exists for)."""
    monkeypatch.setattr(lake_module, "INLINE_ROWS", 0)


def _live_files(store: EventStore) -> int:
    return int(store.query(LIVE_FILES_SQL).item())


def _disk_files(lake: Backend) -> int:
    assert lake.lake is not None
    return len(list(lake.lake.data_path.rglob("*.parquet")))


def _append(spool: Path, n: int) -> None:
    write_lines(spool / "agent.jsonl", usage_lines(f"session-{n}", EVENTS_PER_PASS))


def _assert_exactly_once(store: EventStore, expected: int) -> None:
    counts = store.query("SELECT count(*), count(DISTINCT event_id) FROM events").row(0)
    assert counts == (expected, expected)


def test_watch_on_a_lake_keeps_files_bounded_while_every_event_lands_once(
    lake: Backend, no_inlining: None
) -> None:
    assert lake.lake is not None
    spool = lake.home / "spool"
    with LakeStore(lake.lake, keep_snapshots_s=0) as store:
        projector = Projector(store, spool, maintenance=Maintenance(None, EVERY_COMMITS))
        stop = threading.Event()
        live: list[int] = []
        disk: list[int] = []
        appended = [1]

        def next_append(result: IngestResult) -> None:
            live.append(_live_files(store))
            disk.append(_disk_files(lake))
            if appended[0] == PASSES:
                stop.set()
                return
            _append(spool, appended[0])
            appended[0] += 1

        _append(spool, 0)
        total = projector.watch(interval_s=0.001, stop=stop, on_result=next_append)
        after = _live_files(store)
        _assert_exactly_once(store, PASSES * EVENTS_PER_PASS)

    assert total.commits == PASSES
    assert total.maintained == PASSES // EVERY_COMMITS + (PASSES % EVERY_COMMITS > 0)
    # every commit adds files (one per table it wrote); each run merges them back, so the
    # counts never pass the first cycle's peak, far below what the commits alone would leave
    growth = live[1] - live[0]
    assert growth > 0, live
    assert max(live) <= max(live[:EVERY_COMMITS]) < live[0] + growth * (PASSES - 1), live
    assert max(disk) <= max(disk[:EVERY_COMMITS]), disk  # replaced files deleted too
    assert after <= live[0], (after, live)


def test_the_apps_projector_runs_lake_maintenance_between_ticks(
    lake: Backend, no_inlining: None
) -> None:
    spool = lake.home / "spool"
    ticks = 6
    previous = selected()
    select(lake.selection)
    try:
        owner = StoreOwner.open(lake.home, interval_s=3600)  # ticks driven here, not by time
        try:
            assert owner.projector is not None
            owner.projector.maintenance = Maintenance(None, 2)
            live = []
            for n in range(ticks):
                _append(spool, n)
                owner.ingest()
                assert owner.last_error is None
                live.append(owner.read(_live_files))
            assert owner.projector.maintenance.runs == ticks // 2
            assert max(live) < live[0] * ticks, live
            owner.read(lambda store: _assert_exactly_once(store, ticks * EVENTS_PER_PASS))
        finally:
            owner.close()
    finally:
        select(previous)


def test_watch_on_the_local_file_checkpoints_once_when_it_stops(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    with EventStore(tmp_path / "compactlens.duckdb") as store:
        projector = Projector(store, spool)
        assert not projector.maintenance.periodic
        stop = threading.Event()
        passes = [0]

        def next_append(result: IngestResult) -> None:
            passes[0] += 1
            if passes[0] == 5:
                stop.set()
            else:
                _append(spool, passes[0])

        _append(spool, 0)
        total = projector.watch(interval_s=0.001, stop=stop, on_result=next_append)
        _assert_exactly_once(store, 5 * EVENTS_PER_PASS)
    assert (total.commits, total.maintained) == (5, 1)


def test_maintenance_is_due_by_commits_or_by_time_and_never_without_commits() -> None:
    now = [0.0]
    policy = Maintenance(every_s=60.0, every_commits=3, clock=lambda: now[0])
    assert not policy.due()
    now[0] = 1000.0
    assert not policy.due()  # an idle projector runs nothing
    policy.note(1)
    now[0] += 59
    assert not policy.due()
    now[0] += 1
    assert policy.due()  # a minute after the first commit since the last run
    policy.ran()
    policy.note(3)
    assert policy.due()  # three commits
    with pytest.raises(ValueError, match="every_commits"):
        Maintenance(every_commits=0)


@pytest.fixture(autouse=True)
def _restore_selection() -> Iterator[None]:
    previous = selected()
    yield
    select(previous)
