"""Quarantined lines keyed by the host that read them (issue 20: several hosts write a lake).

Two hosts' spools hold a file of the same name with the same bad line at the same offset (an
agent of the same pid on each machine, say). Their offsets are two rows on a lake (host, spool
folder, file), so their quarantined lines must be two rows as well, on the lake and on the local
file alike, and reading either spool again must store neither line twice. Real stores (a lake on
the PostgreSQL the tests start, a DuckDB file in a temporary folder), real spool files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.errors import StoreVersionError
from analytics.store import STORE_SCHEMA_VERSION, EventStore, LakeStore
from analytics.store.projector import Projector
from tests.analytics.spool_helpers import usage_lines, write_lines
from tests.analytics.store.conftest import Backend

HOSTS = ("host-a", "host-b")
BAD = "this line is not an event"


def _open_as(backend: Backend, host: str) -> EventStore:
    """The backend's store, opened as the projector of ``host`` would open it."""
    if backend.lake is not None:
        return LakeStore(backend.lake, host=host)
    return EventStore(backend.home / "compactlens.duckdb", host=host)


def _spool_of(root: Path, host: str) -> Path:
    """``host``'s spool: a file of the same name as every other host's, the same bad line
    first in it, then three events of that host's own session."""
    spool = root / host / "spool"
    write_lines(spool / "agent-4242.jsonl", [BAD, *usage_lines(f"session-of-{host}", 3)])
    return spool


def _ingest(backend: Backend, host: str, spool: Path) -> tuple[int, int]:
    with _open_as(backend, host) as store:
        result = Projector(store, spool).ingest()
    return result.new_events, result.quarantined


def _quarantine(backend: Backend) -> list[tuple[str, str, int, int, str]]:
    with _open_as(backend, HOSTS[0]) as store:
        rows = store.query(
            "SELECT host, source, line, byte_offset, raw FROM quarantine ORDER BY host"
        ).rows()
    return [(str(h), str(s), int(n), int(o), str(r)) for h, s, n, o, r in rows]


def _events(backend: Backend) -> int:
    with _open_as(backend, HOSTS[0]) as store:
        return int(store.query("SELECT count(*) FROM events").item())


def test_two_hosts_same_named_bad_lines_are_two_rows_and_reingest_doubles_nothing(
    backend: Backend, tmp_path: Path
) -> None:
    spools = {host: _spool_of(tmp_path / "hosts", host) for host in HOSTS}

    first = [_ingest(backend, host, spools[host]) for host in HOSTS]

    assert first == [(3, 1), (3, 1)]
    expected = [(host, "agent-4242.jsonl", 1, 0, BAD) for host in HOSTS]
    assert _quarantine(backend) == expected
    again = [_ingest(backend, host, spools[host]) for host in (*HOSTS, *reversed(HOSTS))]
    assert all(q == 0 for _events_new, q in again), again
    assert all(n == 0 for n, _q in again), again
    assert _quarantine(backend) == expected
    assert _events(backend) == 6


def test_a_store_of_the_schema_before_host_keyed_quarantine_asks_for_a_rebuild(
    tmp_path: Path,
) -> None:
    db = tmp_path / "compactlens.duckdb"
    with EventStore(db) as store:
        store.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", ["4"])
    with pytest.raises(
        StoreVersionError, match=f"schema 4, this compactlens uses {STORE_SCHEMA_VERSION}"
    ) as caught:
        EventStore(db)
    assert STORE_SCHEMA_VERSION > 4
    assert "compactlens rebuild" in str(caught.value)
