"""Materialised job results: computed per session, refreshed only where events changed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analytics.queries import materialize
from analytics.queries.materialize import JOBS, job_table, refresh
from analytics.store import EventStore, open_store
from compactor import CompactionSession, ExtractiveSummarizer, ProgressiveCompactor, SpoolSink
from tests.analytics.spool_helpers import ingest, run_session

TABLES = ("job_session_timeline", "job_retention_detail", "job_emergencies", "job_artifacts")


def _home_with_sessions(tmp_path: Path, seeds: list[int]) -> Path:
    home = tmp_path / "home"
    sink = SpoolSink(home / "spool")
    for seed in seeds:
        run_session(home, sink, seed)
    sink.close()
    ingest(home)
    return home


def _stamps(store: EventStore) -> pl.DataFrame:
    return store.query("SELECT job, session_id, version, watermark FROM job_stamps ORDER BY ALL")


def test_first_refresh_computes_every_session_and_a_second_computes_none(tmp_path: Path) -> None:
    home = _home_with_sessions(tmp_path, [1, 2])
    with open_store(home) as store:
        first = refresh(store)
        again = refresh(store)
        stamps = _stamps(store)
        marks = store.query(
            "SELECT session_id, max(seq) AS watermark FROM events GROUP BY ALL ORDER BY ALL"
        )

    assert first.recomputed == {job.name: 2 for job in JOBS}
    assert again.recomputed == {job.name: 0 for job in JOBS}
    assert stamps.height == 2 * len(JOBS)
    for job in JOBS:
        mine = stamps.filter(pl.col("job") == job.name).select("session_id", "watermark")
        assert_frame_equal(mine, marks)


def test_a_new_session_is_the_only_one_recomputed_and_old_rows_stay(tmp_path: Path) -> None:
    home = _home_with_sessions(tmp_path, [1, 2])
    with open_store(home) as store:
        refresh(store)
        before = job_table(store, "job_session_timeline").sort("session_id")
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 3)
    sink.close()
    ingest(home)

    with open_store(home) as store:
        report = refresh(store)
        after = job_table(store, "job_session_timeline").sort("session_id")

    assert report.recomputed == {job.name: 1 for job in JOBS}
    assert after.height == before.height + 1
    old = after.filter(pl.col("session_id").is_in(before.get_column("session_id").to_list()))
    assert_frame_equal(old, before)


def test_a_refresh_of_named_sessions_computes_those_and_leaves_the_others_as_they_were(
    tmp_path: Path,
) -> None:
    home = _home_with_sessions(tmp_path, [1, 2, 3])
    with open_store(home) as store:
        ids = sorted(store.query("SELECT session_id FROM sessions").to_series().to_list())
        refresh(store, sessions=ids[:1])
        once = _stamps(store)
        refresh(store)  # the others, stamped since, must still have their rows after...
        before = {t: job_table(store, t).sort(pl.all()) for t in TABLES}
        report = refresh(store, sessions=ids[1:2])  # ...a refresh that names one of them
        after = {t: job_table(store, t).sort(pl.all()) for t in TABLES}
        stamps = _stamps(store)

    assert set(once.get_column("session_id")) == {ids[0]}
    assert once.height == len(JOBS)
    assert report.recomputed == {job.name: 0 for job in JOBS}
    assert report.dropped == {job.name: 0 for job in JOBS}
    assert set(stamps.get_column("session_id")) == set(ids)
    for table in TABLES:
        assert_frame_equal(after[table], before[table])


def test_a_deleted_session_loses_its_rows_and_a_new_job_version_recomputes_all(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 1)
    gone = run_session(home, sink, 2, delete=True)
    sink.close()
    ingest(home)
    with open_store(home) as store:
        refresh(store)
        rows = job_table(store, "job_session_timeline")
        assert gone.session_id not in rows.get_column("session_id").to_list()
        bumped = tuple(replace(job, version=job.version + 1) for job in JOBS)
        report = refresh(store, bumped)
        versions = store.query("SELECT DISTINCT job, version FROM job_stamps ORDER BY ALL")

    assert report.recomputed == {job.name: 1 for job in JOBS}
    assert versions.get_column("version").to_list() == [
        j.version + 1 for j in sorted(JOBS, key=lambda j: j.name)
    ]


def test_a_refresh_in_chunks_of_one_session_stores_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _home_with_sessions(tmp_path, [1, 2, 3])
    with open_store(home) as store:
        refresh(store)
        whole = {t: job_table(store, t).sort(pl.all()) for t in TABLES}
        monkeypatch.setattr(materialize, "CHUNK_SESSIONS", 1)
        bumped = tuple(replace(job, version=job.version + 1) for job in JOBS)
        steps: list[str] = []
        report = refresh(store, bumped, progress=steps.append)
        chunked = {t: job_table(store, t).sort(pl.all()) for t in TABLES}

    assert report.recomputed == {job.name: 3 for job in JOBS}
    assert len(steps) == 3 * len(JOBS)  # one transaction per job and one-session chunk
    for table in TABLES:
        assert_frame_equal(chunked[table], whole[table], check_dtypes=False)
    assert whole["job_session_timeline"].height == 3


def test_a_session_deleted_after_a_refresh_loses_its_rows_at_the_next(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sink = SpoolSink(home / "spool")
    kept = run_session(home, sink, 1)
    later = run_session(home, sink, 2)
    sink.close()
    ingest(home)
    with open_store(home) as store:
        refresh(store)
        before = set(job_table(store, "job_session_timeline").get_column("session_id"))
    deleting = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 16_000),
        session_id=later.session_id,
        event_sink=SpoolSink(home / "spool"),
    )
    deleting.delete()
    ingest(home)

    with open_store(home) as store:
        report = refresh(store)
        after = set(job_table(store, "job_session_timeline").get_column("session_id"))
        stamps = store.query("SELECT DISTINCT session_id FROM job_stamps").get_column("session_id")

    assert before == {kept.session_id, later.session_id}
    assert after == {kept.session_id}
    assert report.dropped == {job.name: 1 for job in JOBS}
    assert set(stamps) == {kept.session_id}
