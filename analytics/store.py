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
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from analytics.errors import AnalyticsError
from analytics.store_sql import BASE_DDL, PROJECT_SQL, PROJECTION_DDL
from analytics.store_sql import PROJECTIONS as PROJECTIONS
from analytics.store_sql import TABLES as TABLES

STORE_SCHEMA_VERSION = 1
DB_NAME = "compactlens.duckdb"
CHECKPOINT_THRESHOLD = "1GB"
"""How large the write-ahead log may grow before DuckDB checkpoints on its own; the projector
checkpoints explicitly after each ingest instead."""


class StoreError(AnalyticsError):
    """The event store could not be opened or written; the spool is untouched."""


class StoreLockedError(StoreError):
    """Another process holds the database (DuckDB allows one writer per file)."""


class StoreVersionError(StoreError):
    """The database was written by another schema or engine version, or is unreadable."""


@dataclass
class EventBatch:
    """Validated spool lines, column by column (cheap to append, cheap to hand to Arrow)."""

    event_id: list[str] = field(default_factory=list)
    type: list[str] = field(default_factory=list)
    schema_version: list[int] = field(default_factory=list)
    session_id: list[str] = field(default_factory=list)
    seq: list[int] = field(default_factory=list)
    occurred_at: list[dt.datetime] = field(default_factory=list)
    payload: list[str] = field(default_factory=list)
    """Each event's payload as JSON text (the upcast form when it came from an older schema)."""
    source: list[str] = field(default_factory=list)
    line: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.event_id)

    def to_arrow(self) -> pa.Table:
        return pa.table(
            {name: getattr(self, name) for name in _INCOMING_SCHEMA.names}, schema=_INCOMING_SCHEMA
        )


@dataclass(frozen=True)
class QuarantinedLine:
    source: str
    line: int
    reason: str
    raw: str


_INCOMING_SCHEMA = pa.schema(
    [
        ("event_id", pa.string()),
        ("type", pa.string()),
        ("schema_version", pa.int32()),
        ("session_id", pa.string()),
        ("seq", pa.int64()),
        ("occurred_at", pa.timestamp("us", tz="UTC")),
        ("payload", pa.string()),
        ("source", pa.string()),
        ("line", pa.int64()),
    ]
)


def _classify(exc: duckdb.Error, path: Path) -> StoreError:
    text = str(exc)
    if "lock" in text.lower():
        pid = re.search(r"PID (\d+)", text)
        holder = f" (held by PID {pid.group(1)})" if pid else ""
        return StoreLockedError(
            f"{path} is open in another process{holder}: DuckDB allows one writer per file. "
            "Stop that process (e.g. the app or a running `compactlens ingest --watch`) and "
            "try again; nothing is lost, the events wait in the spool."
        )
    return StoreVersionError(
        f"{path} cannot be opened ({text.splitlines()[0]}). It may be corrupt or written by "
        "another DuckDB version. Run `compactlens rebuild` to recreate it from the spool "
        "(the old file is kept beside it as a backup)."
    )


class EventStore:
    """The DuckDB file under a compactlens home, owned by one process at a time."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise StoreError(f"{self.path} does not exist yet: run `compactlens ingest` first")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as exc:
            raise _classify(exc, self.path) from exc
        try:
            self._check_or_create()
            if not read_only:
                self.con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
        except BaseException:
            self.con.close()
            raise

    @classmethod
    def for_home(cls, home: str | os.PathLike[str], *, read_only: bool = False) -> EventStore:
        return cls(Path(home) / DB_NAME, read_only=read_only)

    def _check_or_create(self) -> None:
        try:
            has_meta = bool(
                self._scalar(
                    "SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'"
                )
            )
            if has_meta:
                row = self.con.execute(
                    "SELECT value FROM meta WHERE key = 'schema_version'"
                ).fetchone()
                found = int(row[0]) if row else -1
                if found != STORE_SCHEMA_VERSION:
                    raise StoreVersionError(
                        f"{self.path} has store schema {found}, this compactlens uses "
                        f"{STORE_SCHEMA_VERSION}: run `compactlens rebuild` to recreate it "
                        "from the spool"
                    )
                return
            if self.read_only:
                raise StoreError(f"{self.path} is not a compactlens store (no meta table)")
            self.con.execute(BASE_DDL + PROJECTION_DDL)
            self._set_meta()
        except duckdb.Error as exc:
            raise _classify(exc, self.path) from exc

    def _set_meta(self) -> None:
        from importlib import metadata

        try:
            lib = metadata.version("compactlens")
        except metadata.PackageNotFoundError:
            lib = "0+unknown"
        rows = [
            ("schema_version", str(STORE_SCHEMA_VERSION)),
            ("engine", "duckdb"),
            ("engine_version", duckdb.__version__),
            ("library_version", lib),
            ("created_at", dt.datetime.now(dt.UTC).isoformat()),
        ]
        self.con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", rows)

    def _scalar(self, sql: str) -> int:
        row = self.con.execute(sql).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.con.close()

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
        """Insert new events (duplicates by event_id are skipped), quarantine lines, advance
        offsets and project, all in one transaction. Returns how many events were new."""
        incoming = events.to_arrow()
        now = dt.datetime.now(dt.UTC)
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.register("incoming", incoming)
            new = self._insert_events(incoming.num_rows)
            if quarantined:
                self.con.executemany(
                    "INSERT INTO quarantine VALUES (?, ?, ?, ?, ?)",
                    [(q.source, q.line, q.reason, q.raw, now) for q in quarantined],
                )
            self.con.executemany(
                "INSERT OR REPLACE INTO spool_offsets VALUES (?, ?, ?, ?)",
                [(src, off, lines, now) for src, (off, lines) in offsets.items()],
            )
            self._project()
            self.con.execute("DROP TABLE batch")
            self.con.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise StoreError(
                    f"writing to {self.path} failed ({_first_line(exc)}); nothing of this batch "
                    "was committed and the spool is untouched: fix the cause and ingest again"
                ) from exc
            raise
        finally:
            for name in ("incoming", "inserted"):
                with contextlib.suppress(duckdb.Error):
                    self.con.unregister(name)
        return new

    def _insert_events(self, n_incoming: int) -> int:
        """Insert ``incoming`` into events (duplicates skipped by the primary key) and leave
        exactly the new ones in the temp table ``batch`` for the projections."""
        self.con.execute("CREATE OR REPLACE TEMP TABLE batch AS SELECT * FROM incoming")
        inserted = (
            self.con.execute("INSERT OR IGNORE INTO events SELECT * FROM batch RETURNING event_id")
            .arrow()
            .read_all()
        )
        if inserted.num_rows < n_incoming:  # replayed or repeated lines: keep only the new
            self.con.register("inserted", inserted)
            self.con.execute("""CREATE OR REPLACE TEMP TABLE batch AS
                SELECT * FROM batch SEMI JOIN inserted USING (event_id)
                QUALIFY row_number() OVER (PARTITION BY event_id ORDER BY source, line) = 1""")
        return int(inserted.num_rows)

    def _project(self) -> None:
        for sql in PROJECT_SQL:
            self.con.execute(sql)

    def checkpoint(self) -> None:
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error as exc:
            raise StoreError(f"checkpoint of {self.path} failed: {_first_line(exc)}") from exc

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
            raise StoreError(f"query on {self.path} failed: {_first_line(exc)}") from exc

    def table(self, name: str, *, order_by: str | None = None) -> pl.DataFrame:
        if name not in TABLES:
            raise StoreError(f"unknown table {name!r}; tables: {', '.join(TABLES)}")
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
                raise StoreError(f"could not write {target}: {_first_line(exc)}") from exc
            written.append(target)
        return written


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _sql_str(value: str) -> str:
    return value.replace("'", "''")
