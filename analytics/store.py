"""The DuckDB event store: schema, connection ownership, batch commits and projections.

The only module that imports duckdb. One process owns the database file read-write (the
projector, run by the CLI or the app); everything else reads through ``queries``. A batch of
events, its quarantined lines and the new spool offsets are committed in ONE transaction, so a
crash loses nothing and duplicates nothing. Projections are pure SQL functions of the events,
applied to each new batch, so ``rebuild`` (all events as one batch) yields identical tables.
It does not read spool files (``projector`` does) and it never writes events of its own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from analytics.errors import (
    StoreCorruptError,
    StoreError,
    StoreIncompleteError,
    StoreLockedError,
    StoreUnwritableError,
    StoreVersionError,
)
from analytics.store_batch import EventBatch, QuarantinedLine
from analytics.store_files import (
    REBUILD,
    OwnerLock,
    claim_parent,
    disk_full,
    foreign_lock_pid,
    locked,
    read_header,
    unwritable,
    unwritable_reason,
)
from analytics.store_sql import (
    BASE_DDL,
    PROJECT_SQL,
    PROJECTION_DDL,
    STAGE_CAREFUL,
    STAGE_OPTIMISTIC,
)
from analytics.store_sql import PROJECTIONS as PROJECTIONS
from analytics.store_sql import TABLES as TABLES

__all__ = [
    "DB_NAME",
    "PROJECTIONS",
    "STORE_SCHEMA_VERSION",
    "TABLES",
    "EventBatch",
    "EventStore",
    "QuarantinedLine",
    "StoreCorruptError",
    "StoreError",
    "StoreIncompleteError",
    "StoreLockedError",
    "StoreUnwritableError",
    "StoreVersionError",
    "claim_parent",
    "storage_version",
]

STORE_SCHEMA_VERSION = 2
DB_NAME = "compactlens.duckdb"
CHECKPOINT_THRESHOLD = "1GB"
"""How large the write-ahead log may grow before DuckDB checkpoints on its own; the projector
checkpoints explicitly after each ingest instead."""


class EventStore:
    """The DuckDB file under a compactlens home, owned by one process at a time.

    Opening tells the states of a bad file apart by what they are: the owner lock file (or
    DuckDB's own lock, held by another program) -> ``StoreLockedError``; the file system ->
    ``StoreUnwritableError``; the file's header -> ``StoreCorruptError`` (no DuckDB file, or a
    damaged one) or ``StoreVersionError`` (another storage version); the meta table ->
    ``StoreIncompleteError`` (its completion row, written last in the creating transaction, is
    missing) or ``StoreVersionError`` (another store schema)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        owner_lock: OwnerLock | None = None,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise StoreError(
                f"{self.path} does not exist yet: run `compactlens ingest` first", str(self.path)
            )
        if not read_only:
            claim_parent(self.path)
        self._lock = owner_lock or OwnerLock(self.path, exclusive=not read_only)
        try:
            self.con = self._connect()
            try:
                self._check_or_create()
                if not read_only:
                    self.con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
            except BaseException:
                self.con.close()
                raise
        except BaseException:
            self._lock.release()
            raise

    @classmethod
    def for_home(cls, home: str | os.PathLike[str], *, read_only: bool = False) -> EventStore:
        return cls(Path(home) / DB_NAME, read_only=read_only)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(self.path), read_only=self.read_only)
        except duckdb.Error as exc:
            raise self._diagnose(exc) from exc

    def _diagnose(self, exc: duckdb.Error) -> StoreError:
        """What the file is, when DuckDB could not open it (its message is only quoted)."""
        path = self.path
        pid = foreign_lock_pid(path)
        if pid is not None:
            return locked(path, pid, "another program")
        reason = unwritable_reason(path) if not self.read_only else None
        if reason is not None:
            return unwritable(path, reason)
        header = read_header(path)
        if header is None:
            return StoreCorruptError(
                f"{path} is not a DuckDB database file (no DuckDB header). {REBUILD}", str(path)
            )
        ours = storage_version()
        if header.storage_version != ours:
            return StoreVersionError(
                f"{path} has DuckDB storage version {header.storage_version} (written by DuckDB "
                f"{header.library or 'unknown'}); this DuckDB {duckdb.__version__} reads and "
                f"writes version {ours}. {REBUILD}",
                str(path),
            )
        return self._damaged(exc)

    def _damaged(self, exc: duckdb.Error) -> StoreError:
        """A DuckDB I/O failure on a file we could open: a full or read-only disk, or damage."""
        reason = None if self.read_only else unwritable_reason(self.path) or disk_full(self.path)
        if reason is not None:
            return unwritable(self.path, reason)
        return StoreCorruptError(
            f"{self.path} is damaged ({_first_line(exc)}). {REBUILD}", str(self.path)
        )

    def _failure(self, exc: duckdb.Error, doing: str) -> StoreError:
        if isinstance(exc, duckdb.IOException):
            return self._damaged(exc)
        return StoreError(
            f"{doing} on {self.path} failed ({_first_line(exc)}); nothing was committed and the "
            "spool is untouched: fix the cause and try again",
            str(self.path),
        )

    def _check_or_create(self) -> None:
        try:
            tables = {
                str(r[0])
                for r in self.con.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
                ).fetchall()
            }
            if not tables and not self.read_only:
                self._create()
                return
            row = (
                self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if "meta" in tables
                else None
            )
        except duckdb.Error as exc:
            raise self._failure(exc, "reading the catalog") from exc
        if row is None:
            raise StoreIncompleteError(
                f"{self.path} was never completely created (its meta table has no schema_version "
                "row, written last when a store is created: the first import was killed, or it is "
                f"not a compactlens store). {REBUILD}",
                str(self.path),
            )
        if str(row[0]) != str(STORE_SCHEMA_VERSION):
            raise StoreVersionError(
                f"{self.path} has store schema {row[0]}, this compactlens uses "
                f"{STORE_SCHEMA_VERSION}. {REBUILD}",
                str(self.path),
            )

    def _create(self) -> None:
        """Every table and the meta rows in ONE transaction, schema_version written last: a
        kill during creation leaves an empty file (created again on the next open), never a
        half-made store."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.execute(BASE_DDL + PROJECTION_DDL)
            self._set_meta()
            self.con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            raise

    def _set_meta(self) -> None:
        from importlib import metadata

        try:
            lib = metadata.version("compactlens")
        except metadata.PackageNotFoundError:
            lib = "0+unknown"
        rows = [
            ("engine", "duckdb"),
            ("engine_version", duckdb.__version__),
            ("library_version", lib),
            ("created_at", dt.datetime.now(dt.UTC).isoformat()),
            ("schema_version", str(STORE_SCHEMA_VERSION)),  # last: marks creation complete
        ]
        for row in rows:
            self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", row)

    def _scalar(self, sql: str) -> int:
        row = self.con.execute(sql).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            self._lock.release()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    def offsets(self) -> dict[str, tuple[int, int]]:
        rows = self.con.execute("SELECT source, byte_offset, lines FROM spool_offsets").fetchall()
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    def commit_batch(
        self,
        events: EventBatch,
        quarantined: Sequence[QuarantinedLine],
        offsets: dict[str, tuple[int, int]],
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
            try:
                return self._commit(incoming, quarantined, offsets, optimistic=optimistic)
            except duckdb.ConstraintException:
                if not optimistic:
                    raise
            return self._commit(incoming, quarantined, offsets, optimistic=False)
        except duckdb.Error as exc:
            raise self._failure(exc, "writing a batch") from exc

    def _commit(
        self,
        incoming: pa.Table,
        quarantined: Sequence[QuarantinedLine],
        offsets: dict[str, tuple[int, int]],
        *,
        optimistic: bool,
    ) -> int:
        """The whole transaction as two calls into DuckDB. Each call releases the GIL, and
        getting it back waits for the projector's parse thread to yield it (up to Python's
        switch interval), so one call per statement cost about a tenth of a bulk ingest."""
        now = dt.datetime.now(dt.UTC)
        self.con.register("incoming", incoming)
        self.con.register("incoming_offsets", _offsets_table(offsets, now))
        self.con.register("incoming_quarantine", _quarantine_table(quarantined, now))
        try:
            row = self.con.execute(
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
            self.con.execute("DROP TABLE batch;\nCOMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            raise
        finally:
            for name in ("incoming", "incoming_offsets", "incoming_quarantine"):
                with contextlib.suppress(duckdb.Error):
                    self.con.unregister(name)
        return int(row[0]) if row else 0

    def _project(self) -> None:
        self.con.execute(";\n".join(PROJECT_SQL))

    @contextlib.contextmanager
    def one_thread(self) -> Iterator[None]:
        """DuckDB on one thread for a run of batch commits: beside the projector's parse
        thread on a small or shared machine, more threads cost more CPU than they save."""
        row = self.con.execute("SELECT current_setting('threads')").fetchone()
        self.con.execute("SET threads = 1")
        try:
            yield
        finally:
            with contextlib.suppress(duckdb.Error):
                self.con.execute(f"SET threads = {int(row[0]) if row else os.cpu_count() or 1}")

    def checkpoint(self) -> None:
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error as exc:
            raise self._failure(exc, "checkpoint") from exc

    def rebuild_projections(self) -> None:
        """Drop every projection and recompute it from the events table."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            for name in PROJECTIONS:
                self.con.execute(f"DROP TABLE IF EXISTS {name}")
            self.con.execute(PROJECTION_DDL)
            self.con.execute("CREATE OR REPLACE TEMP TABLE batch AS SELECT * FROM events")
            self._project()
            self.con.execute("DROP TABLE batch")
            self.con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------ reading

    def query(self, sql: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        try:
            return self.con.execute(sql, params or []).pl()
        except duckdb.Error as exc:
            raise self._failure(exc, "query") from exc

    def table(self, name: str, *, order_by: str | None = None) -> pl.DataFrame:
        if name not in TABLES:
            raise StoreError(f"unknown table {name!r}; tables: {', '.join(TABLES)}", str(self.path))
        order = f" ORDER BY {order_by}" if order_by else ""
        return self.con.execute(f"SELECT * FROM {name}{order}").pl()

    def counts(self) -> dict[str, int]:
        return {t: self._scalar(f"SELECT count(*) FROM {t}") for t in TABLES}

    def meta(self) -> dict[str, str]:
        return dict(self.con.execute("SELECT key, value FROM meta").fetchall())

    def export_parquet(self, out_dir: str | os.PathLike[str]) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name in TABLES:
            target = out / f"{name}.parquet"
            try:
                self.con.execute(f"COPY {name} TO '{_sql_str(str(target))}' (FORMAT parquet)")
            except duckdb.Error as exc:
                raise StoreError(
                    f"could not write {target}: {_first_line(exc)}", str(target)
                ) from exc
            written.append(target)
        return written


def _offsets_table(offsets: dict[str, tuple[int, int]], now: dt.datetime) -> pa.Table:
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


@functools.cache
def storage_version() -> int:
    """The storage version this DuckDB writes, read from the header of a scratch database."""
    with tempfile.TemporaryDirectory(prefix="compactlens-") as tmp:
        scratch = Path(tmp) / "scratch.duckdb"
        duckdb.connect(str(scratch)).close()
        header = read_header(scratch)
    return header.storage_version if header else -1


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _sql_str(value: str) -> str:
    return value.replace("'", "''")
