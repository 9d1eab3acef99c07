"""Where the store is: the local DuckDB file of a home, or a DuckLake with a PostgreSQL catalog.

``store_location`` turns what the command line (or the app) was given, ``--store URL`` and
``--lake-data DIR``, into a ``LocalFile`` or a ``Lake``; ``select``/``selected`` keep this
process's choice, so that every command opens the same store through ``opening.open_store``.
Nothing here reads the environment (the command line's common options do) or opens a database.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from analytics.errors import StoreError

LAKE_PREFIX = "ducklake:"
POSTGRES_PREFIX = "ducklake:postgres:"
LAKE_DATA_DIR = "lake"
"""``<home>/lake``: where a lake's Parquet files go unless ``--lake-data`` says otherwise."""
DB_FILE = "compactlens.duckdb"


@dataclass(frozen=True)
class LocalFile:
    """The embedded default: one DuckDB file, one writer at a time."""

    path: Path


@dataclass(frozen=True)
class Lake:
    """A DuckLake: catalog in PostgreSQL (``conninfo``, libpq's key=value form), Parquet data
    under ``data_path``; many writers and readers at once."""

    conninfo: str
    data_path: Path

    @property
    def url(self) -> str:
        return POSTGRES_PREFIX + self.conninfo

    def __str__(self) -> str:
        """The URL with any password hidden (it goes into messages and logs)."""
        return redact(self.url)


StoreLocation = LocalFile | Lake


@dataclass(frozen=True)
class Selection:
    """What this process was told: ``--store`` and ``--lake-data`` (None: the defaults)."""

    store: str | None = None
    lake_data: Path | None = None


_SELECTED = [Selection()]
"""This process's selection (one for every thread: the app opens its store in a thread)."""


def select(selection: Selection) -> None:
    """Make ``selection`` this process's store for every ``open_store`` after it."""
    _SELECTED[0] = selection


def selected() -> Selection:
    return _SELECTED[0]


def store_location(
    home: str | os.PathLike[str], selection: Selection | None = None
) -> StoreLocation:
    """The store of ``home`` under ``selection`` (default: this process's): the local file
    ``<home>/compactlens.duckdb`` when no store was named, a path as given, or a lake."""
    chosen = selection if selection is not None else selected()
    root = Path(home)
    url = (chosen.store or "").strip()
    if not url:
        return LocalFile(root / DB_FILE)
    if not url.startswith(LAKE_PREFIX):
        return LocalFile(Path(url).expanduser())
    if not url.startswith(POSTGRES_PREFIX):
        raise StoreError(_unsupported_catalog(url), redact(url))
    conninfo = url[len(POSTGRES_PREFIX) :].strip()
    if not conninfo:
        raise StoreError(
            f"--store {url!r} names no PostgreSQL database; write it as "
            "'ducklake:postgres:dbname=NAME host=HOST port=PORT user=USER'",
            url,
        )
    data = chosen.lake_data if chosen.lake_data is not None else root / LAKE_DATA_DIR
    return Lake(conninfo, Path(data).expanduser().resolve())


def _unsupported_catalog(url: str) -> str:
    catalog = url[len(LAKE_PREFIX) :].split(":", 1)[0] or "(none)"
    why = (
        "DuckLake's SQLite catalog fails concurrent writers with 'database is locked' on "
        "DuckDB 1.5 (DuckLake issue 1309), and a lake exists to be written by many hosts"
        if catalog == "sqlite"
        else "only PostgreSQL catalogs are supported"
    )
    return (
        f"--store {redact(url)!r}: catalog {catalog!r} refused: {why}. Use "
        "'ducklake:postgres:<libpq conninfo>', or no --store for the local file"
    )


_SECRET_KEYS = (
    "password|passwd|pwd|sslpassword|secret|client_secret|token|access_token|refresh_token"
    "|api_key|apikey|api-key"
)
_SECRET_VALUE = re.compile(
    rf"(?<![\w.-])((?:{_SECRET_KEYS})\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+)", re.IGNORECASE
)
"""A secret as libpq's ``key=value`` (bare, or quoted with backslash escapes) or as a URL query
parameter: the value runs to the next space (or the closing quote), ``&``s included, so that
nothing of a password that holds one is left behind."""
_USERINFO = re.compile(r"([a-z][a-z0-9+.-]*://[^\s/?#@:'\"]*:)[^\s/?#]*@", re.IGNORECASE)
"""``scheme://user:password@``: everything to the last ``@`` before the host (a password may
hold an ``@`` where the URL parser takes the last one)."""


def redact_url(text: str) -> str:
    """``text`` (a store URL, an endpoint, or a message quoting either) with every secret in
    it replaced by ``***``: libpq's ``password=`` (and ``sslpassword=``), a URL's ``user:pw@``,
    and query parameters such as ``?password=`` or ``?token=``. What it points at (scheme,
    user, host, port, database, path) stays readable. Use it wherever a store or an endpoint is
    shown: messages, logs, pages."""
    return _SECRET_VALUE.sub(r"\1***", _USERINFO.sub(r"\1***@", text))


redact = redact_url
"""The older name, kept for the store's modules that use it."""


def store_exists(home: str | os.PathLike[str]) -> bool:
    """Whether the selected store of ``home`` has been created: a local file must exist; a
    lake is created by whoever attaches it first, so it always counts as there."""
    where = store_location(home)
    return isinstance(where, Lake) or where.path.exists()
