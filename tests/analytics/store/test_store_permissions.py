"""The store is as private as the spool it is made from (issue 16 item 8).

The spool, the offloads and the records are 0600 in 0700 folders; the database, its write-ahead
log (which DuckDB deletes at each checkpoint and creates again at the next write), its owner
lock and the Parquet export must be too, whatever the process umask. Each test stats the real
files DuckDB made, in process and through the command line.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from analytics.store import DB_NAME, open_store
from analytics.store.projector import Projector
from tests.analytics.spool_helpers import usage_lines, write_lines

ROOT = Path(__file__).resolve().parents[3]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


def test_the_database_its_log_and_its_lock_are_private_whatever_the_umask(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    write_lines(tmp_path / "spool" / "a.jsonl", usage_lines("s", 5))
    db = home / DB_NAME
    wal = db.with_name(DB_NAME + ".wal")
    with _umask(0o022), open_store(home) as store:
        projector = Projector(store, tmp_path / "spool")
        projector.ingest(checkpoint=False)  # committed to the log, not yet checkpointed
        assert wal.exists()
        assert (_mode(home), _mode(db), _mode(wal)) == (0o700, 0o600, 0o600)
        assert _mode(db.with_name(DB_NAME + ".owner")) == 0o600
        store.checkpoint()
        assert not wal.exists()  # DuckDB deleted it: the next write creates it again
        write_lines(tmp_path / "spool" / "a.jsonl", usage_lines("s", 5, start_seq=5))
        projector.ingest(checkpoint=False)
        assert _mode(wal) == 0o600
        assert os.umask(0o022) == 0o077  # while the store is open
    assert os.umask(0o022) == 0o022  # and given back when it closes


def test_a_store_made_world_readable_before_is_made_private_when_opened(tmp_path: Path) -> None:
    with _umask(0o022):
        open_store(tmp_path).close()
        db = tmp_path / DB_NAME
        db.chmod(0o644)  # as a store made by an earlier release is
        open_store(tmp_path).close()
    assert _mode(db) == 0o600


def test_the_parquet_export_is_private_through_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_lines(home / "spool" / "a.jsonl", usage_lines("s", 5))
    out = tmp_path / "export"
    cli = [sys.executable, "-m", "analytics.cli"]
    for argv in (["ingest"], ["export", "parquet", str(out)]):
        done = subprocess.run(
            ["sh", "-c", 'umask 022 && exec "$@"', "sh", *cli, *argv, "--home", str(home)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    files = sorted(out.glob("*.parquet"))
    assert files and _mode(out) == 0o700
    assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
    assert _mode(home / DB_NAME) == 0o600
