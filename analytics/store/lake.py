"""The store as a DuckLake: catalog in PostgreSQL, data as Parquet, many writers and readers.

``LakeStore`` is an ``EventStore`` whose connection is an in-memory DuckDB with the lake
attached and in use, so every table, projection, query and job reads and writes the same names
as on the local file. It holds no owner lock: any number of projectors (one per host and spool)
and readers work at once, every commit serialised by ``lake_sql.SERIALISE`` and retried on a
DuckLake conflict (``commits.commit_to_lake``); offsets are keyed by (host, spool folder,
file). Small commits are inlined into the catalog (up to ``INLINE_ROWS`` rows per table) and
``checkpoint`` runs DuckLake's own maintenance (flush inlined rows, merge adjacent files,
expire snapshots, delete old files). The DuckLake and PostgreSQL extensions come from their
PyPI wheels; nothing is downloaded. It does not read spool files (the projector does).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import re
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import duckdb

from analytics.errors import StoreError
from analytics.store.batch import EventBatch, QuarantinedLine, SpoolPosition
from analytics.store.commits import (
    Committed,
    Origin,
    commit,
    reproject,
    retry_conflicts,
    this_host,
)
from analytics.store.diagnosis import first_line
from analytics.store.eventstore import LAKE_OPENER, POSITIONS_SQL, EventStore
from analytics.store.files import PRIVATE_UMASK
from analytics.store.location import Lake, redact
from analytics.store.schema import check_schema, create_schema, main_tables, schema_row

CATALOG = "lake"
"""The name the lake is attached under (and made the default catalog)."""
KEEP_SNAPSHOTS_S = 3600
"""Snapshots younger than this survive maintenance (a reader's snapshot stays readable), and a
file no longer used is deleted once it has waited this long; older snapshots are expired."""
INLINE_ROWS = 1000
"""A commit of at most this many rows into a table keeps them in the catalog (no Parquet file);
``checkpoint`` writes them out together."""
EXTENSIONS = (
    ("duckdb_extension_ducklake", "ducklake"),
    ("duckdb_extension_postgres_scanner", "postgres_scanner"),
)
"""The wheels (package, extension name) that ship the extensions for this DuckDB."""


def extension_file(package: str, name: str) -> Path:
    """The ``.duckdb_extension`` file the wheel ``package`` installed for this DuckDB."""
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        root = None
    wheel = package.replace("_", "-")
    found = (
        root / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
        if root
        else None
    )
    if found is None or not found.is_file():
        raise StoreError(
            f"the DuckDB extension {name!r} for DuckDB {duckdb.__version__} is not installed: "
            f"`pip install '{wheel}=={duckdb.__version__}'` (no download happens at run time)",
            name,
        )
    return Path(str(found))


def load_extensions(con: duckdb.DuckDBPyConnection) -> None:
    for package, name in EXTENSIONS:
        path = extension_file(package, name)
        con.execute(f"INSTALL '{_sql_str(str(path))}'; LOAD {name}")


class LakeStore(EventStore):
    """A DuckLake on PostgreSQL, opened by one of many processes (see the module doc)."""

    def __init__(
        self,
        lake: Lake,
        *,
        read_only: bool = False,
        host: str | None = None,
        keep_snapshots_s: float = KEEP_SNAPSHOTS_S,
    ) -> None:
        self.lake = lake
        self.keep_snapshots_s = keep_snapshots_s
        self.path = lake.data_path
        self.read_only = read_only
        self.host = host or this_host()
        self._private = not read_only
        if self._private:  # the Parquet files are as private as the spool they come from
            PRIVATE_UMASK.acquire()
        try:
            self.con = self._attach()
            try:
                retry_conflicts(self._check_or_create)
            except BaseException:
                self.con.close()
                raise
        except BaseException:
            self._release()
            raise

    def _attach(self) -> duckdb.DuckDBPyConnection:
        made = [] if self.read_only else _missing(self.lake.data_path)
        if not self.read_only:
            try:
                self.lake.data_path.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the lake's data folder {self.lake.data_path}: "
                    f"{exc.strerror or exc}; pass --lake-data DIR on a writable disk",
                    str(self.lake.data_path),
                ) from exc
        # no progress bar: it would go to stdout, into a command's JSON
        con = duckdb.connect()
        try:
            con.execute("SET enable_progress_bar = false")
            load_extensions(con)
            options = [f"DATA_PATH '{_sql_str(str(self.lake.data_path))}/'"]
            options.append(
                "READ_ONLY" if self.read_only else f"DATA_INLINING_ROW_LIMIT {INLINE_ROWS}"
            )
            con.execute(f"ATTACH '{_sql_str(self.lake.url)}' AS {CATALOG} ({', '.join(options)})")
            con.execute(f"USE {CATALOG}")
        except duckdb.Error as exc:
            con.close()
            with contextlib.suppress(OSError):  # made for this attempt: leave no trace
                for folder in made:
                    folder.rmdir()
            said = redact(first_line(exc)).rstrip(".")
            raise StoreError(
                f"cannot open the lake {self.lake}: {said}. {_attach_advice(said)}",
                str(self.lake),
            ) from exc
        except BaseException:
            con.close()
            raise
        return con

    def _check_or_create(self) -> None:
        try:
            tables = main_tables(self.con, CATALOG)
            if not tables and not self.read_only:
                create_schema(self.con, lake=True)
                return
            version = schema_row(self.con, tables)
        except duckdb.TransactionException:
            raise  # another process created it meanwhile: looked at again
        except duckdb.Error as exc:
            raise self._failure(exc, "reading the catalog") from exc
        check_schema(Path(str(self.lake)), version)

    def _release(self) -> None:
        if self._private:
            self._private = False
            PRIVATE_UMASK.release()

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            self._release()

    def _failure(self, exc: duckdb.Error, doing: str) -> StoreError:
        return StoreError(
            f"{doing} on the lake {self.lake} failed ({redact(first_line(exc))}); nothing was "
            "committed and the spool is untouched: fix the cause and try again",
            str(self.lake),
        )

    def location(self) -> str:
        return str(self.lake)

    # ------------------------------------------------------------ writing

    def positions(self, spool: str | os.PathLike[str] | None = None) -> dict[str, SpoolPosition]:
        """This host's offsets in ``spool``; with None, every row (a file name that several
        hosts or folders share appears once: read ``spool_offsets`` to see them all)."""
        if spool is None:
            return self._positions(POSITIONS_SQL, [])
        where = " WHERE host = ? AND spool = ?"
        return self._positions(POSITIONS_SQL + where, [self.host, _spool_key(spool)])

    def commit_batch(
        self,
        events: EventBatch,
        quarantined: Sequence[QuarantinedLine],
        positions: dict[str, SpoolPosition],
        *,
        spool: str | os.PathLike[str] | None = None,
    ) -> Committed:
        origin = Origin(self.host, _spool_key(spool) if spool is not None else "")
        try:
            return commit(self.con, events, quarantined, positions, origin=origin)
        except duckdb.Error as exc:
            raise self._failure(exc, "writing a batch") from exc

    def checkpoint(self) -> None:
        """DuckLake's maintenance: snapshots older than ``keep_snapshots_s`` expired, then
        ``CHECKPOINT`` (inlined rows written out, adjacent small files merged), then the files
        no snapshot uses any more deleted once they have waited ``keep_snapshots_s``. Without
        the expiry and the clean-up, every file a merge replaced would stay on disk for good."""
        older = f"now() - INTERVAL {max(int(self.keep_snapshots_s), 0)} SECOND"
        steps = (
            f"SELECT count(*) FROM ducklake_expire_snapshots('{CATALOG}', older_than => {older})",
            f"CHECKPOINT {CATALOG}",
            f"SELECT count(*) FROM ducklake_cleanup_old_files('{CATALOG}', older_than => {older})",
        )
        try:
            for step in steps:  # each its own transaction: CHECKPOINT cannot run inside one
                retry_conflicts(partial(self._run_step, step))
        except duckdb.Error as exc:
            raise self._failure(exc, "maintenance (CHECKPOINT)") from exc

    def _run_step(self, sql: str) -> None:
        self.con.execute(sql).fetchall()

    def rebuild_projections(self) -> None:
        """Drop every projection and recompute it from the lake's events (every host's)."""
        try:
            retry_conflicts(lambda: reproject(self.con, lake=True))
        except duckdb.Error as exc:
            raise self._failure(exc, "rebuilding the projections") from exc


LAKE_OPENER[0] = lambda lake, read_only: LakeStore(lake, read_only=read_only)


def _spool_key(spool: str | os.PathLike[str]) -> str:
    return str(Path(spool).resolve())


def _sql_str(value: str) -> str:
    return value.replace("'", "''")


def _missing(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, innermost first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


_STORED_DATA_PATH = re.compile(r'existing data path in the catalog "(?P<path>[^"]*)"')


def _attach_advice(said: str) -> str:
    """What to do about a failed ATTACH, from DuckDB's message ``said``."""
    if stored := _STORED_DATA_PATH.search(said):
        where = stored.group("path").rstrip("/") or "/"
        return (
            f"This lake keeps its data in {where}: pass --lake-data {where} (or set "
            "COMPACTLENS_LAKE_DATA), the same folder on every host"
        )
    return (
        "Check that PostgreSQL is running there and that the conninfo (dbname, host, port, "
        "user) is right"
    )
