"""The owner of a local store lends it, for a moment, to a command that wants to read it.

DuckDB lets one process open a database file, so while ``compactlens ui`` (or ``ingest
--watch``) owns a home's store, ``stats``, ``retention``, ``postmortem``, ``audit`` and the
other reading commands could not even open it. The owner therefore listens on a Unix socket
beside the store: a reader that finds the store locked asks to borrow it; the owner finishes
what it is doing, closes the store and says so; the reader opens the store as its owner, runs
exactly the code it would run on an idle store (job tables refreshed included), closes it and
hangs up; the owner opens the store again. Nothing is copied and no figure can differ from the
one the same command gives once the owner has stopped. Writers (``ingest``, ``import``,
``rebuild``) never borrow: they are refused with the owner named.

Only the owner's own user may borrow: the socket is 0600 in a 0700 folder, and the owner checks
the caller's uid (``SO_PEERCRED``). A borrower that dies hangs up, which hands the store back.
This module knows sockets and the store's locks; it runs no query itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from analytics.errors import StoreLockedError
from analytics.store.eventstore import EventStore
from analytics.store.lake import LakeStore
from analytics.store.opening import open_store
from analytics.store.schema import DB_NAME

LOG = logging.getLogger("compactlens.store")

SOCKET_SUFFIX = ".lend"
MAX_SOCKET_PATH = 100
"""Unix socket paths are limited to 107 bytes; a longer one lives in a private temp folder."""
LEND_WAIT_S = 600.0
"""How long a borrower waits for the owner to hand the store over (it finishes an ingest or a
job run first, which can take minutes on a large store)."""
REOPEN_RETRY_S = 0.5


def socket_path(db: Path) -> Path:
    """Where the owner of ``db`` listens: beside it, or (a long path) in a private temp folder."""
    beside = db.resolve().with_name(db.name + SOCKET_SUFFIX)
    if len(os.fsencode(beside)) <= MAX_SOCKET_PATH:
        return beside
    key = hashlib.sha256(os.fsencode(db.resolve())).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / f"compactlens-{os.getuid()}" / f"{key}{SOCKET_SUFFIX}"


def _private_folder(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or folder.is_symlink():
        raise OSError(f"{folder} is not a private folder of this user; remove it")


def _peer_uid(conn: socket.socket) -> int:
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


def _read_line(conn: socket.socket) -> bytes:
    """One line (without its newline), or b"" when the other side hung up first."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            return b""
        data += chunk
    return data.rstrip(b"\n")


class StoreLender:
    """Serves borrow requests for ``db`` in a daemon thread.

    ``lock`` is the lock every user of the owner's store takes; ``release`` closes the store
    and ``reopen`` opens it again (both are called with ``lock`` held). ``reopen`` is retried
    until it works: another process may take the store in the moment it is free."""

    def __init__(
        self,
        db: Path,
        lock: AbstractContextManager[object],
        release: Callable[[], None],
        reopen: Callable[[], None],
    ) -> None:
        self.db = db
        self.path = socket_path(db)
        self.lock = lock
        self.release = release
        self.reopen = reopen
        self.lent = 0
        self._stop = threading.Event()
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> StoreLender:
        if self.path.parent != self.db.resolve().parent:
            _private_folder(self.path.parent)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a dead owner's socket; the store's own lock says we own it now
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        before = os.umask(0o077)
        try:
            server.bind(os.fspath(self.path))
        finally:
            os.umask(before)
        server.listen(8)
        server.settimeout(0.5)  # so that close() is seen within half a second
        self._server = server
        self._thread = threading.Thread(target=self._serve, name="compactlens-lender", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            with conn:
                try:
                    self._lend(conn)
                except OSError as exc:
                    LOG.warning("lending the store %s failed: %s", self.db, exc)

    def _lend(self, conn: socket.socket) -> None:
        conn.settimeout(None)
        if _peer_uid(conn) != os.getuid():
            conn.sendall(b'{"refused": "another user"}\n')
            return
        request = json.loads(_read_line(conn) or b"{}")
        with self.lock:
            self.release()
            try:
                conn.sendall(json.dumps({"lent": os.getpid()}).encode() + b"\n")
                _read_line(conn)  # the borrower is done when it says so or hangs up
            finally:
                self._take_back()
        self.lent += 1
        LOG.info("lent the store to `%s` (PID %s)", request.get("command"), request.get("pid"))

    def _take_back(self) -> None:
        warned = False
        while True:
            try:
                self.reopen()
                return
            except Exception as exc:  # another process took it meanwhile: wait for it
                if self._stop.is_set():
                    return
                if not warned:
                    LOG.warning("cannot take the store back yet (%s); retrying", exc)
                    warned = True
                time.sleep(REOPEN_RETRY_S)

    def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def lend_store(
    store: EventStore,
    lock: AbstractContextManager[object],
    release: Callable[[], None],
    reopen: Callable[[], None],
) -> StoreLender | None:
    """A started lender of ``store`` (a local file), or None for a lake: a lake has no single
    owner, so readers open it themselves."""
    if isinstance(store, LakeStore):
        return None
    return StoreLender(Path(store.location()), lock, release, reopen).start()


@contextlib.contextmanager
def borrowed(db: Path, command: str) -> Iterator[int | None]:
    """Borrows ``db`` from the process that owns it: yields the owner's PID once the store is
    free to open, or None when no owner answers (no socket, or a dead owner's). Leaving the
    block hands the store back."""
    path = socket_path(db)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(LEND_WAIT_S)
        try:
            conn.connect(os.fspath(path))
        except (FileNotFoundError, ConnectionRefusedError):
            conn.close()
            yield None
            return
        conn.sendall(json.dumps({"command": command, "pid": os.getpid()}).encode() + b"\n")
        reply = json.loads(_read_line(conn) or b"{}")
        owner = reply.get("lent")
        yield int(owner) if owner is not None else None
        with contextlib.suppress(OSError):
            conn.sendall(b'{"returned": true}\n')
    finally:
        conn.close()


@contextlib.contextmanager
def reading_store(
    home: str | os.PathLike[str], command: str, *, read_only: bool = False
) -> Iterator[EventStore]:
    """``home``'s store for a command that reads it (and may refresh its job tables): opened
    directly, or borrowed from the process that owns it (``StoreLockedError`` as before when
    no owner lends it)."""
    try:
        store = open_store(home, read_only=read_only)
    except StoreLockedError:
        with borrowed(Path(home) / DB_NAME, command) as owner:
            if owner is None:
                raise
            with open_store(home, read_only=read_only) as lent:
                yield lent
        return
    with store:
        yield store
