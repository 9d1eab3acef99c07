"""A database file in each bad state a user meets, and ``rebuild`` repairing it from the spool.

Every state is real: a second process holding the file (a compactlens owner, or a bare DuckDB
connection), bytes damaged inside a real DuckDB file, a store whose creating process was
SIGKILLed before it finished, a header announcing another storage version (checksum valid), a
directory where the file should be, a home that is a file, and a read-only bind mount. Each must
raise its own ``StoreError`` subclass with one line naming the path and the way out.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from analytics.errors import (
    StoreCorruptError,
    StoreError,
    StoreIncompleteError,
    StoreLockedError,
    StoreUnwritableError,
    StoreVersionError,
)
from analytics.store import DB_NAME, STORE_SCHEMA_VERSION, EventStore, open_store
from analytics.store.rebuilding import rebuild
from compactor import SpoolSink
from tests.analytics.spool_helpers import (
    assert_same_tables,
    ingest,
    run_session,
    snapshot,
    snapshot_home,
    write_lines,
)

ROOT = Path(__file__).resolve().parents[3]
BLOCK = 256 * 1024
HEADER_BLOCKS = 3 * 4096
"""A DuckDB file: a main header and two database headers of 4 KiB, then 256 KiB blocks."""


def _good_home(home: Path) -> dict[str, pl.DataFrame]:
    """A store ingested from a spool of two sessions and one bad line; its snapshot."""
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 3)
    run_session(home, sink, 4, capture="metadata")
    write_lines(home / "spool" / "zz-bad.jsonl", ["not an event"])
    ingest(home)
    reference = snapshot_home(home)
    assert reference["events"].height > 0 and reference["quarantine"].height == 1
    return reference


def _backups(home: Path) -> list[Path]:
    """``compactlens.duckdb.bak-<UTC stamp>`` files, without their ``.wal`` or ``.owner``."""
    stamped = re.compile(re.escape(DB_NAME) + r"\.bak-\d{8}T\d{12}")
    return sorted(p for p in home.iterdir() if stamped.fullmatch(p.name))


def _assert_rebuild_restores(home: Path, reference: dict[str, pl.DataFrame]) -> Path:
    """rebuild(home) recreates every table from the spool; returns the single backup."""
    result = rebuild(home)
    assert result.ingest.new_events == reference["events"].height
    assert_same_tables(reference, snapshot_home(home))
    (backup,) = _backups(home)
    assert result.backup == backup
    return backup


def _assert_one_line(exc: StoreError, path: Path, *fragments: str) -> None:
    message = str(exc)
    assert len(message.splitlines()) == 1, message
    assert str(path) in message and exc.path == str(path), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


# ---------------------------------------------------------------- locked


_HOLD = """
import sys, time
{opener}
print("holding", flush=True)
time.sleep(120)
"""
_OWNER = "from analytics.store import EventStore\nstore = EventStore(sys.argv[1])"
_BARE_DUCKDB = "import duckdb\ncon = duckdb.connect(sys.argv[1])"


@contextlib.contextmanager
def _held(db: Path, opener: str) -> Iterator[subprocess.Popen[str]]:
    """A second process that opened ``db`` read-write and keeps it open until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD.format(opener=opener), str(db)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "holding"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_store_held_by_another_owner_is_locked_and_rebuild_waits_for_it(tmp_path: Path) -> None:
    reference = _good_home(tmp_path)
    db = tmp_path / DB_NAME
    with _held(db, _OWNER) as holder:
        for read_only in (False, True):
            with pytest.raises(StoreLockedError) as caught:
                EventStore(db, read_only=read_only)
            _assert_one_line(
                caught.value, db, f"held by PID {holder.pid}", "one writer", "Stop that process"
            )
        with pytest.raises(StoreLockedError):
            rebuild(tmp_path)
        assert not _backups(tmp_path) and db.exists()
    backup = _assert_rebuild_restores(tmp_path, reference)
    with EventStore(backup, read_only=True) as old:
        assert_same_tables(reference, snapshot(old))


def test_store_held_by_a_bare_duckdb_connection_is_locked_not_corrupt(tmp_path: Path) -> None:
    reference = _good_home(tmp_path)
    db = tmp_path / DB_NAME
    with _held(db, _BARE_DUCKDB) as holder:
        with pytest.raises(StoreLockedError) as caught:
            EventStore(db)
        _assert_one_line(caught.value, db, f"held by PID {holder.pid}", "another program")
        with pytest.raises(StoreLockedError):
            rebuild(tmp_path)
    _assert_rebuild_restores(tmp_path, reference)


# ---------------------------------------------------------------- corrupt


def test_damaged_blocks_are_reported_corrupt_not_locked_and_rebuild_repairs(
    tmp_path: Path,
) -> None:
    reference = _good_home(tmp_path)
    db = tmp_path / DB_NAME
    data = bytearray(db.read_bytes())
    assert len(data) > HEADER_BLOCKS + BLOCK  # a real file with data blocks
    for start in range(HEADER_BLOCKS, len(data), BLOCK):  # every block's contents, not headers
        data[start + 8 : start + 72] = bytes(b ^ 0xFF for b in data[start + 8 : start + 72])
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError) as caught, EventStore(db, read_only=True) as store:
        store.counts()  # damage may surface when the blocks are read
    assert type(caught.value) is StoreCorruptError, caught.value
    _assert_one_line(caught.value, db, "is damaged", "checksum", "`compactlens rebuild`")
    backup = _assert_rebuild_restores(tmp_path, reference)
    assert backup.read_bytes() == bytes(data)


def test_a_file_that_is_no_duckdb_database_is_corrupt(tmp_path: Path) -> None:
    reference = _good_home(tmp_path)
    db = tmp_path / DB_NAME
    garbage = b"this is not a duckdb database\x00\xff" * 2048
    db.write_bytes(garbage)
    with pytest.raises(StoreCorruptError) as caught:
        EventStore(db)
    _assert_one_line(caught.value, db, "not a DuckDB database file", "`compactlens rebuild`")
    backup = _assert_rebuild_restores(tmp_path, reference)
    assert backup.read_bytes() == garbage


# ---------------------------------------------------------------- half-created


_KILLED_DURING_CREATION = """
import os, signal, sys
import duckdb
from analytics.store.sql import BASE_DDL, PROJECTION_DDL
con = duckdb.connect(sys.argv[1])
con.execute(BASE_DDL + PROJECTION_DDL)  # committed, as the first import did before
con.execute("CHECKPOINT")
os.kill(os.getpid(), signal.SIGKILL)  # dies before the meta rows
"""


def test_store_whose_creation_was_killed_is_half_created_and_rebuild_repairs(
    tmp_path: Path,
) -> None:
    reference = _good_home(tmp_path)
    db = tmp_path / DB_NAME
    db.unlink()
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_DURING_CREATION, str(db)], cwd=ROOT, check=False
    )
    assert done.returncode == -9 and db.exists()
    for read_only in (False, True):
        with pytest.raises(StoreIncompleteError) as caught:
            EventStore(db, read_only=read_only)
        _assert_one_line(
            caught.value, db, "never completely created", "schema_version", "`compactlens rebuild`"
        )
    _assert_rebuild_restores(tmp_path, reference)


# ---------------------------------------------------------------- other versions


def _duckdb_checksum(block: bytes) -> int:
    """DuckDB's block checksum (5381 xor, per 8-byte word, the word times a constant)."""
    total = 5381
    for (word,) in struct.iter_unpack("<Q", block):
        total ^= (word * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    return total


def _as_written_by(data: bytes, storage_version: int, library: bytes) -> bytes:
    """``data`` with a main header that says another DuckDB wrote it, checksum valid."""
    head = bytearray(data[:4096])
    assert _duckdb_checksum(bytes(head[8:])) == struct.unpack_from("<Q", head, 0)[0]
    assert head[8:12] == b"DUCK"
    struct.pack_into("<Q", head, 12, storage_version)
    head[52:84] = library.ljust(32, b"\0")
    struct.pack_into("<Q", head, 0, _duckdb_checksum(bytes(head[8:])))
    return bytes(head) + data[4096:]


def test_file_of_another_duckdb_storage_version_is_a_version_error(tmp_path: Path) -> None:
    reference = _good_home(tmp_path)
    db = tmp_path / DB_NAME
    old = _as_written_by(db.read_bytes(), 39, b"v0.6.1")
    db.write_bytes(old)
    with pytest.raises(StoreVersionError) as caught:
        EventStore(db, read_only=True)
    _assert_one_line(
        caught.value, db, "storage version 39", "DuckDB v0.6.1", "`compactlens rebuild`"
    )
    backup = _assert_rebuild_restores(tmp_path, reference)
    assert backup.read_bytes() == old


def test_store_of_another_schema_version_is_a_version_error(tmp_path: Path) -> None:
    reference = _good_home(tmp_path)
    with open_store(tmp_path) as store:
        store.con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreVersionError) as caught:
        open_store(tmp_path)
    _assert_one_line(
        caught.value,
        tmp_path / DB_NAME,
        "schema 99",
        f"uses {STORE_SCHEMA_VERSION}",
        "`compactlens rebuild`",
    )
    backup = _assert_rebuild_restores(tmp_path, reference)
    with pytest.raises(StoreVersionError):
        EventStore(backup, read_only=True)


# ---------------------------------------------------------------- unwritable


def test_a_directory_where_the_database_should_be_is_unwritable_and_rebuild_moves_it(
    tmp_path: Path,
) -> None:
    reference = _good_home(tmp_path)
    db = tmp_path / DB_NAME
    db.unlink()
    (db / "stray").mkdir(parents=True)
    with pytest.raises(StoreUnwritableError) as caught:
        EventStore(db)
    _assert_one_line(caught.value, db, "is a directory", "--home")
    backup = _assert_rebuild_restores(tmp_path, reference)
    assert (backup / "stray").is_dir()


def test_home_that_is_a_file_is_unwritable_and_rebuild_says_so(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("a file, not a folder\n")
    db = home / DB_NAME
    for attempt in (lambda: EventStore(db), lambda: rebuild(home)):
        with pytest.raises(StoreUnwritableError) as caught:
            attempt()
        _assert_one_line(caught.value, db, f"{home} is a file, not a directory", "--home")
    assert home.read_text() == "a file, not a folder\n"


_IN_READ_ONLY_HOME = """
import sys
from analytics.errors import StoreError
from analytics.store.rebuilding import rebuild
from analytics.store import open_store
home = sys.argv[1]
for name, attempt in (("open", lambda: open_store(home).close()),
                      ("rebuild", lambda: rebuild(home))):
    try:
        attempt()
        print(name, "ok")
    except StoreError as exc:
        print(name, type(exc).__name__, exc)
with open_store(home, read_only=True) as store:
    print("read", store.counts()["events"])
"""


def _read_only_bind(home: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with ``home`` bind-mounted read-only in a private mount namespace."""
    script = (
        f'mount --bind "{home}" "{home}" && mount -o remount,bind,ro "{home}" && '
        f'exec "{sys.executable}" -c "$0" "{home}"'
    )
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def _can_bind_read_only(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    if shutil.which("unshare") is None:
        return False
    done = _read_only_bind(probe, "import sys; open(sys.argv[1] + '/x', 'w')")
    return "Read-only file system" in done.stderr


def test_read_only_home_is_unwritable_for_owners_and_still_readable(tmp_path: Path) -> None:
    if not _can_bind_read_only(tmp_path):
        pytest.skip("no private mount namespace here (unshare -m) to make a read-only home")
    home = tmp_path / "home"
    reference = _good_home(home)
    done = _read_only_bind(home, _IN_READ_ONLY_HOME)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    for name, line in zip(("open", "rebuild"), lines, strict=False):
        assert line.startswith(f"{name} StoreUnwritableError {home / DB_NAME} cannot be written"), (
            line
        )
        assert "read-only" in line and "--home" in line, line
    assert lines[2] == f"read {reference['events'].height}"
    assert not _backups(home)


# ---------------------------------------------------------------- backups


_KILLED_AFTER_WRITING = """
import os, signal, sys
from analytics.store import EventStore
store = EventStore(sys.argv[1])
store.con.execute("CREATE TABLE scratch AS SELECT range AS i FROM range(50000)")
os.kill(os.getpid(), signal.SIGKILL)  # no checkpoint: the write stays in the log
"""


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def test_each_rebuild_keeps_the_newest_full_backup_and_reports_its_size(tmp_path: Path) -> None:
    reference = _good_home(tmp_path)
    db = tmp_path / DB_NAME
    first_size = _size(db)
    first = rebuild(tmp_path)
    assert first.backup is not None and first.pruned == []
    assert first.backup_bytes == first_size == _size(first.backup)

    done = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_WRITING, str(db)], cwd=ROOT, check=False
    )
    assert done.returncode == -9
    wal = db.with_name(DB_NAME + ".wal")
    assert _size(wal) > 0
    on_disk = _size(db) + _size(wal)
    second = rebuild(tmp_path)
    assert second.pruned == [first.backup] and not first.backup.exists()
    assert second.backup is not None and _backups(tmp_path) == [second.backup]
    assert second.backup_bytes == on_disk
    with EventStore(second.backup, read_only=True) as old:  # a full copy: the log came along
        assert old.query("SELECT count(*) AS n FROM scratch").item() == 50_000
        assert old.counts()["events"] == reference["events"].height

    third = rebuild(tmp_path, keep_backups=2)
    assert third.pruned == [] and _backups(tmp_path) == [second.backup, third.backup]
    assert_same_tables(reference, snapshot_home(tmp_path))
    with pytest.raises(ValueError, match="keep_backups must be at least 1"):
        rebuild(tmp_path, keep_backups=0)
