"""Store backends for the contract suite: the local file and a lake on a PostgreSQL we start.

``postgres`` is one real server for the whole run (skipped, with the reason, where PostgreSQL
cannot be started); ``backend`` is parametrised over the local DuckDB file of a home and a
fresh lake (a new database on that server, data under the home), so one test class runs
against both (eventsourcing's pattern). ``lake`` is a fresh lake alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from analytics.store import (
    EventStore,
    Lake,
    Selection,
    open_store,
    select,
    selected,
    store_location,
)
from tests.analytics.store.postgres import PostgresServer, own_postgres


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with own_postgres("no lake tests") as server:
        yield server


@dataclass(frozen=True)
class Backend:
    """One store backend for one test: its name, a home, and the selection that opens it."""

    name: str
    home: Path
    selection: Selection

    def open(self, home: Path | None = None, *, read_only: bool = False) -> EventStore:
        """The store, opened as ``open_store`` of ``home`` (default: ours) does."""
        previous = selected()
        select(self.selection)
        try:
            return open_store(home or self.home, read_only=read_only)
        finally:
            select(previous)

    @property
    def lake(self) -> Lake | None:
        where = store_location(self.home, self.selection)
        return where if isinstance(where, Lake) else None


def lake_backend(postgres: PostgresServer, home: Path) -> Backend:
    url = "ducklake:postgres:" + postgres.database()
    return Backend("lake", home, Selection(url, home / "lake"))


@pytest.fixture(params=["local", "lake"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    home = tmp_path / "home"
    home.mkdir()
    if request.param == "local":
        return Backend("local", home, Selection())
    server: PostgresServer = request.getfixturevalue("postgres")
    return lake_backend(server, home)


@pytest.fixture
def lake(postgres: PostgresServer, tmp_path: Path) -> Backend:
    home = tmp_path / "lake-home"
    home.mkdir()
    return lake_backend(postgres, home)


@pytest.fixture
def selected_backend(backend: Backend) -> Iterator[Backend]:
    """``backend``, selected for the whole test (the projector's helpers open it by home)."""
    previous = selected()
    select(backend.selection)
    try:
        yield backend
    finally:
        select(previous)
