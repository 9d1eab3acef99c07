"""The app's pages when its store cannot be opened or read (issue 28, item 6.1): each page says
so in one error, with no traceback, and no page shows any part of the store URL's password.

Two ways down: a lake that was never reachable (127.0.0.1 port 9, where nothing listens; its
password given as libpq key=value, URI userinfo or URI query), and a lake on a real PostgreSQL
this test starts, which the app opens and reads, and which then stops under it. Everything a
page renders (every element of the main area and the sidebar, exceptions included) and every
log line is searched for the password. Pages run under ``streamlit.testing`` (AppTest), as a
browser session would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from analytics import Selection, select
from analytics.store import selected
from app.owner import release_owner, shared_owner
from app.widgets import PAGE_FILES
from tests.analytics.store.postgres import PostgresServer, own_postgres
from tests.app.pages import MAIN

SECRET = "s3cr3t-Pw"
UNREACHABLE = [
    f"ducklake:postgres:dbname=lake host=127.0.0.1 port=9 user=u password={SECRET}",
    f"ducklake:postgres:postgresql://u:{SECRET}@127.0.0.1:9/lake",
    f"ducklake:postgres:postgresql://u@127.0.0.1:9/lake?password={SECRET}",
]


@pytest.fixture
def app_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home of its own for the app, and the process's store selection put back after."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("COMPACTLENS_HOME", str(home))
    previous = selected()
    yield home
    select(previous)


def _everything(at: AppTest) -> str:
    """Every element the page rendered, main area and sidebar, as its protobuf text."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            parts.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(parts)


def _pages(at: AppTest) -> Iterator[tuple[str, AppTest]]:
    for name, page in PAGE_FILES.items():
        at.switch_page(page)
        at.run()
        yield name, at


def _check_page(name: str, at: AppTest, expected: str) -> None:
    shown = _everything(at).replace("\\", "")  # markdown escapes split a word: s3cr3t\-Pw
    assert SECRET not in shown, f"{name}: {shown}"
    assert not at.exception, f"{name}: {[e.value for e in at.exception]}"
    errors = " ".join(str(e.value) for e in at.error).replace("\\", "")
    assert expected in errors, f"{name}: {errors!r}"


@pytest.mark.parametrize("url", UNREACHABLE, ids=["key-value", "userinfo", "query"])
def test_every_page_says_the_store_cannot_be_opened_without_its_password(
    app_home: Path, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    select(Selection(url, app_home / "lake"))
    at = AppTest.from_file(str(MAIN), default_timeout=60)
    at.run()
    for name, page in _pages(at):
        _check_page(name, page, "cannot open the lake")
    assert SECRET not in caplog.text


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    with own_postgres() as server:
        yield server


@pytest.mark.parametrize("form", ["key-value", "userinfo"])
def test_every_page_says_the_store_went_away_without_its_password(
    app_home: Path, postgres: PostgresServer, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    conninfo = postgres.database()  # trust authentication: the password is sent, not checked
    dbname = conninfo.split()[0].removeprefix("dbname=")
    url = (
        f"ducklake:postgres:{conninfo} password={SECRET}"
        if form == "key-value"
        else f"ducklake:postgres:postgresql://postgres:{SECRET}@127.0.0.1:{postgres.port}/{dbname}"
    )
    select(Selection(url, app_home / "lake"))
    at = AppTest.from_file(str(MAIN), default_timeout=60)
    at.run()
    assert not at.exception and not at.error, _everything(at)  # the lake is up: a normal page
    owner = shared_owner(app_home)
    try:
        postgres.stop()  # PostgreSQL goes away under the app
        owner.ingest()  # what the projector's next tick does
        assert owner.last_error is not None
        for name, page in _pages(at):
            _check_page(name, page, "lake")
    finally:
        release_owner(owner)
    assert SECRET not in caplog.text  # the owner's log line of the failure neither
