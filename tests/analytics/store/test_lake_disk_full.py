"""A lake whose data disk fills up in the middle of an ingest (issue 28, item 6.12).

The lake's data folder is a real small tmpfs: the first commits of ``compactlens ingest`` fit,
a later one fails with ENOSPC. The command must say what it did commit (the count the lake
then holds, not "nothing was committed"), in one line without a traceback, and leave no
half-written Parquet file behind (every Parquet file on that disk is one the catalog knows).
Once the disk has room, the next ingest stores the rest, every event exactly once.

CI and every run use the smallest spool that fills the disk in the second chunk (two chunks,
two ``compactlens ingest`` processes); there is no race to repeat, so no bench runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from analytics.store import Selection
from analytics.store.lake import CATALOG, INLINE_ROWS, KEEP_SNAPSHOTS_S
from tests.analytics.spool_helpers import usage_lines, write_lines
from tests.analytics.store.conftest import Backend
from tests.compactor.tmpfs import small_tmpfs

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 600
FILES, LINES = 4, 4000
"""About 8 MB of spool: read in a 4 MB chunk, then the other 4 MB (``projector``'s second chunk
may be 8 MB; half of that is as far from fitting the disk: its Parquet files are about 0.9 MB,
as the first chunk's)."""
DISK = "1200k"
"""Room for the Parquet files of the first chunk (about 0.9 MB), not of the second."""
CATALOG_FILE_TABLES = (
    "ducklake_data_file",
    "ducklake_delete_file",
    "ducklake_files_scheduled_for_deletion",
)
"""Where the catalog names its files: live ones, and those a merge replaced (deleted once
they have waited ``lake.KEEP_SNAPSHOTS_S``)."""


def cli(lake: Backend, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert lake.selection.store and lake.selection.lake_data
    store = ["--store", lake.selection.store, "--lake-data", str(lake.selection.lake_data)]
    return subprocess.run(
        [sys.executable, "-m", "analytics.cli", *args, "--home", str(home), *store],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=TIMEOUT_S,
    )


def events(lake: Backend) -> tuple[int, int]:
    with lake.open(read_only=True) as store:
        row = store.query("SELECT count(*), count(DISTINCT event_id) FROM events").row(0)
    return int(row[0]), int(row[1])


def unknown_parquet(lake: Backend) -> list[str]:
    """Parquet files in the lake's data folder that the catalog does not name."""
    assert lake.lake is not None
    with lake.open(read_only=True) as store:
        known = set()
        for table in CATALOG_FILE_TABLES:
            frame = store.query(f"SELECT path FROM __ducklake_metadata_{CATALOG}.{table}")
            known |= {Path(p).name for p in frame.get_column("path").to_list()}
    on_disk = lake.lake.data_path.rglob("*.parquet")
    return sorted(str(p) for p in on_disk if p.name not in known)


def test_an_ingest_that_fills_the_lake_disk_says_what_it_committed_and_leaves_no_partial_file(
    lake: Backend, tmp_path: Path
) -> None:
    home = lake.home
    for n in range(FILES):
        write_lines(home / "spool" / f"agent-{n}.jsonl", usage_lines(f"session-{n}", LINES))
    with small_tmpfs(tmp_path / "disk", DISK) as disk:
        data = disk / "lake"
        on_disk = Backend("lake", home, Selection(lake.selection.store, data))
        done = cli(on_disk, home, "ingest")
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert "No space left on device" in done.stderr, done.stderr
        assert "nothing was committed" not in done.stderr, done.stderr
        stored = events(on_disk)
        assert 0 < stored[0] < FILES * LINES, "the disk should fill after the first chunk"
        assert stored[0] == stored[1]
        said = re.search(r"committed ([\d,]+) new events", done.stderr)
        assert said is not None, done.stderr
        assert int(said.group(1).replace(",", "")) == stored[0]
        assert unknown_parquet(on_disk) == []

        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        again = cli(on_disk, home, "ingest")
        assert again.returncode == 0, again.stderr
        assert events(on_disk) == (FILES * LINES, FILES * LINES)
        assert unknown_parquet(on_disk) == []


def test_maintenance_deletes_parquet_the_catalog_never_knew_once_it_is_old_enough(
    lake: Backend,
) -> None:
    # what a write leaves when the lake's disk turns read-only under it: a Parquet file the
    # catalog never named, which could not be deleted then (EROFS). Maintenance deletes it
    # once it is older than KEEP_SNAPSHOTS_S; a younger one may be another host's write about
    # to commit, and stays.
    write_lines(lake.home / "spool" / "agent.jsonl", usage_lines("session", 2 * INLINE_ROWS))
    assert cli(lake, lake.home, "ingest").returncode == 0
    assert lake.lake is not None
    written = sorted(lake.lake.data_path.rglob("*.parquet"))[0]
    stale = written.with_name("ducklake-0192aaaa-bbbb-7ccc-8ddd-000000000001.parquet")
    young = written.with_name("ducklake-0192aaaa-bbbb-7ccc-8ddd-000000000002.parquet")
    for orphan in (stale, young):
        orphan.write_bytes(b"PAR1 a write cut short")
    old = time.time() - 2 * KEEP_SNAPSHOTS_S
    os.utime(stale, (old, old))
    assert unknown_parquet(lake) == sorted([str(stale), str(young)])

    with lake.open() as store:
        store.checkpoint()

    assert unknown_parquet(lake) == [str(young)]
    assert events(lake) == (2 * INLINE_ROWS, 2 * INLINE_ROWS)
