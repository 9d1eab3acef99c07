"""The probe that names why a lake statement failed when its PostgreSQL went away: DuckDB says
only "Attempting to fetch from an unsuccessful query result" for a server stopped mid-session
(a fresh-clone CI run showed it), so the message must say what PostgreSQL's client says. A
running server counts as answering: see ``test_lake_watch_outage``."""

from __future__ import annotations

import socket
from pathlib import Path

from analytics.store.lake import catalog_unreachable


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_port_nobody_listens_on_is_named_with_the_refusal_and_no_password() -> None:
    port = _free_port()
    said = catalog_unreachable(f"dbname=lake host=127.0.0.1 port={port} password=hunter2")
    assert said is not None
    assert f"port {port}" in said and "Connection refused" in said, said
    assert "hunter2" not in said


def test_a_unix_socket_folder_without_a_server_names_the_socket(tmp_path: Path) -> None:
    said = catalog_unreachable(f"host={tmp_path} port=5999 dbname=x")
    assert said is not None and f"{tmp_path}/.s.PGSQL.5999" in said, said


def test_a_listener_that_is_not_postgresql_does_not_count_as_answering() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        server.settimeout(0.1)
        said = catalog_unreachable(f"host=127.0.0.1 port={port} dbname=x", timeout_s=1)
    assert said is not None and "PostgreSQL does not take a new connection" in said, said
