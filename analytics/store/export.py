"""Exporting the store's tables as files other tools read (Parquet today).

One file per table, written by DuckDB's ``COPY``; a table that cannot be written is a
``StoreError`` naming the file. It never changes the database.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from analytics.errors import StoreError
from analytics.store.diagnosis import first_line
from analytics.store.sql import TABLES


def export_parquet(con: duckdb.DuckDBPyConnection, out: Path) -> list[Path]:
    """Every table as ``<out>/<table>.parquet``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in TABLES:
        target = out / f"{name}.parquet"
        try:
            con.execute(f"COPY {name} TO '{_sql_str(str(target))}' (FORMAT parquet)")
        except duckdb.Error as exc:
            raise StoreError(f"could not write {target}: {first_line(exc)}", str(target)) from exc
        written.append(target)
    return written


def _sql_str(value: str) -> str:
    return value.replace("'", "''")
