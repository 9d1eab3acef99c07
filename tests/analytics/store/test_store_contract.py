"""The store contract, run against every backend: the local DuckDB file and a DuckLake on a
PostgreSQL the tests start (``conftest.backend``).

Same tables, same projections, same jobs: a spool ingested into either backend gives the tables
a local ingest of it gives, twice is once, a torn last line waits, a rebuild of the projections
changes nothing, job results are replaced in one commit, and the tables export as Parquet.
Spools are synthetic sessions run through ``CompactionSession`` with a real ``SpoolSink``, run
once a module and copied into each test's home; the tests that only read share one ingested
store a backend (``ingested``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from analytics.queries.materialize import JOBS, refresh
from analytics.queries.stats import fleet_stats
from analytics.store import STORE_SCHEMA_VERSION, TABLES, EventStore, Selection
from analytics.store.projector import Projector
from analytics.store.results import JobResults
from compactor import SpoolSink
from tests.analytics.spool_helpers import (
    assert_same_tables,
    run_session,
    snapshot,
    spool_line_count,
    usage_lines,
    write_lines,
)
from tests.analytics.store.conftest import Backend, lake_backend
from tests.analytics.store.postgres import PostgresServer

LAKE_ONLY_COLUMNS = {"spool_offsets": ("host", "spool")}
"""Columns a lake adds: whose spool an offset belongs to."""
ENGINE_META_KEYS = ("engine", "engine_version")


def comparable(store: EventStore) -> dict[str, pl.DataFrame]:
    """Every table as ``spool_helpers.snapshot`` takes it, less what names the backend."""
    out = snapshot(store)
    for name, columns in LAKE_ONLY_COLUMNS.items():
        out[name] = out[name].drop([c for c in columns if c in out[name].columns])
    out["meta"] = out["meta"].filter(~pl.col("key").is_in(ENGINE_META_KEYS))
    return out


def realistic_spool(home: Path) -> None:
    """Two spool files: a full session, a deleted one, a metadata one, and one bad line."""
    first, second = SpoolSink(home / "spool"), SpoolSink(home / "spool")
    run_session(home, first, 1)
    run_session(home, second, 2, delete=True)
    run_session(home, first, 3, capture="metadata")
    write_lines(home / "spool" / "zz-bad.jsonl", ["this is not an event"])


@pytest.fixture(scope="module")
def realistic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home holding ``realistic_spool``, made once: each test copies it (``spool_into``)."""
    home = tmp_path_factory.mktemp("realistic")
    realistic_spool(home)
    return home


def spool_into(realistic: Path, home: Path) -> None:
    """``realistic_spool(home)``, as a copy of the module's (the sessions take a second each)."""
    shutil.copytree(realistic, home, symlinks=True, dirs_exist_ok=True)


@pytest.fixture(scope="module", params=["local", "lake"])
def ingested(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, realistic: Path
) -> Backend:
    """``backend`` with ``realistic`` ingested, made once a backend for the tests that only
    read it (a lake ingest takes seconds)."""
    home = tmp_path_factory.mktemp(f"ingested-{request.param}")
    spool_into(realistic, home)
    if request.param == "local":
        backend = Backend("local", home, Selection())
    else:
        server: PostgresServer = request.getfixturevalue("postgres")
        backend = lake_backend(server, home)
    ingest_into(backend)
    return backend


def ingest_into(backend: Backend, home: Path | None = None) -> None:
    root = home or backend.home
    with backend.open(root) as store:
        Projector(store, root / "spool").ingest()


def local_twin(tmp_path: Path, of: Backend) -> Backend:
    """A local store in a home of its own whose spool is ``of``'s, ingested."""
    twin = Backend("local", tmp_path / f"local-twin-of-{of.name}", Selection())
    twin.home.mkdir()
    (twin.home / "spool").symlink_to((of.home / "spool").resolve(), target_is_directory=True)
    ingest_into(twin)
    return twin


def local_reference(tmp_path: Path, of: Backend) -> dict[str, pl.DataFrame]:
    """The tables of a local ingest of ``of``'s spool."""
    with local_twin(tmp_path, of).open() as store:
        return comparable(store)


class TestStoreContract:
    def test_a_new_store_has_every_table_and_this_schema_version(self, backend: Backend) -> None:
        with backend.open() as store:
            assert store.counts().keys() == set(TABLES)
            assert store.meta()["schema_version"] == str(STORE_SCHEMA_VERSION)
            assert store.meta()["engine"] == ("ducklake" if backend.lake else "duckdb")
            assert all(n == 0 for name, n in store.counts().items() if name != "meta")

    def test_a_spool_ingested_gives_the_tables_a_local_ingest_gives(
        self, ingested: Backend, tmp_path: Path
    ) -> None:
        with ingested.open() as store:
            got = comparable(store)
        assert got["events"].height == spool_line_count(ingested.home) - 1
        assert got["quarantine"].height == 1
        assert got["compactions"].height > 0
        assert_same_tables(got, local_reference(tmp_path, ingested))

    def test_ingesting_the_same_spool_again_doubles_nothing(
        self, backend: Backend, realistic: Path
    ) -> None:
        spool_into(realistic, backend.home)
        ingest_into(backend)
        with backend.open() as store:
            once = comparable(store)
            again = Projector(store, backend.home / "spool").ingest()
            assert (again.new_events, again.quarantined, again.lines) == (0, 0, 0)
            # offsets forgotten: every line is read again, and still stored once
            store.con.execute("DELETE FROM spool_offsets")
            reread = Projector(store, backend.home / "spool").ingest()
            assert reread.lines == spool_line_count(backend.home)
            assert (reread.new_events, reread.quarantined) == (0, 0)
            twice = comparable(store)
        assert_same_tables(twice, once)

    def test_a_torn_last_line_waits_until_it_is_complete(self, backend: Backend) -> None:
        lines = usage_lines("torn", 3)
        spool = backend.home / "spool" / "torn.jsonl"
        write_lines(spool, lines[:2])
        with spool.open("a", encoding="utf-8") as fh:
            fh.write(lines[2][:25])
        with backend.open() as store:
            first = Projector(store, backend.home / "spool").ingest()
            assert (first.lines, first.new_events) == (2, 2)
            with spool.open("a", encoding="utf-8") as fh:
                fh.write(lines[2][25:] + "\n")
            second = Projector(store, backend.home / "spool").ingest()
            assert (second.lines, second.new_events) == (1, 1)
            assert store.counts()["usage"] == 3

    def test_rebuilding_the_projections_changes_no_table(
        self, backend: Backend, realistic: Path
    ) -> None:
        spool_into(realistic, backend.home)
        ingest_into(backend)
        with backend.open() as store:
            before = comparable(store)
            store.rebuild_projections()
            assert_same_tables(comparable(store), before)

    def test_job_results_replace_a_sessions_rows_and_stamp_them(self, backend: Backend) -> None:
        with backend.open() as store:
            results = JobResults(store)
            rows = pl.DataFrame({"session_id": ["a", "a", "b"], "value": [1, 2, 3]})
            stamps = pl.DataFrame({"session_id": ["a", "b"], "watermark": [5, 6]})
            results.replace_job_results("probe", 1, {"job_probe": rows}, stamps)
            newer = pl.DataFrame({"session_id": ["a"], "value": [9]})
            results.replace_job_results(
                "probe", 2, {"job_probe": newer}, stamps.head(1), gone=["b"]
            )
            got = store.query("SELECT session_id, value FROM job_probe ORDER BY value")
            assert got.to_dicts() == [{"session_id": "a", "value": 9}]
            assert results.job_stamps("probe").sort("session_id").rows() == [("a", 2, 5)]

    def test_the_jobs_give_the_figures_a_local_store_gives(
        self, backend: Backend, realistic: Path, tmp_path: Path
    ) -> None:
        spool_into(realistic, backend.home)
        ingest_into(backend)
        with backend.open() as store:
            refresh(store, JOBS)
            figures = fleet_stats(store, backend.home / "spool")
        reference = local_twin(tmp_path, backend)
        with reference.open() as store:
            refresh(store, JOBS)
            expected = fleet_stats(store, reference.home / "spool")
        assert figures["compactions"]["total"] > 0
        assert figures == expected

    def test_every_table_exports_as_parquet(self, ingested: Backend, tmp_path: Path) -> None:
        with ingested.open() as store:
            written = store.export_parquet(tmp_path / "out")
            counts = store.counts()
        assert {p.stem for p in written} == set(TABLES)
        for path in written:
            assert pq.read_metadata(path).num_rows == counts[path.stem]
