"""A real PostgreSQL server in a temporary folder, for the lake tests and benches.

``PostgresServer.start`` runs Debian's ``initdb`` and ``pg_ctl`` (as the ``postgres`` user when
run as root, since PostgreSQL refuses to run as root) on 127.0.0.1 and a free port with trust
authentication; ``database`` creates an empty database and returns its libpq conninfo. Where
no PostgreSQL is installed or it cannot start, ``PostgresUnavailableError`` says why (tests
skip with that reason). Nothing here touches a server it did not start.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_BIN = Path(os.environ.get("COMPACTLENS_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
START_TIMEOUT_S = 60


class PostgresUnavailableError(RuntimeError):
    """PostgreSQL is not installed here or could not be started."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster of our own, listening on 127.0.0.1:``port``."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self._names = itertools.count(1)

    @classmethod
    def start(cls) -> PostgresServer:
        initdb = PG_BIN / "initdb"
        if not initdb.is_file():
            raise PostgresUnavailableError(
                f"PostgreSQL is not installed ({initdb} is missing): apt-get install postgresql"
            )
        root = Path(tempfile.mkdtemp(prefix="compactlens-pg-"))
        server = cls(root, _free_port())
        try:
            if os.geteuid() == 0:
                shutil.chown(root, "postgres")
            server._run(initdb, "-D", str(root / "data"), "-A", "trust", "-U", "postgres")
            server._run(
                PG_BIN / "pg_ctl",
                "-D",
                str(root / "data"),
                "-o",
                f"-k {root} -h 127.0.0.1 -p {server.port} -c fsync=off",
                "-l",
                str(root / "server.log"),
                "-w",
                "-t",
                str(START_TIMEOUT_S),
                "start",
            )
        except (OSError, subprocess.SubprocessError, KeyError) as exc:
            shutil.rmtree(root, ignore_errors=True)
            raise PostgresUnavailableError(f"PostgreSQL could not be started: {exc}") from exc
        return server

    def _run(self, *cmd: str | Path) -> None:
        args = [str(c) for c in cmd]
        if os.geteuid() == 0:
            args = ["runuser", "-u", "postgres", "--", *args]
        done = subprocess.run(args, capture_output=True, text=True, timeout=START_TIMEOUT_S)
        if done.returncode != 0:
            raise subprocess.SubprocessError(f"{' '.join(args)}: {done.stderr.strip()[-500:]}")

    def conninfo(self, dbname: str) -> str:
        return f"dbname={dbname} host=127.0.0.1 port={self.port} user=postgres"

    def database(self, prefix: str = "lake") -> str:
        """A new empty database; its libpq conninfo."""
        name = f"{prefix}_{next(self._names)}"
        self._run(PG_BIN / "createdb", "-h", "127.0.0.1", "-p", str(self.port), name)
        return self.conninfo(name)

    def stop(self) -> None:
        try:
            self._run(PG_BIN / "pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def own_postgres(why_skipped: str = "no PostgreSQL") -> Iterator[PostgresServer]:
    """A server of the caller's own, stopped at the end (unless the caller stopped it: a test
    that stops PostgreSQL on purpose); the test is skipped when none can be started."""
    try:
        server = PostgresServer.start()
    except PostgresUnavailableError as exc:
        pytest.skip(f"{why_skipped}: {exc}")
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            server.stop()
