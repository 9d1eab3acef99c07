"""The DuckDB event store: one database file under a home, owned by one process at a time.

One process owns the file read-write (the projector, run by the CLI or the app); everything
else reads through ``analytics.queries``. ``EventStore`` opens the file and tells a bad one
apart (``diagnosis``), creates or checks the schema (``schema``), commits batches (``commits``)
and exports (``export``). It does not read spool files (``projector`` does) and never writes
events of its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from analytics.errors import StoreError
from analytics.store.batch import EventBatch, QuarantinedLine, SpoolPosition
from analytics.store.commits import Committed, commit, reproject, this_host
from analytics.store.diagnosis import diagnose, failure
from analytics.store.export import export_parquet
from analytics.store.files import (
    PRIVATE_UMASK,
    OwnerLock,
    claim_parent,
    make_private,
    private_files,
)
from analytics.store.schema import (
    check_schema,
    create_schema,
    main_tables,
    schema_row,
)
from analytics.store.sql import TABLES

POSITIONS_SQL = "SELECT source, byte_offset, lines, inode, tail_sha256 FROM spool_offsets"
"""Each spool file's committed position and the fingerprint there."""
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
        host: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.host = host or this_host()
        """Who reads the spool: quarantined lines are keyed by it (as on a lake)."""
        if read_only and not self.path.exists():
            raise StoreError(
                f"{self.path} does not exist yet: run `compactlens ingest` first", str(self.path)
            )
        self._private = not read_only
        if self._private:  # what DuckDB creates from now on is 0600 (see files.private_files)
            PRIVATE_UMASK.acquire()
        try:
            if not read_only:
                claim_parent(self.path)
            self._lock = owner_lock or OwnerLock(self.path, exclusive=not read_only)
            self._open()
        except BaseException:
            if self._private:
                PRIVATE_UMASK.release()
            raise

    def _open(self) -> None:
        try:
            self.con = self._connect()
            try:
                self._check_or_create()
                if not self.read_only:
                    make_private(self.path, self.path.with_name(self.path.name + ".wal"))
                    self.con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
            except BaseException:
                self.con.close()
                raise
        except BaseException:
            self._lock.release()
            raise

    def location(self) -> str:
        """Where the store is, for messages: the database file, or the lake's URL."""
        return str(self.path)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(self.path), read_only=self.read_only)
        except duckdb.Error as exc:
            raise diagnose(self.path, exc, read_only=self.read_only) from exc

    def _failure(self, exc: duckdb.Error, doing: str) -> StoreError:
        return failure(self.path, exc, doing, read_only=self.read_only)

    def failure(self, exc: duckdb.Error, doing: str) -> StoreError:
        """The ``StoreError`` for a statement that failed while ``doing`` something."""
        return self._failure(exc, doing)

    def _check_or_create(self) -> None:
        try:
            tables = main_tables(self.con)
            if not tables and not self.read_only:
                create_schema(self.con)
                return
            version = schema_row(self.con, tables)
        except duckdb.Error as exc:
            raise self._failure(exc, "reading the catalog") from exc
        check_schema(self.path, version)

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            self._lock.release()
            if self._private:
                self._private = False
                PRIVATE_UMASK.release()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    def offsets(self, spool: str | os.PathLike[str] | None = None) -> dict[str, tuple[int, int]]:
        """Spool file name (as stored) -> (byte offset, complete lines) read so far."""
        return {s: (p.byte_offset, p.lines) for s, p in self.positions(spool).items()}

    def positions(self, spool: str | os.PathLike[str] | None = None) -> dict[str, SpoolPosition]:
        """Spool file name (as stored) -> how far it was read, with the fingerprint there. The
        local file serves one spool, so ``spool`` (which one, on a lake) is not needed here."""
        return self._positions(POSITIONS_SQL, [])

    def _positions(self, sql: str, params: list[str]) -> dict[str, SpoolPosition]:
        try:
            rows = self.con.execute(sql, params).fetchall()
        except duckdb.Error as exc:
            raise self._failure(exc, "reading the spool offsets") from exc
        return {r[0]: SpoolPosition(int(r[1]), int(r[2]), r[3], r[4]) for r in rows}

    def commit_batch(
        self,
        events: EventBatch,
        quarantined: Sequence[QuarantinedLine],
        positions: dict[str, SpoolPosition],
        *,
        spool: str | os.PathLike[str] | None = None,
    ) -> Committed:
        """Commit one batch (``commits.commit``): events, new quarantined lines, positions
        (of files in ``spool``, the folder that a lake keys them by)."""
        try:
            return commit(self.con, events, quarantined, positions, host=self.host)
        except duckdb.Error as exc:
            raise self._failure(exc, "writing a batch") from exc

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
        reproject(self.con)

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
        out = {}
        for name in TABLES:
            row = self.con.execute(f"SELECT count(*) FROM {name}").fetchone()
            out[name] = int(row[0]) if row else 0
        return out

    def meta(self) -> dict[str, str]:
        return dict(self.con.execute("SELECT key, value FROM meta").fetchall())

    def export_parquet(self, out_dir: str | os.PathLike[str]) -> list[Path]:
        """Every table as Parquet in ``out_dir`` (files 0600, a new folder 0700)."""
        with private_files():
            return export_parquet(self.con, Path(out_dir))
