"""A store on a disk that fills up, and inputs that must not be read (issue 16 item 18).

``stats`` on a nearly full disk must say the disk is full (a ``ROLLBACK`` after the failed
``COMMIT`` must not hide it); ``rebuild`` must build the new database beside the old one and
swap only when it is complete, so that a failed rebuild leaves the database in place untouched
and never prunes the last good backup. ``import`` of a kernel file named on the command line
(``/proc/kmsg``: a regular file of size 0 whose reads block, and consume the kernel's log) is
refused without opening it, and the other files are imported. The disks are real small tmpfs
mounts filled with a real file (tests run as root here; they skip where mount is not allowed).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from analytics.errors import StoreUnwritableError
from analytics.store import DB_NAME, EventStore, open_store
from analytics.store.rebuilding import rebuild
from compactor import SpoolSink
from tests.analytics.spool_helpers import (
    assert_same_tables,
    ingest,
    run_session,
    snapshot_home,
    usage_lines,
    write_lines,
)
from tests.compactor.tmpfs import fill_disk, small_tmpfs

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 60


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A real 40 MiB tmpfs: room for a small store (7 MiB), a backup and a rebuild, until
    it is filled."""
    with small_tmpfs(tmp_path / "disk", "40m") as mount_point:
        yield mount_point


def _home_with_a_store(disk: Path) -> Path:
    home = disk / "home"
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 3)
    sink.close()
    write_lines(home / "spool" / "usage.jsonl", usage_lines("bulk", 1_000))
    ingest(home)
    return home


def _cli(home: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "analytics.cli", *map(str, args), "--home", str(home)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S)


def test_stats_on_a_full_disk_says_the_disk_is_full_not_that_it_cannot_roll_back(
    disk: Path,
) -> None:
    home = _home_with_a_store(disk)
    fill_disk(home, leave=16 * 1024)
    done = _cli(home, "stats")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "rollback" not in done.stderr, done.stderr
    assert "disk holding it is full" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_rebuild_that_fills_the_disk_leaves_the_database_and_its_backup_in_place(
    disk: Path,
) -> None:
    home = _home_with_a_store(disk)
    first = rebuild(home)  # a good database and one good backup of it
    assert first.backup is not None
    reference = snapshot_home(home)
    db = home / DB_NAME
    before = {p.name: _digest(p) for p in home.iterdir() if p.is_file()}

    filler = fill_disk(home, leave=64 * 1024)  # far less than a new database needs
    for _ in range(2):  # a second failed rebuild must not prune the only good backup either
        with pytest.raises(StoreUnwritableError) as caught:
            rebuild(home)
        message = str(caught.value)
        assert "disk holding it is full" in message, message
        assert "left as they were" in message, message
        assert {p.name: _digest(p) for p in home.iterdir() if p.is_file()} == {
            **before,
            filler.name: _digest(filler),
        }
    done = _cli(home, "rebuild")
    assert done.returncode == 1 and "disk holding it is full" in done.stderr, done.stderr
    assert "nothing was committed" not in done.stderr, done.stderr

    filler.unlink()
    assert_same_tables(reference, snapshot_home(home))
    assert first.backup.exists()
    with EventStore(first.backup, read_only=True) as old:
        assert old.counts()["events"] == reference["events"].height
    again = rebuild(home)  # with room again: swapped in, the older backup pruned
    assert again.pruned == [first.backup]
    assert_same_tables(reference, snapshot_home(home))
    assert db.exists() and again.backup is not None and again.backup.exists()


def test_import_refuses_a_kernel_file_named_on_the_command_line_without_reading_it(
    tmp_path: Path,
) -> None:
    kmsg = Path("/proc/kmsg")
    if not kmsg.exists():
        pytest.skip("no /proc/kmsg here")
    good = tmp_path / "chat.jsonl"
    good.write_text(
        '{"role": "user", "content": "hello"}\n{"role": "assistant", "content": "hi"}\n'
    )
    done = _cli(tmp_path / "home", "import", kmsg, good)  # before: read /proc/kmsg for ever
    assert done.returncode == 1, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "/proc/kmsg" in output and "size of 0 bytes" in output, output
    with open_store(tmp_path / "home", read_only=True) as store:
        assert store.counts()["sessions"] == 1
