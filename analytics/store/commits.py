"""Writing to the store: one batch of events, its quarantined lines and offsets per transaction.

A batch's new events, the lines quarantined while reading it (a line stored before, by the host
that read it, its source, byte offset and hash, is not stored again) and the spool positions
after it are committed in ONE transaction, and the projections are applied to that batch inside
it, so a crash loses nothing and duplicates nothing. ``reproject`` recomputes every projection
from the events table. On a lake (``lake=True``) the same transaction runs as ``lake_sql``
rewrites it, serialised with every other commit to the lake and retried when DuckLake reports a
conflict. The functions take an open connection; errors are the caller's to diagnose.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import duckdb
import pyarrow as pa

from analytics.store.batch import EventBatch, QuarantinedLine, SpoolPosition
from analytics.store.lake_sql import (
    LAKE_OFFSETS,
    LAKE_PROJECTION_DDL,
    SERIALISE,
    lake_statements,
)
from analytics.store.sql import (
    EVENT_SOURCES,
    PROJECT_SQL,
    PROJECTION_DDL,
    PROJECTIONS,
    STAGE_CAREFUL,
    STAGE_OPTIMISTIC,
    project_sql,
)

T = TypeVar("T")
Positions = dict[str, SpoolPosition]
"""Spool file name (as stored) -> how far it has been read, with the fingerprint there."""

CONFLICT_RETRIES = 200
"""How often a lake transaction that lost a conflict is tried again before its error is
raised."""
CONFLICT_WAIT_S = 0.005
"""The first wait after a lost conflict; it doubles (with jitter) up to ``CONFLICT_MAX_WAIT_S``."""
CONFLICT_MAX_WAIT_S = 0.25


def this_host() -> str:
    """The host name a store keys this process's offsets (on a lake) and quarantined lines by."""
    return socket.gethostname() or "localhost"


@dataclass(frozen=True)
class Origin:
    """Whose spool a lake commit's offsets belong to: the host and its spool folder."""

    host: str
    spool: str


@dataclass(frozen=True)
class Committed:
    """What one commit added."""

    events: int
    """Events new to the store."""
    quarantined: int
    """Quarantined lines not stored before."""


def commit(
    con: duckdb.DuckDBPyConnection,
    events: EventBatch,
    quarantined: Sequence[QuarantinedLine],
    positions: Positions,
    *,
    host: str | None = None,
    origin: Origin | None = None,
) -> Committed:
    """Insert new events (an event_id already stored, or repeated within the batch, is
    skipped), quarantine new lines (under ``host``, default this one), advance positions and
    project, all in one transaction. With an ``origin`` the connection is a lake's (its host
    is the quarantine's): see ``commit_to_lake``."""
    incoming = events.to_arrow()
    kinds = events.kinds()
    if origin is not None:
        return commit_to_lake(con, incoming, kinds, quarantined, positions, origin)
    bad = _Quarantine(quarantined, host or this_host())
    # Optimistic first: a batch of distinct ids usually has none stored yet, so a plain
    # INSERT (the primary key still guards) suffices. A stored id aborts that try; the
    # careful path then runs instead.
    optimistic = len(set(events.event_id)) == len(events)
    try:
        return _transaction(con, incoming, kinds, bad, positions, optimistic=optimistic)
    except duckdb.ConstraintException:
        if not optimistic:
            raise
    return _transaction(con, incoming, kinds, bad, positions, optimistic=False)


@dataclass(frozen=True)
class _Quarantine:
    """A commit's quarantined lines and the host that read them (part of their key)."""

    lines: Sequence[QuarantinedLine]
    host: str


def _transaction(
    con: duckdb.DuckDBPyConnection,
    incoming: pa.Table,
    kinds: frozenset[str],
    quarantined: _Quarantine,
    positions: Positions,
    *,
    optimistic: bool,
    origin: Origin | None = None,
) -> Committed:
    """The whole transaction as two calls into DuckDB. Each call releases the GIL, and
    getting it back waits for the projector's parse thread to yield it (up to Python's
    switch interval), so one call per statement cost about a tenth of a bulk ingest."""
    now = dt.datetime.now(dt.UTC)
    offsets = _offsets_table(positions, now)
    if origin is not None:
        offsets = offsets.append_column("host", pa.array([origin.host] * offsets.num_rows))
        offsets = offsets.append_column("spool", pa.array([origin.spool] * offsets.num_rows))
    con.register("incoming", incoming)
    con.register("incoming_offsets", offsets)
    con.register("incoming_quarantine", _quarantine_table(quarantined, now))
    try:
        row = con.execute(";\n".join(_statements(kinds, optimistic, origin))).fetchone()
        con.execute("DROP TABLE batch;\nDROP TABLE batch_quarantine;\nCOMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    finally:
        for name in ("incoming", "incoming_offsets", "incoming_quarantine"):
            with contextlib.suppress(duckdb.Error):
                con.unregister(name)
    return Committed(int(row[0]), int(row[1])) if row else Committed(0, 0)


def _statements(kinds: frozenset[str], optimistic: bool, origin: Origin | None) -> tuple[str, ...]:
    if origin is not None:  # a lake: serialised, keyless, offsets by (host, spool, file)
        head: tuple[str, ...] = (SERIALISE, STAGE_CAREFUL, EVENT_SOURCES)
        offsets: tuple[str, ...] = LAKE_OFFSETS
        projections = lake_statements(project_sql(kinds))
    else:
        head = (STAGE_OPTIMISTIC,) if optimistic else (STAGE_CAREFUL, EVENT_SOURCES)
        offsets = ("INSERT OR REPLACE INTO spool_offsets BY NAME SELECT * FROM incoming_offsets",)
        projections = project_sql(kinds)
    return (
        "BEGIN TRANSACTION",
        *head,
        "INSERT INTO events SELECT * FROM batch",
        _NEW_QUARANTINE,
        "INSERT INTO quarantine BY NAME SELECT * FROM batch_quarantine",
        *offsets,
        *projections,
        "SELECT (SELECT count(*) FROM batch), (SELECT count(*) FROM batch_quarantine)",
    )


def commit_to_lake(
    con: duckdb.DuckDBPyConnection,
    incoming: pa.Table,
    kinds: frozenset[str],
    quarantined: Sequence[QuarantinedLine],
    positions: Positions,
    origin: Origin,
) -> Committed:
    """The commit on a lake: the anti-join decides what is new, and a commit that lost a
    conflict to another writer is run again whole (it then sees what that writer stored)."""
    bad = _Quarantine(quarantined, origin.host)
    return retry_conflicts(
        lambda: _transaction(con, incoming, kinds, bad, positions, optimistic=False, origin=origin)
    )


def retry_conflicts(attempt: Callable[[], T]) -> T:
    """``attempt()``, run again after it lost a conflict with another writer (``conflicted``),
    with jittered exponential waits; any other error is raised at once."""
    wait = CONFLICT_WAIT_S
    for _ in range(CONFLICT_RETRIES):
        try:
            return attempt()
        except duckdb.Error as exc:
            if not conflicted(exc):
                raise
            time.sleep(wait * (0.5 + random.random()))
            wait = min(wait * 2, CONFLICT_MAX_WAIT_S)
    return attempt()


_POSTGRES_CONFLICTS = re.compile(
    r"could not serialize access|deadlock detected|tuple concurrently (?:updated|deleted)"
    r'|duplicate key value violates unique constraint "(?:pg|ducklake)_'
    r"|Attempting to fetch from an unsuccessful query result"
)
"""What PostgreSQL says when a transaction of the catalog lost to a concurrent one: a
serialization failure (SQLSTATE 40001, e.g. a ``CHECKPOINT`` deleting inlined rows another
commit just changed), a deadlock (40P01), or a row two transactions inserted at once: one of
PostgreSQL's own catalog (``pg_type``/``pg_class``: two creations of one table; DuckLake
creates a table of inlined rows on the first small commit into each table) or one of
DuckLake's (two snapshots of one number, once DuckLake's own retries ran out). DuckDB passes
them on as a plain ``duckdb.Error`` quoting PostgreSQL's message, so the message is all there
is to go by; a ``CHECKPOINT`` that lost one while fetching says only that the fetch failed
(the last alternative), and running it again succeeds as well."""


def conflicted(exc: duckdb.Error) -> bool:
    """Whether ``exc`` is a lost conflict with another writer, which running the whole
    transaction again resolves: DuckLake's own commit conflict (a ``TransactionException``)
    or one of PostgreSQL's (``_POSTGRES_CONFLICTS``)."""
    if isinstance(exc, duckdb.TransactionException):
        return True
    return _POSTGRES_CONFLICTS.search(str(exc)) is not None


_NEW_QUARANTINE = """CREATE OR REPLACE TEMP TABLE batch_quarantine AS
    SELECT * FROM incoming_quarantine
    ANTI JOIN quarantine USING (host, source, byte_offset, raw_sha256)"""
"""The quarantined lines of this commit not stored before (a file read again from the start
brings its bad lines again). The host is part of the key: two hosts' spool files of the same
name with the same bad bytes at the same offset are two lines, as their offsets are two rows."""


def reproject(con: duckdb.DuckDBPyConnection, *, lake: bool = False) -> None:
    """Drop every projection and recompute it from the events table, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        if lake:
            con.execute(SERIALISE)
        for name in PROJECTIONS:
            con.execute(f"DROP TABLE IF EXISTS {name}")
        con.execute(LAKE_PROJECTION_DDL if lake else PROJECTION_DDL)
        con.execute("CREATE OR REPLACE TEMP TABLE batch AS SELECT * FROM events")
        con.execute(";\n".join(lake_statements(PROJECT_SQL) if lake else PROJECT_SQL))
        con.execute("DROP TABLE batch")
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def _offsets_table(positions: Positions, now: dt.datetime) -> pa.Table:
    at = list(positions.values())
    return pa.table(
        {
            "source": pa.array(list(positions), pa.string()),
            "byte_offset": pa.array([p.byte_offset for p in at], pa.int64()),
            "lines": pa.array([p.lines for p in at], pa.int64()),
            "updated_at": pa.array([now] * len(at), pa.timestamp("us", tz="UTC")),
            "inode": pa.array([p.inode for p in at], pa.uint64()),
            "tail_sha256": pa.array([p.tail_sha256 for p in at], pa.string()),
        }
    )


def _quarantine_table(quarantined: _Quarantine, now: dt.datetime) -> pa.Table:
    lines = quarantined.lines
    return pa.table(
        {
            "source": pa.array([q.source for q in lines], pa.string()),
            "line": pa.array([q.line for q in lines], pa.int64()),
            "reason": pa.array([q.reason for q in lines], pa.string()),
            "raw": pa.array([q.raw for q in lines], pa.string()),
            "quarantined_at": pa.array([now] * len(lines), pa.timestamp("us", tz="UTC")),
            "byte_offset": pa.array([q.byte_offset for q in lines], pa.int64()),
            "raw_sha256": pa.array([q.raw_sha256 for q in lines], pa.string()),
            "host": pa.array([quarantined.host] * len(lines), pa.string()),
        }
    )
