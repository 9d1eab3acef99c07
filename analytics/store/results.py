"""Materialised job results in the store: tables of rows per session, stamped per job.

A job's results live in its own ``job_*`` tables; ``job_stamps`` says, per job and session,
which job version and which event watermark (the session's newest event seq) the rows cover.
Replacing one job's rows for some sessions, their stamps, and dropping the rows of sessions that
are gone happen in ONE transaction, so a reader never sees half a refresh; a transaction that
fails says why (a full disk is told from the disk, never hidden behind its rollback). This
mixin runs SQL through an open ``EventStore``'s connection; it computes nothing and decides
nothing about staleness (``analytics.queries.materialize`` does). On a lake, where several
readers may refresh at once, a refresh that lost a commit conflict is run again whole.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import polars as pl

from analytics.errors import StoreError
from analytics.store import EventStore
from analytics.store.commits import retry_conflicts
from analytics.store.lake import LakeStore

JOB_TABLE = re.compile(r"job_[a-z][a-z0-9_]*")
"""What a job table's name must match (it is written into SQL)."""
TABLE_EXISTS_SQL = "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = ?"

STAMPS_DDL = """CREATE TABLE IF NOT EXISTS job_stamps (
    job VARCHAR NOT NULL, session_id VARCHAR NOT NULL, version INTEGER NOT NULL,
    watermark BIGINT, refreshed_at TIMESTAMPTZ DEFAULT current_timestamp)"""


class JobResults:
    """Materialised job results of one open, writable ``EventStore`` (see the module doc)."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.con: Any = store.con
        self.path = store.path
        self.lake = isinstance(store, LakeStore)

    def job_stamps(self, job: str) -> pl.DataFrame:
        """session_id, version, watermark of every session ``job`` has results for."""
        self.con.execute(STAMPS_DDL)
        frame: pl.DataFrame = self.con.execute(
            "SELECT session_id, version, watermark FROM job_stamps WHERE job = ?", [job]
        ).pl()
        return frame

    def replace_job_results(
        self,
        job: str,
        version: int,
        results: Mapping[str, pl.DataFrame],
        stamps: pl.DataFrame,
        *,
        gone: Sequence[str] = (),
        reset: bool = False,
        tables: Sequence[str] = (),
    ) -> None:
        """Replace ``job``'s rows for the sessions in ``stamps`` (session_id, watermark) with
        ``results`` (table -> rows), stamp them with ``version``, and drop every row of the
        ``gone`` sessions from ``tables`` (all the job's tables: a refresh that only drops
        sessions has no rows to name them by). ``reset`` recreates the tables."""
        for table in [*results, *tables]:
            if not JOB_TABLE.fullmatch(table):
                raise ValueError(f"{table!r} is not a job table name (job_<name>)")
        sessions = [*stamps.get_column("session_id").to_list(), *gone]

        def attempt() -> None:
            try:
                self.con.execute("BEGIN TRANSACTION")
                self.con.execute(STAMPS_DDL)
                for table, frame in results.items():
                    self._replace_rows(table, frame, sessions, reset=reset)
                for table in set(tables) - set(results):
                    if sessions and self._exists(table):
                        self.con.execute(
                            f"DELETE FROM {table} WHERE session_id IN (SELECT unnest(?))",
                            [sessions],
                        )
                self._stamp(job, version, stamps, sessions, reset=reset)
                self.con.execute("COMMIT")
            except BaseException:
                # a failed COMMIT has ended the transaction already: its ROLLBACK would raise
                # "no transaction is active" and hide why the COMMIT failed (a full disk)
                with contextlib.suppress(duckdb.Error):
                    self.con.execute("ROLLBACK")
                raise

        try:
            # on a lake, another reader refreshing the same job may commit first: run again
            retry_conflicts(attempt) if self.lake else attempt()
        except duckdb.Error as exc:
            raise self.store.failure(exc, f"storing the results of job {job!r}") from exc
        except Exception as exc:
            raise StoreError(
                f"could not store the results of job {job!r}: {exc}", self.store.location()
            ) from exc

    def _exists(self, table: str) -> bool:
        found = self.con.execute(TABLE_EXISTS_SQL, [table]).fetchone()
        return bool(found and found[0])

    def _replace_rows(
        self, table: str, frame: pl.DataFrame, sessions: list[str], *, reset: bool
    ) -> None:
        # a column that is null in every row has no type yet: store it as text, not as NULL
        rows = frame.with_columns(pl.col(pl.Null).cast(pl.String))
        self.con.register("job_rows", rows)
        try:
            if reset:
                self.con.execute(f"DROP TABLE IF EXISTS {table}")
            self.con.execute(
                f"CREATE TABLE IF NOT EXISTS {table} AS SELECT * FROM job_rows LIMIT 0"
            )
            if sessions:
                self.con.execute(
                    f"DELETE FROM {table} WHERE session_id IN (SELECT unnest(?))", [sessions]
                )
            if frame.height:
                self.con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM job_rows")
        finally:
            self.con.unregister("job_rows")

    def _stamp(
        self, job: str, version: int, stamps: pl.DataFrame, sessions: list[str], *, reset: bool
    ) -> None:
        if reset:
            self.con.execute("DELETE FROM job_stamps WHERE job = ?", [job])
        elif sessions:
            self.con.execute(
                "DELETE FROM job_stamps WHERE job = ? AND session_id IN (SELECT unnest(?))",
                [job, sessions],
            )
        if not stamps.height:
            return
        self.con.register("job_new_stamps", stamps.select("session_id", "watermark"))
        try:
            self.con.execute(
                "INSERT INTO job_stamps (job, session_id, version, watermark) "
                "SELECT ?, session_id, ?, watermark FROM job_new_stamps",
                [job, version],
            )
        finally:
            self.con.unregister("job_new_stamps")
