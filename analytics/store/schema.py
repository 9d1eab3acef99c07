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
from analytics.store.lake_sql import LAKE_BASE_DDL, LAKE_FIRST_ROWS, LAKE_PROJECTION_DDL
from analytics.store.sql import BASE_DDL, PROJECTION_DDL

STORE_SCHEMA_VERSION = 8
"""3: spool offsets carry a fingerprint, quarantined lines a key, deletions their own table.
4: compactions carry their origin and harness. 5: a quarantined line's key includes the host
that read it (several hosts write one lake; their spool files may share names). 6: usage rows
carry the turn they report on (``turns.turn``; before, the history length, now
``history_messages``); sessions carry ``history_missing_tokens``. 7: compactions carry their
estimator as numbers (``estimator_slope``, ``estimator_overhead``), older records' read back from
the estimator's name as they are projected; and where ``tokens_after`` comes from
(``tokens_after_source``: Claude Code's ``postTokens``, or estimated). 8: messages carry their
``revision`` (a followed transcript's last message amended as its harness wrote more of it)."""
DB_NAME = "compactlens.duckdb"


def main_tables(con: duckdb.DuckDBPyConnection, catalog: str | None = None) -> set[str]:
    """The tables of the store (of ``catalog``, when several databases are attached)."""
    where = "table_schema = 'main'" + (" AND table_catalog = ?" if catalog else "")
    rows = con.execute(
        f"SELECT table_name FROM information_schema.tables WHERE {where}",
        [catalog] if catalog else [],
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


def create_schema(con: duckdb.DuckDBPyConnection, *, lake: bool = False) -> None:
    """Every table and the meta rows in one transaction, schema_version last (a lake's
    tables without keys, see ``lake_sql``)."""
    con.execute("BEGIN TRANSACTION")
    try:
        if lake:
            con.execute(LAKE_BASE_DDL + LAKE_PROJECTION_DDL + ";" + LAKE_FIRST_ROWS)
        else:
            con.execute(BASE_DDL + PROJECTION_DDL)
        for row in _meta_rows("ducklake" if lake else "duckdb"):
            con.execute(f"INSERT {'' if lake else 'OR REPLACE '}INTO meta VALUES (?, ?)", row)
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def _meta_rows(engine: str) -> list[tuple[str, str]]:
    from importlib import metadata

    try:
        lib = metadata.version("compactlens")
    except metadata.PackageNotFoundError:
        lib = "0+unknown"
    return [
        ("engine", engine),
        ("engine_version", duckdb.__version__),
        ("library_version", lib),
        ("created_at", dt.datetime.now(dt.UTC).isoformat()),
        ("schema_version", str(STORE_SCHEMA_VERSION)),  # last: marks creation complete
    ]
