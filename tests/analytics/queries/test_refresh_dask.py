"""The job refresh on a Dask cluster (issue 20 item 3): the same tables as in this process.

One spool is ingested into two stores; one is refreshed here, the other with ``dask=`` on a
real ``distributed.LocalCluster`` (one worker process: the frames travel through ``scatter``,
the job functions are pickled by reference and run there). Chunks are made small so that
several chunks are in flight, the counterfactual job (which reads the store itself) runs beside
the shipped ones, and every ``job_*`` table must then be equal, whole frames. A scheduler
that is not there is a clear error naming its address, from ``refresh`` and from the command
line.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import distributed
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analytics.queries import fanout, materialize
from analytics.queries.counterfactual_job import COUNTERFACTUAL_JOB
from analytics.queries.fanout import DaskUnavailableError
from analytics.queries.materialize import JOBS, refresh
from analytics.store import EventStore, open_store
from compactor import SpoolSink
from tests.analytics.cli_helpers import run
from tests.analytics.spool_helpers import ingest, run_session

SEEDS = [1, 2, 3, 4, 5]
WALL_CLOCK = {"job_stamps": ("refreshed_at",)}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    local_cluster: Any = distributed.LocalCluster
    with local_cluster(
        n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
    ) as running:
        yield running


def _home(root: Path, spool: Path) -> Path:
    """A home whose spool is ``spool``, ingested into its own local store."""
    root.mkdir(parents=True)
    (root / "spool").symlink_to(spool, target_is_directory=True)
    ingest(root)
    return root


def _job_tables(store: EventStore) -> dict[str, pl.DataFrame]:
    names = store.query(
        "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'job_%'"
    )
    out = {}
    for name in sorted(names.get_column("table_name").to_list()):
        frame = store.query(f"SELECT * FROM {name}")
        frame = frame.drop([c for c in WALL_CLOCK.get(name, ()) if c in frame.columns])
        out[name] = frame.sort(frame.columns, nulls_last=True)
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dask_refresh_writes_every_job_table_as_the_in_process_refresh(
    cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tmp_path / "spool"
    sink = SpoolSink(spool)
    for seed in SEEDS:
        run_session(tmp_path / "sessions", sink, seed)
    sink.close()
    here, there = _home(tmp_path / "here", spool), _home(tmp_path / "there", spool)
    monkeypatch.setattr(materialize, "CHUNK_SESSIONS", 2)  # three chunks, two in flight
    jobs = (*JOBS, COUNTERFACTUAL_JOB)

    with open_store(here) as store:
        local = refresh(store, jobs)
        expected = _job_tables(store)
    with open_store(there) as store:
        remote = refresh(store, jobs, dask=cluster.scheduler_address)
        got = _job_tables(store)
        again = refresh(store, jobs, dask=cluster.scheduler_address)

    assert remote.recomputed == local.recomputed == {job.name: len(SEEDS) for job in jobs}
    assert again.recomputed == {job.name: 0 for job in jobs}
    assert sorted(got) == sorted(expected)
    assert {name for name, frame in expected.items() if frame.height} >= {
        "job_session_timeline",
        "job_retention_detail",
        "job_emergencies",
        "job_turn_costs",
        "job_stamps",
    }
    for name in expected:
        assert got[name].height == expected[name].height, name
        assert_frame_equal(got[name], expected[name])


def test_a_refresh_on_a_client_the_caller_made_leaves_it_open(cluster: Any, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    sink = SpoolSink(spool)
    run_session(tmp_path / "sessions", sink, 1)
    sink.close()
    home = _home(tmp_path / "home", spool)
    client_class: Any = distributed.Client
    with client_class(cluster.scheduler_address) as client:
        with open_store(home) as store:
            report = refresh(store, dask=client)
        assert report.recomputed == {job.name: 1 for job in JOBS}
        assert client.status == "running"


def test_an_unreachable_scheduler_is_an_error_naming_its_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fanout, "CONNECT_TIMEOUT_S", 1.0)
    address = f"tcp://127.0.0.1:{_free_port()}"
    with (
        EventStore(tmp_path / "compactlens.duckdb") as store,
        pytest.raises(DaskUnavailableError, match=f"Dask scheduler at '{address}'"),
    ):
        refresh(store, dask=address)

    for given in (address, "scheduler-without-a-port"):
        result = run("stats", "--json", "--home", tmp_path, "--dask", given)
        assert result.exit_code == 1
        assert f"Dask scheduler at '{given}'" in result.output
        assert "drop --dask" in result.output
