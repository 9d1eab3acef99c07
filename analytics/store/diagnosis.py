"""What went wrong with a database file, told from the disk, when DuckDB raised.

DuckDB's own message is only quoted, never parsed: the owner lock, the file system and the
file's header say whether a failure is a lock, an unwritable or full disk, another storage
version or damage. Every function returns the ``StoreError`` to raise; none opens a database.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import duckdb

from analytics.errors import StoreCorruptError, StoreError, StoreVersionError
from analytics.store.files import (
    REBUILD,
    disk_full,
    foreign_lock_pid,
    locked,
    read_header,
    unwritable,
    unwritable_reason,
)


def diagnose(path: Path, exc: duckdb.Error, *, read_only: bool) -> StoreError:
    """What the file is, when DuckDB could not open it."""
    pid = foreign_lock_pid(path)
    if pid is not None:
        return locked(path, pid, "another program")
    reason = unwritable_reason(path) if not read_only else None
    if reason is not None:
        return unwritable(path, reason)
    header = read_header(path)
    if header is None:
        return StoreCorruptError(
            f"{path} is not a DuckDB database file (no DuckDB header). {REBUILD}", str(path)
        )
    ours = storage_version()
    if header.storage_version != ours:
        return StoreVersionError(
            f"{path} has DuckDB storage version {header.storage_version} (written by DuckDB "
            f"{header.library or 'unknown'}); this DuckDB {duckdb.__version__} reads and "
            f"writes version {ours}. {REBUILD}",
            str(path),
        )
    return damaged(path, exc, read_only=read_only)


def damaged(path: Path, exc: duckdb.Error, *, read_only: bool) -> StoreError:
    """A DuckDB I/O failure on a file we could open: a full or read-only disk, or damage."""
    reason = None if read_only else unwritable_reason(path) or disk_full(path)
    if reason is not None:
        return unwritable(path, reason)
    return StoreCorruptError(f"{path} is damaged ({first_line(exc)}). {REBUILD}", str(path))


_WRITE_FAILURES = (duckdb.TransactionException, duckdb.FatalException)
"""What DuckDB raises when a write fails under it: a COMMIT that could not write its log, a
checkpoint that could not write the file (which also invalidates the connection)."""


def failure(path: Path, exc: duckdb.Error, doing: str, *, read_only: bool) -> StoreError:
    """A statement that failed on an open store: I/O is diagnosed (a full or read-only disk,
    else damage), a failed write is told from the disk, anything else quoted."""
    if isinstance(exc, duckdb.IOException):
        return damaged(path, exc, read_only=read_only)
    reason = None
    if isinstance(exc, _WRITE_FAILURES) and not read_only:
        reason = unwritable_reason(path) or disk_full(path)
    if reason is not None:
        return unwritable(path, reason)
    return StoreError(
        f"{doing} on {path} failed ({first_line(exc)}); it was rolled back and the spool is "
        "untouched: fix the cause and try again",
        str(path),
    )


@functools.cache
def storage_version() -> int:
    """The storage version this DuckDB writes, read from the header of a scratch database."""
    with tempfile.TemporaryDirectory(prefix="compactlens-") as tmp:
        scratch = Path(tmp) / "scratch.duckdb"
        duckdb.connect(str(scratch)).close()
        header = read_header(scratch)
    return header.storage_version if header else -1


def first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
