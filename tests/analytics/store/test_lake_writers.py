"""Many writers, many readers on one lake (issue 20 item 2), with real processes.

Three projector processes, each with its own home and spool, write into one lake at once while
a reader queries it in a loop; the lake's tables must then equal a single local ingest of the
same spool files, and a second round of all three projectors (in this process, one after
another: it checks the offsets each host kept) must add nothing. Offsets belong
to (host, spool folder, file): two spools with files of the same name never share one.

CI runs each home with ``BULK_LINES`` = 200 usage lines beside its two sessions (about 1.2 MB of
spool, so every projector still commits several ``CHUNK_BYTES`` chunks that overlap the
others'). ``bench/lake_stress.py`` sets ``COMPACTLENS_STRESS_SCALE`` to multiply the bulk files
and ``COMPACTLENS_STRESS_ROUNDS`` to repeat the races of ``test_lake_fleet_start`` and the
maintenance cycles of ``test_lake_maintenance``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import polars as pl
import pytest

from analytics.errors import StoreError
from analytics.store import Selection, store_location
from analytics.store.projector import Projector
from compactor import SpoolSink
from tests.analytics.spool_helpers import (
    assert_same_tables,
    run_session,
    spool_line_count,
    usage_lines,
    write_lines,
)
from tests.analytics.store.conftest import Backend
from tests.analytics.store.test_store_contract import comparable

ROOT = Path(__file__).resolve().parents[3]
PROJECTORS = 3
STRESS_SCALE = int(os.environ.get("COMPACTLENS_STRESS_SCALE", "1"))
"""Size factor of the bulk spool files: 1 in CI, raised by ``bench/lake_stress.py``."""
STRESS_ROUNDS = int(os.environ.get("COMPACTLENS_STRESS_ROUNDS", "1"))
"""How often a race is repeated (rounds of a fleet start, maintenance cycles): 1 in CI, raised
by ``bench/lake_stress.py``."""
BULK_LINES = 200 * STRESS_SCALE
CHUNK_BYTES = 128 * 1024
"""Small chunks: each projector commits many times, so their commits overlap."""
TIMEOUT_S = 600

PROJECT = """
import sys
from pathlib import Path
from analytics.store import Selection, open_store, select
from analytics.store.projector import Projector
url, data, home, chunk = sys.argv[1:5]
select(Selection(url, Path(data)))
with open_store(home) as store:
    result = Projector(store, Path(home) / "spool", chunk_bytes=int(chunk)).ingest()
print(result.new_events, result.lines, result.quarantined)
"""


def build_home(home: Path, n: int) -> None:
    """Two synthetic sessions (one metadata), a bulk file of usage events and a bad line."""
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 100 + n)
    run_session(home, sink, 200 + n, capture="metadata")
    write_lines(home / "spool" / f"bulk-{n}.jsonl", usage_lines(f"bulk-{n}", BULK_LINES))
    write_lines(home / "spool" / f"bad-{n}.jsonl", [f"not an event from home {n}"])


def project_all(lake: Backend, homes: list[Path]) -> list[tuple[int, int, int]]:
    """Run one projector process per home at once; (new events, lines, quarantined) each."""
    assert lake.selection.store and lake.selection.lake_data
    command = [sys.executable, "-c", PROJECT, lake.selection.store, str(lake.selection.lake_data)]
    procs = [
        subprocess.Popen(
            [*command, str(home), str(CHUNK_BYTES)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for home in homes
    ]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
        assert proc.returncode == 0, stderr[-3000:]
        new, lines, bad = map(int, stdout.splitlines()[-1].split())
        out.append((new, lines, bad))
    return out


def project_again(lake: Backend, home: Path) -> tuple[int, int, int]:
    """What ``PROJECT`` prints for ``home``, run here on a connection of its own (the second
    round races nothing: it checks that each host's offsets were kept, not how they were)."""
    with lake.open(home) as store:
        result = Projector(store, home / "spool", chunk_bytes=CHUNK_BYTES).ingest()
    return result.new_events, result.lines, result.quarantined


class Reader:
    """A reader in a loop on its own connection: every count it sees is consistent (no event
    id twice, never fewer events than before)."""

    def __init__(self, lake: Backend) -> None:
        self.lake = lake
        self.seen: list[int] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lake-reader")

    def _run(self) -> None:
        with self.lake.open() as store:
            while not self.stop.is_set():
                try:
                    row = store.query(
                        "SELECT count(*) AS n, count(DISTINCT event_id) AS ids FROM events"
                    ).row(0)
                except Exception as exc:  # the assertion below names it
                    self.errors.append(repr(exc))
                    continue
                if row[0] != row[1]:
                    self.errors.append(f"{row[0]} events but {row[1]} distinct ids")
                if self.seen and row[0] < self.seen[-1]:
                    self.errors.append(f"events went from {self.seen[-1]} to {row[0]}")
                self.seen.append(int(row[0]))
                self.stop.wait(0.05)


def local_union(tmp_path: Path, homes: list[Path]) -> Backend:
    """One local store ingesting copies of every home's spool files at once (copies, not hard
    links: the projector reads no file with a second name)."""
    union = Backend("local", tmp_path / "union", Selection())
    (union.home / "spool").mkdir(parents=True)
    for home in homes:
        for path in (home / "spool").iterdir():
            if path.suffix == ".jsonl":
                shutil.copyfile(path, union.home / "spool" / path.name)
    with union.open() as store:
        Projector(store, union.home / "spool").ingest()
    return union


def test_three_projectors_and_a_reader_on_one_lake_equal_one_local_ingest(
    lake: Backend, tmp_path: Path
) -> None:
    homes = [tmp_path / f"host-{n}" for n in range(PROJECTORS)]
    for n, home in enumerate(homes):
        build_home(home, n)
    with lake.open():  # the lake's tables exist before the writers race for them
        pass
    reader = Reader(lake)
    reader.thread.start()
    try:
        first = project_all(lake, homes)
    finally:
        reader.stop.set()
        reader.thread.join(TIMEOUT_S)
    assert reader.errors == []
    assert len(reader.seen) >= 3 and reader.seen[-1] > 0
    lines = [spool_line_count(home) for home in homes]
    assert [r[1] for r in first] == lines
    assert [r[2] for r in first] == [1] * PROJECTORS
    assert [r[0] for r in first] == [n - 1 for n in lines]

    expected = local_union(tmp_path, homes)
    with expected.open() as store:
        want = _without_inodes(comparable(store))
    with lake.open() as store:
        got = _without_inodes(comparable(store))
    assert got["spool_offsets"].height == sum(
        len(list((h / "spool").glob("*.jsonl"))) for h in homes
    )
    assert_same_tables(got, want)

    again = [project_again(lake, home) for home in homes]
    assert again == [(0, 0, 0)] * PROJECTORS
    with lake.open() as store:
        assert_same_tables(_without_inodes(comparable(store)), want)


def _without_inodes(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The union's spool files are copies: the same bytes and positions under other inodes."""
    return {**tables, "spool_offsets": tables["spool_offsets"].drop("inode")}


def test_two_spools_with_files_of_the_same_name_keep_their_own_offsets(
    lake: Backend, tmp_path: Path
) -> None:
    homes = [tmp_path / "a", tmp_path / "b"]
    for n, home in enumerate(homes):
        write_lines(home / "spool" / "agent.jsonl", usage_lines(f"same-name-{n}", 5 + n))
    for home in homes:
        with lake.open(home) as store:
            assert Projector(store, home / "spool").ingest().new_events == 5 + homes.index(home)
    with lake.open() as store:
        assert store.counts()["events"] == 11
        assert store.positions(homes[1] / "spool")["agent.jsonl"].lines == 6
        assert store.positions(homes[0] / "spool")["agent.jsonl"].lines == 5
        assert store.counts()["spool_offsets"] == 2


def test_a_sqlite_catalog_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"SQLite catalog .*database is locked.*1309"):
        store_location(tmp_path, Selection("ducklake:sqlite:catalog.db"))


def test_a_lake_whose_postgres_does_not_answer_says_where_and_what_to_check(
    tmp_path: Path,
) -> None:
    dead = Backend(
        "lake",
        tmp_path,
        Selection("ducklake:postgres:dbname=x host=127.0.0.1 port=1 user=postgres password=s3"),
    )
    with pytest.raises(StoreError) as caught:
        dead.open()
    message = str(caught.value)
    assert "port=1" in message and "PostgreSQL" in message
    assert "s3" not in message and "password=***" in message


def test_a_lake_opened_with_another_data_folder_says_which_one_and_leaves_no_folder(
    lake: Backend, tmp_path: Path
) -> None:
    with lake.open():  # the lake is made, its data folder recorded in the catalog
        pass
    assert lake.lake is not None
    made = lake.lake.data_path
    assert made.is_dir()
    elsewhere = tmp_path / "elsewhere" / "lake"
    wrong = Backend("lake", lake.home, Selection(lake.selection.store, elsewhere))
    with pytest.raises(StoreError) as caught:
        wrong.open()
    message = str(caught.value)
    assert f"This lake keeps its data in {made}: pass --lake-data {made} " in message
    assert "PostgreSQL is running" not in message and ".." not in message
    assert not elsewhere.parent.exists(), "the folders made for the failed attempt are gone"
