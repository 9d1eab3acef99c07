"""Spool files as the projector may read them: regular files directly inside the spool folder.

``SpoolDir`` lists the folder's ``*.jsonl`` entries without following links and opens each one
relative to the folder's own descriptor with ``O_NOFOLLOW | O_NONBLOCK``, then checks with
``fstat`` on the opened descriptor that it is a regular file: a symbolic link (to ``~/secret``
or ``/etc/passwd``), a FIFO, a device or a directory is never read, nor is a file with more
than one hard link (a second name for any file of the same file system), and their bytes are
never copied anywhere. Events in the spool become the store's truth, so a file is read only when
it is this user's own and no one else may write to it: one owned by another user, or writable
by its group or by everyone (another user could append events), is refused, from the ``fstat``
of the opened descriptor. A file that cannot be read now (gone since the listing, another
user's, writable by others) is a ``SpoolSkipError`` with the reason, so the projector skips it,
reads the others and tries again on its next pass. ``tail_sha256`` fingerprints an offset by
the bytes just before it, so a file truncated and rewritten past its old offset (logrotate's
``copytruncate``) is told apart from one that only grew. ``source_name`` is the name a file is
stored under, unique per real file name. Nothing here parses lines or touches the database.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TAIL_BYTES = 4096
"""How many bytes before an offset its fingerprint hashes."""

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""No link is followed; a FIFO swapped in after the listing cannot block the open."""

_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def source_name(path: Path | str) -> str:
    """The name a spool file is stored under (offsets, events, quarantine): its file name, with
    bytes that are not UTF-8 (a name Python decoded with ``surrogateescape``) written as
    ``\\xNN`` and a backslash doubled, so that two real names never share one stored name."""
    name = path.name if isinstance(path, Path) else path
    raw = name.encode("utf-8", "surrogateescape").replace(b"\\", b"\\\\")
    return raw.decode("utf-8", "backslashreplace")


def tail_sha256(before: bytes) -> str:
    """The fingerprint of an offset: sha256 of the last ``TAIL_BYTES`` of ``before`` (the bytes
    of the file before that offset, or at least that many of them)."""
    return hashlib.sha256(before[-TAIL_BYTES:]).hexdigest()


class SpoolSkipError(Exception):
    """A spool file not read this time; the message says why (never what the file holds)."""


@dataclass(frozen=True)
class SpoolEntry:
    """A regular ``*.jsonl`` file of the spool folder, as the listing (``lstat``) saw it."""

    name: str
    """The name in the folder (as the OS gives it; may hold surrogate escapes)."""
    source: str
    inode: int
    size: int


def kind_of(mode: int) -> str:
    """What a file that is not regular is, for a skip line."""
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


class SpoolDir:
    """The spool folder, opened once (``opened``) so that every file is opened relative to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @contextlib.contextmanager
    def opened(self) -> Iterator[SpoolDir]:
        """The folder's descriptor for the duration (nothing to list if the folder is missing)."""
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            self._fd = None
        try:
            yield self
        finally:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)

    def listing(self) -> tuple[list[SpoolEntry], dict[str, str]]:
        """(regular ``*.jsonl`` files in name order, {source: why skipped} for the rest)."""
        if self._fd is None:
            return [], {}
        entries: list[SpoolEntry] = []
        skipped: dict[str, str] = {}
        with os.scandir(self._fd) as found:
            for entry in found:
                if not entry.name.endswith(".jsonl"):
                    continue
                source = source_name(entry.name)
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # gone since the folder was read: nothing to say
                if not stat.S_ISREG(info.st_mode):
                    skipped[source] = f"{kind_of(info.st_mode)}, not a regular file; not read"
                    continue
                if info.st_nlink > 1:
                    skipped[source] = _linked(info.st_nlink)
                    continue
                entries.append(SpoolEntry(entry.name, source, info.st_ino, info.st_size))
        entries.sort(key=lambda e: e.name)
        return entries, skipped

    def open(self, entry: SpoolEntry) -> tuple[int, os.stat_result]:
        """(descriptor, its fstat) of a regular file in this folder; SpoolSkipError otherwise."""
        if self._fd is None:
            raise SpoolSkipError("the spool folder is gone; tried again next time")
        try:
            fd = os.open(entry.name, _OPEN_FLAGS, dir_fd=self._fd)
        except OSError as exc:
            raise _open_failure(exc) from None
        try:
            info = os.fstat(fd)
        except OSError as exc:
            os.close(fd)
            raise read_failure(exc) from None
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise SpoolSkipError(f"{kind_of(info.st_mode)}, not a regular file; not read")
        if info.st_nlink > 1:
            os.close(fd)
            raise SpoolSkipError(_linked(info.st_nlink))
        foreign = _foreign(info)
        if foreign:
            os.close(fd)
            raise SpoolSkipError(foreign)
        return fd, info


def _foreign(info: os.stat_result) -> str:
    """Why a spool file is not this user's alone ("" when it is): another owner, or a mode
    that lets its group or everyone write to it."""
    me = os.geteuid()
    if info.st_uid != me:
        return (
            f"owned by another user (uid {info.st_uid}; this process runs as uid {me}): its "
            "events may not be this user's agents'; not read (chown it to read it)"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_IWOTH | stat.S_IWGRP):
        who = "other users" if mode & stat.S_IWOTH else "its group"
        return (
            f"writable by {who} (mode {mode:04o}): anyone of them could add events to it; not "
            "read (chmod go-w it to read it)"
        )
    return ""


def _linked(links: int) -> str:
    """The skip for a file with other names: a hard link may make any file of the same
    file system look like a spool file, as a symbolic link would."""
    return f"a file with {links} hard links (names elsewhere too; a spool file has one), not read"


def read_failure(exc: OSError) -> SpoolSkipError:
    """The skip for a file that could not be opened or read (another user's, an I/O error)."""
    return SpoolSkipError(f"cannot be read ({exc.strerror or exc}); tried again next time")


def _open_failure(exc: OSError) -> SpoolSkipError:
    if exc.errno == errno.ELOOP:  # a link swapped in after the listing
        return SpoolSkipError("a symbolic link, not a regular file; not read")
    if exc.errno == errno.ENOENT:
        return SpoolSkipError(
            "gone before it could be read (deleted or renamed); tried again next time"
        )
    return read_failure(exc)


def read_at(fd: int, offset: int, size: int) -> bytes:
    """Up to ``size`` bytes at ``offset`` (fewer only at the end of the file)."""
    pieces: list[bytes] = []
    while size > 0:
        piece = os.pread(fd, size, offset)
        if not piece:
            break
        pieces.append(piece)
        offset += len(piece)
        size -= len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
