"""Writing to the store: one batch of events, its quarantined lines and offsets per transaction.

A batch's new events, the lines quarantined while reading it and the spool offsets after it are
committed in ONE transaction, and the projections are applied to that batch inside it, so a
crash loses nothing and duplicates nothing. ``reproject`` recomputes every projection from the
events table. The functions take an open connection; errors are the caller's to diagnose.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Sequence

import duckdb
import pyarrow as pa

from analytics.store.batch import EventBatch, QuarantinedLine
from analytics.store.sql import (
    PROJECT_SQL,
    PROJECTION_DDL,
    PROJECTIONS,
    STAGE_CAREFUL,
    STAGE_OPTIMISTIC,
)

Offsets = dict[str, tuple[int, int]]
"""Spool file name -> (byte offset, complete lines) read so far."""


def commit(
    con: duckdb.DuckDBPyConnection,
    events: EventBatch,
    quarantined: Sequence[QuarantinedLine],
    offsets: Offsets,
) -> int:
    """Insert new events (an event_id already stored, or repeated within the batch, is
    skipped), quarantine lines, advance offsets and project, all in one transaction.
    Returns how many events were new."""
    incoming = events.to_arrow()
    # Optimistic first: a batch of distinct ids usually has none stored yet, so a plain
    # INSERT (the primary key still guards) suffices. A stored id aborts that try; the
    # careful path then runs instead.
    optimistic = len(set(events.event_id)) == len(events)
    try:
        return _transaction(con, incoming, quarantined, offsets, optimistic=optimistic)
    except duckdb.ConstraintException:
        if not optimistic:
            raise
    return _transaction(con, incoming, quarantined, offsets, optimistic=False)


def _transaction(
    con: duckdb.DuckDBPyConnection,
    incoming: pa.Table,
    quarantined: Sequence[QuarantinedLine],
    offsets: Offsets,
    *,
    optimistic: bool,
) -> int:
    """The whole transaction as two calls into DuckDB. Each call releases the GIL, and
    getting it back waits for the projector's parse thread to yield it (up to Python's
    switch interval), so one call per statement cost about a tenth of a bulk ingest."""
    now = dt.datetime.now(dt.UTC)
    con.register("incoming", incoming)
    con.register("incoming_offsets", _offsets_table(offsets, now))
    con.register("incoming_quarantine", _quarantine_table(quarantined, now))
    try:
        row = con.execute(
            ";\n".join(
                (
                    "BEGIN TRANSACTION",
                    STAGE_OPTIMISTIC if optimistic else STAGE_CAREFUL,
                    "INSERT INTO events SELECT * FROM batch",
                    "INSERT INTO quarantine SELECT * FROM incoming_quarantine",
                    "INSERT OR REPLACE INTO spool_offsets SELECT * FROM incoming_offsets",
                    *PROJECT_SQL,
                    "SELECT count(*) FROM batch",
                )
            )
        ).fetchone()
        con.execute("DROP TABLE batch;\nCOMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    finally:
        for name in ("incoming", "incoming_offsets", "incoming_quarantine"):
            with contextlib.suppress(duckdb.Error):
                con.unregister(name)
    return int(row[0]) if row else 0


def reproject(con: duckdb.DuckDBPyConnection) -> None:
    """Drop every projection and recompute it from the events table, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        for name in PROJECTIONS:
            con.execute(f"DROP TABLE IF EXISTS {name}")
        con.execute(PROJECTION_DDL)
        con.execute("CREATE OR REPLACE TEMP TABLE batch AS SELECT * FROM events")
        con.execute(";\n".join(PROJECT_SQL))
        con.execute("DROP TABLE batch")
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def _offsets_table(offsets: Offsets, now: dt.datetime) -> pa.Table:
    return pa.table(
        {
            "source": list(offsets),
            "byte_offset": pa.array([off for off, _ in offsets.values()], pa.int64()),
            "lines": pa.array([lines for _, lines in offsets.values()], pa.int64()),
            "updated_at": pa.array([now] * len(offsets), pa.timestamp("us", tz="UTC")),
        }
    )


def _quarantine_table(lines: Sequence[QuarantinedLine], now: dt.datetime) -> pa.Table:
    return pa.table(
        {
            "source": pa.array([q.source for q in lines], pa.string()),
            "line": pa.array([q.line for q in lines], pa.int64()),
            "reason": pa.array([q.reason for q in lines], pa.string()),
            "raw": pa.array([q.raw for q in lines], pa.string()),
            "quarantined_at": pa.array([now] * len(lines), pa.timestamp("us", tz="UTC")),
        }
    )
