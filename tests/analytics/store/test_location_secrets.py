"""No secret of a store URL reaches a message (issue 28, item 6.1): ``redact_url`` hides every
form libpq and DuckLake accept a password in, and a lake that cannot be reached says why
without it.

The lakes here are never reachable (port 9 on 127.0.0.1, where nothing listens): opening one
fails in DuckDB's ATTACH, whose message quotes the connection string it was given.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from analytics.store import Selection, StoreError, open_store, select, selected
from analytics.store.location import Lake, redact_url

SECRET = "s3cr3t-Pw"

STORE_URLS = [
    f"ducklake:postgres:dbname=lake host=127.0.0.1 port=9 user=u password={SECRET}",
    f"ducklake:postgres:dbname=lake host=127.0.0.1 port=9 user=u password = '{SECRET} x'",
    f"ducklake:postgres:dbname=lake host=127.0.0.1 port=9 user=u sslpassword={SECRET}",
    f"ducklake:postgres:postgresql://u:{SECRET}@127.0.0.1:9/lake",
    f"ducklake:postgres:postgres://u:{SECRET}@127.0.0.1:9/lake?sslmode=disable",
    f"ducklake:postgres:postgresql://u@127.0.0.1:9/lake?password={SECRET}&sslmode=disable",
    f"ducklake:postgres:postgresql://u@127.0.0.1:9/lake?sslmode=disable&password={SECRET}",
]
"""A password as libpq key=value (bare, quoted, the SSL key's), as URI userinfo, and as a URI
query parameter."""

ENDPOINTS = [
    f"http://user:{SECRET}@127.0.0.1:4318/v1/traces",
    f"https://user:{SECRET}@collector.example:443/v1/traces",
    f"http://127.0.0.1:4318/v1/traces?token={SECRET}",
    f"http://127.0.0.1:4318/v1/traces?x=1&api_key={SECRET}",
]


@pytest.fixture
def restored_selection() -> Iterator[None]:
    previous = selected()
    yield
    select(previous)


@pytest.mark.parametrize("url", STORE_URLS + ENDPOINTS)
def test_redact_url_hides_every_form_of_a_password_and_keeps_the_rest(url: str) -> None:
    shown = redact_url(url)
    assert SECRET not in shown
    assert "***" in shown
    assert "127.0.0.1" in shown or "collector.example" in shown  # where it points stays said


@pytest.mark.parametrize(
    "text",
    [
        "ducklake:postgres:dbname=lake host=127.0.0.1 port=5432 user=u",
        "ducklake:postgres:postgresql://u@127.0.0.1:5432/lake?sslmode=require",
        "http://127.0.0.1:4318/v1/traces",
        "/home/me/data/compactlens.duckdb",
        "tokens_before=12000 tokens_after=3000",
    ],
)
def test_redact_url_leaves_text_without_secrets_alone(text: str) -> None:
    assert redact_url(text) == text


def test_redact_url_hides_secrets_inside_a_longer_message() -> None:
    said = (
        'IO Error: Unable to connect to Postgres at "postgresql://u:'
        + SECRET
        + '@127.0.0.1:9/x": connection refused; then "dbname=x password='
        + SECRET
        + '": again'
    )
    assert SECRET not in redact_url(said)


@pytest.mark.parametrize("url", STORE_URLS)
def test_a_lake_that_cannot_be_reached_says_why_without_its_password(
    tmp_path: Path, url: str, restored_selection: None
) -> None:
    select(Selection(url, tmp_path / "lake"))
    with pytest.raises(StoreError) as info:
        open_store(tmp_path / "home")
    assert SECRET not in str(info.value)
    assert SECRET not in str(info.value.path)
    assert "Connection refused" in str(info.value) or "connection" in str(info.value).lower()
    lake = Lake(url.removeprefix("ducklake:postgres:"), tmp_path / "lake")
    assert SECRET not in str(lake)
