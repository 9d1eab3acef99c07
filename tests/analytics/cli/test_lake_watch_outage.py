"""A lake watcher outlives its PostgreSQL and its maintenance (issue 28, item 6.6).

The real ``compactlens ingest --watch`` runs on a lake of a PostgreSQL of its own (started
here, in a temporary folder). PostgreSQL is stopped while events keep arriving in the spool,
then started again: the watcher says what failed and why, opens the lake again, and every
event arrives exactly once. Then the lake's data folder (a real tmpfs) turns read-only, so the
store's maintenance fails for real while small commits still land in the catalog: the watcher
says so and goes on, and once the folder is writable again everything is there and it stops
with exit 0, leaving no Parquet file the catalog does not know. Every wait is on a condition
(a line printed, a count in the lake) with a generous deadline.

The two tests share one PostgreSQL of the module's own (started once; each test has its own
database and makes sure the server runs before and after it), and the waits for a count read
on one connection every ``POLL_S`` instead of opening the lake for every look. There is no
race to repeat here, so ``bench/lake_stress.py`` does not run it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from analytics.errors import StoreError
from analytics.store import Lake
from analytics.store.lake import CATALOG, LakeStore, catalog_unreachable
from tests.analytics.cli.test_cli_ui import Run
from tests.analytics.spool_helpers import usage_lines, write_lines
from tests.analytics.store.postgres import PG_BIN, PostgresServer, PostgresUnavailableError
from tests.compactor.tmpfs import small_tmpfs

pytestmark = pytest.mark.e2e

DEADLINE_S = 300
POLL_S = 0.05
BATCH = 150
CATALOG_FILE_TABLES = (
    "ducklake_data_file",
    "ducklake_delete_file",
    "ducklake_files_scheduled_for_deletion",
)
"""Where the catalog names its files: live ones, and those a merge replaced (deleted once
they have waited ``lake.KEEP_SNAPSHOTS_S``)."""


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    """A PostgreSQL of this module's own (not the session's: it is stopped under a watcher),
    started once for both tests; each test has a database of its own on it."""
    try:
        started = PostgresServer.start()
    except PostgresUnavailableError as exc:
        pytest.skip(f"no lake tests: {exc}")
    try:
        yield started
    finally:
        if not running(started):
            start_again(started)  # pg_ctl stop wants it running
        started.stop()


@pytest.fixture
def server(own_server: PostgresServer) -> Iterator[PostgresServer]:
    """The module's PostgreSQL, running when the test starts and again when it ends (a test
    that failed while it was stopped leaves it running for the next one)."""
    if not running(own_server):
        start_again(own_server)
    yield own_server
    if not running(own_server):
        start_again(own_server)


def running(server: PostgresServer) -> bool:
    return (server.root / "data" / "postmaster.pid").exists()


def pg_ctl(server: PostgresServer, *args: str) -> None:
    """``pg_ctl`` on ``server``, its output to the server's log (a pipe would be held open by
    the server it starts, and the call would never return)."""
    data, log = server.root / "data", server.root / "server.log"
    argv = [str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-m", "fast", *args]
    if server.root.stat().st_uid != 0:
        argv = ["runuser", "-u", "postgres", "--", *argv]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_again(server: PostgresServer) -> None:
    options = f"-k {server.root} -h 127.0.0.1 -p {server.port} -c fsync=off"
    pg_ctl(server, "-o", options, "start")


def lake_events(lake: Lake) -> tuple[int, int] | None:
    """(events, distinct event ids) in the lake, None while it cannot be read."""
    try:
        with LakeStore(lake, read_only=True) as store:
            row = store.query("SELECT count(*), count(DISTINCT event_id) FROM events").row(0)
    except StoreError:
        return None
    return int(row[0]), int(row[1])


def _poll(lake: Lake, sql: str, until: Callable[[tuple[int, ...]], bool]) -> tuple[int, ...]:
    """``sql``'s one row once ``until`` holds for it (or at the deadline), read on one
    connection (opened again only after a failure: opening a lake costs far more than a query
    on it)."""
    deadline = time.monotonic() + DEADLINE_S
    seen: tuple[int, ...] = ()
    store: LakeStore | None = None
    try:
        while time.monotonic() < deadline:
            try:
                store = store or LakeStore(lake, read_only=True)
                seen = tuple(int(v) for v in store.query(sql).row(0))
            except StoreError:
                seen = ()
                if store is not None:
                    store.close()
                    store = None
            if seen and until(seen):
                break
            time.sleep(POLL_S)  # polling interval only: the condition decides, the deadline bounds
    finally:
        if store is not None:
            store.close()
    return seen


def wait_for_events(lake: Lake, expected: int) -> None:
    """Until the lake holds ``expected`` events, each once."""
    sql = "SELECT count(*), count(DISTINCT event_id) FROM events"
    assert _poll(lake, sql, lambda row: row[0] >= expected) == (expected, expected)


def wait_for_written_out(lake: Lake) -> None:
    """Until the maintenance after the first commit wrote its rows out to Parquet files (they
    were inlined in the catalog until then): the files it writes are then all committed."""
    sql = f"SELECT count(*) FROM __ducklake_metadata_{CATALOG}.ducklake_data_file"
    assert _poll(lake, sql, lambda row: row[0] > 0)[0] > 0


def append(home: Path, n: int) -> None:
    write_lines(home / "spool" / f"agent-{n}.jsonl", usage_lines(f"session-{n}", BATCH))


def watch(home: Path, lake: Lake, *extra: str) -> Run:
    store = ["--store", lake.url, "--lake-data", str(lake.data_path)]
    run = Run(["ingest", "--watch", "--interval", "0.05", *store, *extra], home)
    run.line_with("watching", DEADLINE_S)
    return run


def test_a_lake_watcher_outlives_a_postgresql_restart_and_stores_every_event_once(
    server: PostgresServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    lake = Lake(server.database(), tmp_path / "lake")
    append(home, 1)
    run = watch(home, lake)
    try:
        wait_for_events(lake, BATCH)
        assert catalog_unreachable(server.database()) is None  # it answers while it runs
        pg_ctl(server, "stop")
        append(home, 2)
        said = run.line_with("watching goes on", DEADLINE_S)
        # DuckDB may say only "unsuccessful query result"; the message names PostgreSQL's reason
        assert "PostgreSQL does not take a new connection" in said or "refused" in said, said
        assert f"port {server.port}" in said, said
        start_again(server)
        append(home, 3)
        wait_for_events(lake, 3 * BATCH)
    finally:
        run.process.send_signal(signal.SIGTERM)
        code = run.stopped()
    rest = run.rest()
    assert code == 0, "".join(run.seen) + rest
    assert "Traceback" not in "".join(run.seen) + rest
    assert lake_events(lake) == (3 * BATCH, 3 * BATCH)


def catalog_files(lake: Lake) -> set[str]:
    """The names of every file the catalog knows."""
    with LakeStore(lake, read_only=True) as store:
        names = set()
        for table in CATALOG_FILE_TABLES:
            frame = store.query(f"SELECT path FROM __ducklake_metadata_{CATALOG}.{table}")
            names |= {Path(p).name for p in frame.get_column("path").to_list()}
    return names


def test_a_lake_watcher_goes_on_when_its_maintenance_fails(
    server: PostgresServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with small_tmpfs(tmp_path / "disk", "64m") as disk:
        lake = Lake(server.database(), disk / "lake")
        append(home, 1)
        run = watch(home, lake, "--maintain-commits", "1")
        try:
            wait_for_events(lake, BATCH)
            # not in the middle of that maintenance's writes: a disk that turns read-only
            # under a write in flight leaves its files behind (noted, not this test's case)
            wait_for_written_out(lake)
            remount(disk, "ro")
            try:
                append(home, 2)
                said = run.line_with("watching goes on", DEADLINE_S)
                assert "maintenance" in said and "Read-only file system" in said, said
                wait_for_events(lake, 2 * BATCH)  # small commits land in the catalog
            finally:
                remount(disk, "rw")
            append(home, 3)
            wait_for_events(lake, 3 * BATCH)
        finally:
            run.process.send_signal(signal.SIGTERM)
            code = run.stopped()
        rest = run.rest()
        assert code == 0, "".join(run.seen) + rest  # the last maintenance ran, and worked
        assert "Traceback" not in "".join(run.seen) + rest
        assert lake_events(lake) == (3 * BATCH, 3 * BATCH)
        on_disk = {p.name for p in lake.data_path.rglob("*.parquet")}
        assert on_disk <= catalog_files(lake)


def remount(mount_point: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mount_point)], check=True)
