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
import random
import re
import time
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
    conflicted,
    reproject,
    retry_conflicts,
    this_host,
)
from analytics.store.diagnosis import first_line
from analytics.store.eventstore import POSITIONS_SQL, EventStore
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
ROLLED_BACK = "nothing was changed and the spool is untouched: fix the cause and try again"
BATCH_ROLLED_BACK = (
    "that batch was rolled back (its events wait in the spool): fix the cause and try again"
)
COMPACTION_BUG_RETRIES = 3
COMPACTION_BUG_WAIT_S = 0.5
_COMPACTION_BUG = re.compile(r"DuckLakeCompaction - expected a single output file")
"""DuckLake's merge of adjacent files failing with an INTERNAL error while other hosts commit
(DuckLake issues 525 and 1025; seen on a fresh lake that three hosts ingest into at once). The
merge is all or nothing, so the maintenance is run again, on a new connection, a few times
before it is reported."""
MAINTENANCE_FAILED = (
    "the events stay stored as committed; the maintenance runs again next time (nothing "
    "it would have merged or deleted is lost)"
)
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


def load_extensions(
    con: duckdb.DuckDBPyConnection, extensions: Sequence[tuple[str, str]] = EXTENSIONS
) -> None:
    for package, name in extensions:
        path = extension_file(package, name)
        con.execute(f"INSTALL '{_sql_str(str(path))}'; LOAD {name}")


OPEN_LOCK = 0x636F6D706C616B65
"""The PostgreSQL advisory lock (a bigint, per database: one lake per database) that every
process holds while it opens the lake (``OpeningLock``)."""
OPEN_WAIT_S = 300
"""How long an open waits for another process creating the same lake (PostgreSQL's
``lock_timeout`` on the opening lock) before it gives up and says so."""


class OpeningLock:
    """The lake's opening lock: shared while a process opens a lake that is made, exclusive
    while one makes it. DuckLake creates its catalog tables in PostgreSQL on the first ATTACH,
    and the first writer then creates the store's tables: two processes doing either at once
    collide in PostgreSQL's own catalog (``pg_type_typname_nsp_index``), and a fleet started
    together lost all but one host. Under the lock one makes the lake while the others wait,
    then they open it side by side (shared); a reader never sees a lake half made.

    It is a transaction-level advisory lock in the catalog's database, taken inside a DuckDB
    transaction on a cursor of the store's connection (the extensions are loaded there
    already): the postgres extension resets (``DISCARD ALL``) every pooled connection it gets
    back, which would drop a session-level lock at once. Leaving the ``with`` ends that
    transaction, which releases the lock (so does the process's death). Its methods raise
    ``duckdb.Error``."""

    NAME = "compactlens_opening"

    def __init__(self, con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
        self._con = con
        self._lake = lake
        self._guard: duckdb.DuckDBPyConnection | None = None

    def __enter__(self) -> OpeningLock:
        self._con.execute(
            f"ATTACH '{_sql_str(self._lake.conninfo)}' AS {self.NAME} (TYPE postgres)"
        )
        self._guard = self._con.cursor()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(duckdb.Error):
            if self._guard is not None:
                self._guard.close()  # rolls its transaction back: the lock is released
        with contextlib.suppress(duckdb.Error):
            self._con.execute(f"DETACH {self.NAME}")

    def hold(self, *, shared: bool) -> None:
        """Hold the lock, shared or exclusive (a lock held before is released first: waiting
        for exclusive while holding shared would deadlock with another process doing so)."""
        guard = self._cursor()
        with contextlib.suppress(duckdb.Error):
            guard.execute("ROLLBACK")
        guard.execute("BEGIN TRANSACTION")
        take = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
        lock = f"SET LOCAL lock_timeout = '{OPEN_WAIT_S}s'; SELECT {take}({OPEN_LOCK})"
        guard.execute(f"CALL postgres_execute('{self.NAME}', '{_sql_str(lock)}')")

    def lake_made(self) -> bool:
        """Whether DuckLake's catalog tables exist in the database (a table of that name
        elsewhere on the search path could only make an open take the exclusive lock)."""
        sql = "SELECT (to_regclass('ducklake_metadata') IS NOT NULL)::text AS made"
        row = (
            self._cursor()
            .execute(f"SELECT made FROM postgres_query('{self.NAME}', '{_sql_str(sql)}')")
            .fetchone()
        )
        return row is not None and row[0] == "true"

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        if self._guard is None:
            raise RuntimeError("OpeningLock used outside its with block")
        return self._guard


def open_failure(lake: Lake, exc: duckdb.Error) -> StoreError:
    """The error for a lake that could not be opened: PostgreSQL's (or DuckLake's) reason,
    without any password, and what to do about that reason."""
    said = redact(first_line(exc)).rstrip(".")
    return StoreError(f"cannot open the lake {lake}: {said}. {_attach_advice(said)}", str(lake))


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
            self.con = self._open_lake()
        except BaseException:
            self._release()
            raise

    def _open_lake(self) -> duckdb.DuckDBPyConnection:
        """A new connection with the lake attached, in use, and its schema checked (made
        first if need be), under the opening lock."""
        made = [] if self.read_only else self._make_data_folder()
        # no progress bar: it would go to stdout, into a command's JSON
        self.con = con = duckdb.connect()
        try:
            con.execute("SET enable_progress_bar = false")
            load_extensions(con)
            with OpeningLock(con, self.lake) as lock:
                lock.hold(shared=True)
                if self.read_only or lock.lake_made():
                    retry_conflicts(self._attach)
                    if retry_conflicts(partial(self._check_schema, create=False)):
                        return con
                lock.hold(shared=False)  # no lake yet, or none of the store's tables
                if CATALOG not in self._attached():
                    retry_conflicts(self._attach)
                retry_conflicts(partial(self._check_schema, create=True))
            return con
        except duckdb.Error as exc:
            con.close()
            with contextlib.suppress(OSError):  # made for this attempt: leave no trace
                for folder in made:
                    folder.rmdir()
            raise open_failure(self.lake, exc) from exc
        except BaseException:
            con.close()
            raise

    def _make_data_folder(self) -> list[Path]:
        """Create the data folder; the folders made for it, innermost first."""
        made = _missing(self.lake.data_path)
        try:
            self.lake.data_path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(
                f"cannot create the lake's data folder {self.lake.data_path}: "
                f"{exc.strerror or exc}; pass --lake-data DIR on a writable disk",
                str(self.lake.data_path),
            ) from exc
        return made

    def _attached(self) -> set[str]:
        return {
            str(r[0])
            for r in self.con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
        }

    def _attach(self) -> None:
        """Attach the lake and use it (DuckDB's error raised as it is, for
        ``retry_conflicts`` to judge)."""
        options = [f"DATA_PATH '{_sql_str(str(self.lake.data_path))}/'"]
        options.append("READ_ONLY" if self.read_only else f"DATA_INLINING_ROW_LIMIT {INLINE_ROWS}")
        self.con.execute(f"ATTACH '{_sql_str(self.lake.url)}' AS {CATALOG} ({', '.join(options)})")
        self.con.execute(f"USE {CATALOG}")

    def _check_schema(self, *, create: bool) -> bool:
        """Check the store's schema; with ``create``, a writer makes it when the lake has
        none of its tables. False when there are none and ``create`` is False."""
        try:
            tables = main_tables(self.con, CATALOG)
            if not tables and not self.read_only:
                if create:
                    create_schema(self.con, lake=True)
                return create
            version = schema_row(self.con, tables)
        except duckdb.Error as exc:
            if conflicted(exc):
                raise  # another process created it meanwhile: looked at again
            raise self._failure(exc, "reading the catalog") from exc
        check_schema(Path(str(self.lake)), version)
        return True

    def _release(self) -> None:
        if self._private:
            self._private = False
            PRIVATE_UMASK.release()

    def close(self) -> None:
        try:
            self.con.close()
        finally:
            self._release()

    def _failure(self, exc: duckdb.Error, doing: str, outcome: str = ROLLED_BACK) -> StoreError:
        said = redact(first_line(exc))
        if (silent := catalog_unreachable(self.lake.conninfo)) is not None:
            said = f"{said}; {silent}"
        return StoreError(
            f"{doing} on the lake {self.lake} failed ({said}); {outcome}", str(self.lake)
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
            self._remove_unwritten(exc)
            raise self._failure(exc, "writing a batch", BATCH_ROLLED_BACK) from exc

    def _remove_unwritten(self, exc: duckdb.Error) -> None:
        """Delete the Parquet file a failed write of this process left half written in the
        lake's data folder (a full or read-only disk): DuckDB names the file it could not
        write, and DuckLake forgets it (a rollback deletes only the files it finished). Its
        name is a fresh UUID of a transaction that never committed, so no other writer can
        use it; a file the catalog names (one the failed statement only read) is kept, and
        so is everything when the catalog cannot be asked."""
        root = self.lake.data_path
        for found in _UNWRITTEN.finditer(str(exc)):
            path = Path(found.group("path"))
            if not (path.name.startswith("ducklake-") and path.is_relative_to(root)):
                continue
            try:
                known = self.con.execute(_KNOWN_FILE_SQL, [path.name, f"/{path.name}"]).fetchone()
            except duckdb.Error:
                return
            if known is not None and known[0] == 0:
                with contextlib.suppress(OSError):
                    path.unlink()

    def checkpoint(self) -> None:
        """DuckLake's maintenance: snapshots older than ``keep_snapshots_s`` expired, then
        ``CHECKPOINT`` (inlined rows written out, adjacent small files merged), then the files
        no snapshot uses any more deleted once they have waited ``keep_snapshots_s``. Without
        the expiry and the clean-up, every file a merge replaced would stay on disk for good.
        Last, Parquet files the catalog never knew that are older than ``keep_snapshots_s``
        (a write a disk turned read-only under, which could not even be deleted then) are
        deleted; a younger one may be another host's write about to commit, and waits."""
        older = f"now() - INTERVAL {max(int(self.keep_snapshots_s), 0)} SECOND"
        steps = (
            f"SELECT count(*) FROM ducklake_expire_snapshots('{CATALOG}', older_than => {older})",
            f"CHECKPOINT {CATALOG}",
            f"SELECT count(*) FROM ducklake_cleanup_old_files('{CATALOG}', older_than => {older})",
            f"SELECT count(*) FROM ducklake_delete_orphaned_files('{CATALOG}', "
            f"older_than => {older})",
        )
        for attempt in range(COMPACTION_BUG_RETRIES + 1):
            try:
                for step in steps:  # each its own transaction: CHECKPOINT cannot run inside one
                    retry_conflicts(partial(self._run_step, step))
                return
            except duckdb.Error as exc:
                self._remove_unwritten(exc)
                if attempt < COMPACTION_BUG_RETRIES and _COMPACTION_BUG.search(str(exc)):
                    self._reconnect()  # the failed merge changed nothing; the next one may not
                    time.sleep(COMPACTION_BUG_WAIT_S * (attempt + 1) * (0.5 + random.random()))
                    continue
                raise self._failure(exc, "maintenance (CHECKPOINT)", MAINTENANCE_FAILED) from exc

    def _reconnect(self) -> None:
        """A new connection in place of this one (an INTERNAL error may leave DuckDB's
        instance unusable)."""
        with contextlib.suppress(duckdb.Error):
            self.con.close()
        self.con = self._open_lake()

    def _run_step(self, sql: str) -> None:
        self.con.execute(sql).fetchall()

    def rebuild_projections(self) -> None:
        """Drop every projection and recompute it from the lake's events (every host's)."""
        try:
            retry_conflicts(lambda: reproject(self.con, lake=True))
        except duckdb.Error as exc:
            self._remove_unwritten(exc)
            raise self._failure(exc, "rebuilding the projections") from exc


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


_UNWRITTEN = re.compile(
    r'(?:could not|cannot) (?:write|create|open|flush|sync|fsync|close|truncate)[^"]*'
    r'"(?P<path>[^"]+)"',
    re.IGNORECASE,
)
"""DuckDB's message for a file it failed to write (or open), with the file's path."""
_KNOWN_FILE_SQL = f"""SELECT count(*) FROM (
    SELECT path FROM __ducklake_metadata_{CATALOG}.ducklake_data_file
    UNION ALL SELECT path FROM __ducklake_metadata_{CATALOG}.ducklake_delete_file
    UNION ALL SELECT path FROM __ducklake_metadata_{CATALOG}.ducklake_files_scheduled_for_deletion
) WHERE path = ? OR ends_with(path, ?)"""
"""Whether the catalog names a file (by its name: paths are stored relative to the data
folder, or whole)."""
_STORED_DATA_PATH = re.compile(r'existing data path in the catalog "(?P<path>[^"]*)"')


_ADVICE = (
    (
        re.compile(
            r"connection refused|could not connect|is the server running|timeout expired"
            r"|could not translate host name|server closed the connection|no route to host",
            re.IGNORECASE,
        ),
        "PostgreSQL did not answer: check that it is running there and that host and port "
        "are right",
    ),
    (
        re.compile(
            r"password authentication failed|no password supplied|pg_hba\.conf"
            r'|role "[^"]*" does not exist',
            re.IGNORECASE,
        ),
        "PostgreSQL refused the login: check user and password (or its pg_hba.conf)",
    ),
    (
        re.compile(r'database "[^"]*" does not exist', re.IGNORECASE),
        "Create that database first (createdb NAME), or fix dbname",
    ),
    (
        re.compile(r"creating a new DuckLake is explicitly disabled", re.IGNORECASE),
        "No lake has been made in that database yet: run `compactlens ingest` (or import, "
        "replay) with this --store first",
    ),
    (
        re.compile(r"lock timeout", re.IGNORECASE),
        f"Another process has been opening this lake for over {OPEN_WAIT_S} s: see "
        "pg_stat_activity on that PostgreSQL for what it waits on",
    ),
)
"""What to do, by what PostgreSQL or DuckLake said (their messages are all there is)."""


def catalog_unreachable(conninfo: str, timeout_s: int = 3) -> str | None:
    """Why the PostgreSQL of ``conninfo`` refuses a new connection (its own words, without any
    password), or None when it takes one. A statement on a lake whose server went away
    mid-session fails with DuckDB's generic "unsuccessful query result"; this probe names the
    real cause (refused, shutting down, unknown host...)."""
    con = duckdb.connect()
    try:
        load_extensions(con)
        probe = f"{conninfo} connect_timeout={timeout_s}"
        con.execute(f"ATTACH '{_sql_str(probe)}' AS probe (TYPE postgres, READ_ONLY)")
        con.execute("SELECT * FROM postgres_query('probe', 'SELECT 1')").fetchall()
    except duckdb.Error as exc:
        said = redact(first_line(exc))
        if where := _UNABLE_TO_CONNECT.search(said):
            said = where.group("why")  # the conninfo is in the caller's message already
        return f"PostgreSQL does not take a new connection: {said.rstrip('.')}"
    finally:
        con.close()
    return None


_UNABLE_TO_CONNECT = re.compile(r'Unable to connect to Postgres at "[^"]*": (?P<why>.*)')


def _attach_advice(said: str) -> str:
    """What to do about a lake that could not be opened, from DuckDB's message ``said``."""
    if stored := _STORED_DATA_PATH.search(said):
        where = stored.group("path").rstrip("/") or "/"
        return (
            f"This lake keeps its data in {where}: pass --lake-data {where} (or set "
            "COMPACTLENS_LAKE_DATA), the same folder on every host"
        )
    for pattern, advice in _ADVICE:
        if pattern.search(said):
            return advice
    return "Fix that and try again (the events wait in the spool)"
