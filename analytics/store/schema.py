"""The store's schema on an open connection: created whole in one transaction, or checked.

A new store gets every table and its meta rows in ONE transaction, ``schema_version`` written
last, so a kill during creation leaves an empty file (created again on the next open), never a
half-made store. An existing one must carry that row with this release's schema version.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path

import duckdb

from analytics.errors import StoreIncompleteError, StoreVersionError
from analytics.store.files import REBUILD
from analytics.store.sql import BASE_DDL, PROJECTION_DDL

STORE_SCHEMA_VERSION = 4
"""3: spool offsets carry a fingerprint, quarantined lines a key, deletions their own table."""
DB_NAME = "compactlens.duckdb"


def main_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
    ).fetchall()
    return {str(r[0]) for r in rows}


def schema_row(con: duckdb.DuckDBPyConnection, tables: set[str]) -> str | None:
    if "meta" not in tables:
        return None
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return None if row is None else str(row[0])


def check_schema(path: Path, version: str | None) -> None:
    """Raise unless ``version`` (the meta table's schema_version row) is this release's."""
    if version is None:
        raise StoreIncompleteError(
            f"{path} was never completely created (its meta table has no schema_version "
            "row, written last when a store is created: the first import was killed, or it is "
            f"not a compactlens store). {REBUILD}",
            str(path),
        )
    if version != str(STORE_SCHEMA_VERSION):
        raise StoreVersionError(
            f"{path} has store schema {version}, this compactlens uses "
            f"{STORE_SCHEMA_VERSION}. {REBUILD}",
            str(path),
        )


def create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Every table and the meta rows in one transaction, schema_version last."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(BASE_DDL + PROJECTION_DDL)
        for row in _meta_rows():
            con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", row)
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def _meta_rows() -> list[tuple[str, str]]:
    from importlib import metadata

    try:
        lib = metadata.version("compactlens")
    except metadata.PackageNotFoundError:
        lib = "0+unknown"
    return [
        ("engine", "duckdb"),
        ("engine_version", duckdb.__version__),
        ("library_version", lib),
        ("created_at", dt.datetime.now(dt.UTC).isoformat()),
        ("schema_version", str(STORE_SCHEMA_VERSION)),  # last: marks creation complete
    ]
