"""The store's files on disk, without DuckDB: owner lock, header, foreign locks, privacy and
backups.

``EventStore`` asks this module what a database file IS when DuckDB cannot open it: held by a
live owner (our owner lock file, or DuckDB's own lock taken by another program), not writable,
no DuckDB file at all, or a DuckDB file of another storage version. ``private_files`` keeps
everything the store creates 0600 (folders 0700), as private as the spool it comes from.
``rebuild`` uses it to build a new database beside the old one, move the old one aside as a
backup, swap the new one in and prune older backups. It never opens a database and never
interprets DuckDB's error messages.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import stat
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from analytics.errors import StoreLockedError, StoreUnwritableError

OWNER_SUFFIX = ".owner"
"""``compactlens.duckdb.owner``: flock'ed exclusively by the writer (which writes its PID into
it), shared by read-only openers, released by the kernel when the process dies."""

HEADER_BYTES = 4096
_MAGIC_AT, _MAGIC = 8, b"DUCK"
_VERSION_AT = 12
_LIBRARY_AT, _LIBRARY_LEN = 52, 32


@dataclass(frozen=True)
class Header:
    """What the first block of a DuckDB file says about who wrote it."""

    storage_version: int
    library: str
    """The DuckDB release that wrote it, e.g. ``v1.5.6``."""


def read_header(path: Path) -> Header | None:
    """The DuckDB header of ``path``; None when the file is too short or lacks the magic."""
    try:
        with path.open("rb") as fh:
            head = fh.read(HEADER_BYTES)
    except OSError:
        return None
    if len(head) < HEADER_BYTES or head[_MAGIC_AT : _MAGIC_AT + 4] != _MAGIC:
        return None
    (version,) = struct.unpack_from("<Q", head, _VERSION_AT)
    raw = head[_LIBRARY_AT : _LIBRARY_AT + _LIBRARY_LEN].split(b"\0", 1)[0]
    return Header(int(version), raw.decode("ascii", "replace"))


def unwritable_reason(path: Path) -> str | None:
    """Why a read-write open of ``path`` cannot work, or None if nothing on disk forbids it."""
    parent = path.parent
    for ancestor in (parent, *parent.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                return f"{ancestor} is a file, not a directory"
            break
    if path.is_dir():
        return f"{path} is a directory, not a database file"
    if path.exists() and not os.access(path, os.W_OK):
        return f"{path} is read-only"
    if parent.is_dir() and not os.access(parent, os.W_OK):
        return f"{parent} is read-only"
    if parent.is_dir() and os.statvfs(parent).f_flag & os.ST_RDONLY:
        return f"{parent} is on a read-only file system"
    return None


def unwritable(path: Path, reason: str) -> StoreUnwritableError:
    return StoreUnwritableError(
        f"{path} cannot be written: {reason}. Free some space or make it writable, or pass "
        "another --home; nothing is lost, the events wait in the spool.",
        str(path),
    )


def locked(path: Path, pid: int | None, what: str = "another process") -> StoreLockedError:
    holder = f" (held by PID {pid})" if pid else ""
    return StoreLockedError(
        f"{path} is open in {what}{holder}: DuckDB allows one writer per file. Stop that "
        "process (e.g. the app or a running `compactlens ingest --watch`) and try again; "
        "nothing is lost, the events wait in the spool.",
        str(path),
    )


REBUILD = (
    "Run `compactlens rebuild` to recreate it from the spool (the old file is kept beside it "
    "as a backup)."
)
_DISK_RESERVE_BYTES = 16 * 2**20


def disk_full(path: Path) -> str | None:
    free = shutil.disk_usage(path.parent).free
    return (
        f"the disk holding it is full ({free:,} bytes free)" if free < _DISK_RESERVE_BYTES else None
    )


class _PrivateUmask:
    """The process umask, with group and other bits masked while any holder needs it.

    DuckDB creates its files (the database, and the write-ahead log again after every
    checkpoint) with mode 0666 less the umask, and offers no setting of its own; so while a
    writable store or an export is open, the process umask masks 0o077 as well. It is
    process-wide: other threads' files made meanwhile are private too, never more open. The
    last holder to leave gives back the umask the first one found."""

    MASK = 0o077

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._before = 0

    def acquire(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._before = os.umask(0)
                os.umask(self._before | self.MASK)
            self._depth += 1

    def release(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                os.umask(self._before)


PRIVATE_UMASK = _PrivateUmask()


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Files and folders created meanwhile are 0600 and 0700 (see ``_PrivateUmask``)."""
    PRIVATE_UMASK.acquire()
    try:
        yield
    finally:
        PRIVATE_UMASK.release()


def make_private(*paths: Path) -> None:
    """Take group and other permissions off existing regular files (a store an earlier
    release made 0644); anything else, or a file we may not change, is left as it is."""
    for path in paths:
        with contextlib.suppress(OSError):
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode) and mode & 0o077:
                os.chmod(path, stat.S_IMODE(mode) & ~0o077)


def claim_parent(path: Path) -> None:
    """Create the database's directory, or say why it cannot be (StoreUnwritableError)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise unwritable(path, unwritable_reason(path) or exc.strerror or str(exc)) from exc


class OwnerLock:
    """The owner lock of one database: exclusive for the writer, shared for readers."""

    def __init__(self, db: Path, *, exclusive: bool) -> None:
        self.path = db.with_name(db.name + OWNER_SUFFIX)
        self.exclusive = exclusive
        self._fd: int | None = None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            if exclusive:
                raise unwritable(db, unwritable_reason(db) or exc.strerror or str(exc)) from exc
            return  # a reader in a read-only home: DuckDB's own lock still guards the file
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise locked(db, pid) from None
        if exclusive:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            if self.exclusive:
                os.ftruncate(fd, 0)
        os.close(fd)  # closing the descriptor releases the flock


def _read_pid(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 32, 0).decode("ascii").strip()
        return int(text) if text else None
    return None


def foreign_lock_pid(path: Path) -> int | None:
    """The PID of another process holding DuckDB's own (POSIX) lock on ``path``, else None.

    Asks the kernel (F_GETLK) without taking the lock, so our own locks are left alone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        probe = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, probe)
        kind, _whence, _start, _len, pid = struct.unpack("hhqqi", answer)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOLCK):
            return None
        raise
    finally:
        os.close(fd)
    return int(pid) if kind != fcntl.F_UNLCK and pid != os.getpid() else None


# ---------------------------------------------------------------- backups


@dataclass(frozen=True)
class Backup:
    path: Path
    """The old database file, renamed; its write-ahead log (if any) is ``path`` + ``.wal``."""
    bytes: int
    """Database file plus write-ahead log."""


def move_aside(db: Path, stamp: str) -> Backup | None:
    """Rename ``db`` and its write-ahead log to ``<db>.bak-<stamp>[.wal]``; None if no db."""
    if not (db.exists() or db.is_symlink()):
        return None
    target = db.with_name(f"{db.name}.bak-{stamp}")
    db.rename(target)
    with contextlib.suppress(FileNotFoundError):
        db.with_name(db.name + ".wal").rename(target.with_name(target.name + ".wal"))
    return Backup(target, _size(target) + _size(target.with_name(target.name + ".wal")))


BUILDING = ".rebuilding-"
"""``<db>.rebuilding-<stamp>``: a database being rebuilt beside the one in place."""


def build_path(db: Path, stamp: str) -> Path:
    """Where a rebuild makes the new database: beside ``db``, on the same file system, so that
    it can be renamed over it in one step once complete."""
    return db.with_name(f"{db.name}{BUILDING}{stamp}")


def discard_builds(db: Path) -> None:
    """Delete databases of rebuilds that never finished (killed, or failed): their files, logs
    and lock files. Only the owner of ``db``'s lock may call this."""
    for part in db.parent.glob(f"{db.name}{BUILDING}*"):
        if part.is_file() or part.is_symlink():
            part.unlink(missing_ok=True)


def swap_in(new: Path, db: Path) -> None:
    """Put the complete database ``new`` (and its log, if any) in place of ``db``, which has
    been moved aside; its lock file is not needed any more."""
    new_wal = new.with_name(new.name + ".wal")
    if new_wal.exists():
        new_wal.rename(db.with_name(db.name + ".wal"))
    new.rename(db)
    new.with_name(new.name + OWNER_SUFFIX).unlink(missing_ok=True)


BACKUP_STAMP = "%Y%m%dT%H%M%S%f"
_STAMPED = re.compile(r"\.bak-\d{8}T\d{12}")


def backups_of(db: Path) -> list[Path]:
    """Backups of ``db`` (not their logs or lock files), oldest first (stamps sort by time)."""
    found = db.parent.glob(f"{db.name}.bak-*")
    return sorted(p for p in found if _STAMPED.fullmatch(p.name[len(db.name) :]))


def prune_backups(db: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` backups of ``db``; returns what was deleted."""
    old = backups_of(db)
    doomed = old[: max(0, len(old) - keep)]
    for path in doomed:
        for part in (path, *(path.with_name(path.name + s) for s in (".wal", OWNER_SUFFIX))):
            if part.is_dir():
                _remove_tree(part)
            else:
                part.unlink(missing_ok=True)
    return doomed


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.exists() else 0


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path)
