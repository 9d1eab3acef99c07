"""The store's SQL as DuckLake takes it: the same tables and projections, without keys.

DuckLake has no PRIMARY KEY, UNIQUE or index, so ``INSERT OR REPLACE`` cannot run there. This
module derives the lake's statements from ``sql`` instead of restating them: key constraints
are dropped from the DDL, and each ``INSERT OR REPLACE INTO t SELECT ...`` becomes the rows
staged once, the stored rows with their key deleted, and the staged rows inserted (the key is
the table's first column, as in ``sql``). Exactly-once by event id is the anti-join of
``sql.STAGE_CAREFUL``, made safe by ``SERIALISE``: every commit updates the one row of
``lake_commits``, and DuckLake fails the second of two transactions that both deleted from a
table, so concurrent commits are serialised by the conflict and retried (``commits``).
Spool offsets carry the host and spool folder they belong to, so that many hosts' projectors
share one lake. Nothing here touches a database.
"""

from __future__ import annotations

import re

from analytics.store.sql import BASE_DDL, PROJECTION_DDL

_KEY_CLAUSE = re.compile(r",\s*PRIMARY KEY \([^)]*\)")
_KEY_COLUMN = re.compile(r" PRIMARY KEY")


def without_keys(ddl: str) -> str:
    """``ddl`` with every PRIMARY KEY (column or table constraint) removed."""
    return _KEY_COLUMN.sub("", _KEY_CLAUSE.sub("", ddl))


LAKE_OFFSETS_DDL = """
CREATE TABLE IF NOT EXISTS spool_offsets (
    source VARCHAR NOT NULL, byte_offset BIGINT NOT NULL, lines BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL, inode UBIGINT, tail_sha256 VARCHAR,
    host VARCHAR NOT NULL, spool VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS lake_commits (n BIGINT NOT NULL);
"""
"""On a lake an offset belongs to (host, spool folder, file): projectors of many hosts share
the table. ``lake_commits`` holds the one row every commit updates (``SERIALISE``)."""

_LOCAL_OFFSETS = re.compile(r"CREATE TABLE IF NOT EXISTS spool_offsets \(.*?\);\n", re.DOTALL)
LAKE_BASE_DDL = _LOCAL_OFFSETS.sub("", without_keys(BASE_DDL)) + LAKE_OFFSETS_DDL
LAKE_PROJECTION_DDL = without_keys(PROJECTION_DDL)
LAKE_FIRST_ROWS = "INSERT INTO lake_commits SELECT 0 WHERE NOT EXISTS (FROM lake_commits)"

SERIALISE = "UPDATE lake_commits SET n = n + 1"
"""First in every lake commit: two commits at once both delete from ``lake_commits``, and
DuckLake fails the second at COMMIT (a conflict the committer retries)."""

LAKE_OFFSETS = (
    """DELETE FROM spool_offsets USING incoming_offsets i
      WHERE spool_offsets.host = i.host AND spool_offsets.spool = i.spool
      AND spool_offsets.source = i.source""",
    "INSERT INTO spool_offsets BY NAME SELECT * FROM incoming_offsets",
)

_UPSERT = re.compile(r"\s*INSERT OR REPLACE INTO (\w+) (SELECT\b.*)", re.DOTALL)


def lake_statement(stmt: str) -> tuple[str, ...]:
    """``stmt`` as the lake runs it: an ``INSERT OR REPLACE`` replaced by staging, delete by
    key (the first column) and insert; any other statement as it is."""
    found = _UPSERT.fullmatch(stmt)
    if found is None:
        return (stmt,)
    table, select = found.groups()
    return (
        f"CREATE OR REPLACE TEMP TABLE upsert_rows AS {select}",
        f"DELETE FROM {table} WHERE {_first_column(table)} IN (SELECT #1 FROM upsert_rows)",
        f"INSERT INTO {table} SELECT * FROM upsert_rows",
        "DROP TABLE upsert_rows",
    )


def lake_statements(stmts: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(part for stmt in stmts for part in lake_statement(stmt))


def _first_column(table: str) -> str:
    found = re.search(rf"CREATE TABLE IF NOT EXISTS {table} \(\s*(\w+)", BASE_DDL + PROJECTION_DDL)
    if found is None:
        raise ValueError(f"no table {table!r} in the store's DDL")
    return found.group(1)
