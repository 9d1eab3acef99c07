"""Materialised job results: recomputed per session, only where the events changed.

Each ``Job`` turns the input frames of some sessions into rows of its ``job_*`` tables (every
row carries ``session_id``). ``refresh`` compares each session's event watermark (its newest
event seq) and each job's version with the stamps stored beside the results, recomputes the
stale sessions only, drops the rows of sessions that were deleted or superseded, and stores
rows and stamps in one transaction per job. Readers (the CLI, the app) read the tables and
never recompute the fleet. Fleet-wide figures that are cheap to aggregate (percentiles over
the ``compactions`` projection) are not materialised; see ``analytics.report.html``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analytics.jobs.artifacts import artifact_detail, artifact_losses, artifact_retention
from analytics.jobs.costs import turn_costs
from analytics.jobs.offloads import offload_read_backs
from analytics.jobs.postmortem import postmortem_frames
from analytics.jobs.retention import retention_detail, silent_drops
from analytics.jobs.timeline import session_timeline
from analytics.queries import frames as queries
from analytics.store import EventStore
from analytics.store.results import JOB_TABLE, TABLE_EXISTS_SQL, JobResults

CHUNK_SESSIONS = 500
"""Sessions recomputed per transaction: bounds the memory of one refresh (message text
included) and keeps each chunk far below Arrow's 2 GiB string buffers."""


class JobInputs:
    """The input frames of a set of sessions, each read from the store once, on first use."""

    def __init__(self, store: EventStore, sessions: Sequence[str]) -> None:
        self.store = store
        self.sessions = list(sessions)
        self._frames: dict[str, pl.DataFrame] = {}

    def __getitem__(self, name: str) -> pl.DataFrame:
        if name not in self._frames:
            read: Callable[[EventStore, Sequence[str] | None], pl.DataFrame] = getattr(
                queries, f"{name}_frame"
            )
            self._frames[name] = read(self.store, self.sessions)
        return self._frames[name]


Compute = Callable[[JobInputs], dict[str, pl.DataFrame]]


@dataclass(frozen=True)
class Job:
    """A named computation with a version: bump the version when its output changes."""

    name: str
    version: int
    compute: Compute
    tables: tuple[str, ...] = ()
    """Every table ``compute`` writes (so that sessions that are gone can be dropped)."""


def _timeline(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    return {"job_session_timeline": session_timeline(inputs["turns"], inputs["sessions"])}


def _retention(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    detail = retention_detail(inputs["anchor_items"], inputs["compactions"], inputs["sessions"])
    drops = silent_drops(detail, inputs["compactions"], inputs["turns"])
    return {"job_retention_detail": detail, "job_silent_drops": drops}


def _postmortem(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    frames = postmortem_frames(
        inputs["compactions"],
        inputs["turns"],
        inputs["messages"],
        inputs["views"],
        inputs["sessions"],
        usage=inputs["usage"],
    )
    return {
        "job_emergencies": frames.emergencies,
        "job_lead_up": frames.lead_up,
        "job_top_contributors": frames.top_contributors,
    }


def _artifacts(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    detail = artifact_detail(
        inputs["compactions"],
        inputs["views"],
        inputs["messages"],
        inputs["synthetic"],
        inputs["sessions"],
    )
    return {
        "job_artifacts": artifact_retention(inputs["compactions"], inputs["sessions"], detail),
        "job_artifact_losses": artifact_losses(detail),
    }


def _offloads(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    rows = offload_read_backs(inputs["offloads"], inputs["messages"], inputs["sessions"])
    return {"job_offload_read_backs": rows}


def _costs(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    rows = turn_costs(
        inputs["turns"],
        inputs["messages"],
        inputs["views"],
        inputs["compactions"],
        inputs["sessions"],
        inputs["usage"],
    )
    return {"job_turn_costs": rows}


JOBS: tuple[Job, ...] = (
    Job("timeline", 1, _timeline, ("job_session_timeline",)),
    # retention 4: merges into exact copies match as into near ones; silent drops say why
    Job("retention", 4, _retention, ("job_retention_detail", "job_silent_drops")),
    Job("postmortem", 4, _postmortem, ("job_emergencies", "job_lead_up", "job_top_contributors")),
    Job("offloads", 1, _offloads, ("job_offload_read_backs",)),
    Job("artifacts", 1, _artifacts, ("job_artifacts", "job_artifact_losses")),
    # costs: each turn's cache split and cost under its session's price profile (issue 18)
    Job("costs", 1, _costs, ("job_turn_costs",)),
)


@dataclass
class RefreshReport:
    """What one refresh did, per job: sessions recomputed, sessions dropped, seconds taken."""

    recomputed: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def refresh(
    store: EventStore,
    jobs: Sequence[Job] = JOBS,
    *,
    progress: Callable[[str], Any] | None = None,
) -> RefreshReport:
    """Bring every job's tables up to the store's events, recomputing stale sessions only.

    Jobs with the same stale sessions (the usual case) share their input frames: sessions are
    taken ``CHUNK_SESSIONS`` at a time, each chunk is read once and handed to every job of the
    group, then dropped. Each (job, chunk) is one transaction."""
    marks = queries.session_watermarks(store)
    results = JobResults(store)
    report = RefreshReport()
    # jobs with the same stale sessions share them: (those sessions, [(job, gone, reset)])
    plans: dict[tuple[str, ...], tuple[pl.DataFrame, list[tuple[Job, list[str], bool]]]] = {}
    for job in jobs:
        stamps = results.job_stamps(job.name)
        reset = bool(stamps.height) and bool((stamps.get_column("version") != job.version).any())
        stale = marks if reset else _stale(marks, stamps)
        gone = _gone(marks, stamps)
        key = tuple(stale.get_column("session_id").to_list())
        plans.setdefault(key, (stale, []))[1].append((job, gone, reset))
        report.recomputed[job.name] = stale.height
        report.dropped[job.name] = len(gone)
        report.seconds[job.name] = 0.0
    for stale, group in plans.values():
        for first in range(0, max(stale.height, 1), CHUNK_SESSIONS):
            chunk = stale.slice(first, CHUNK_SESSIONS)
            inputs = JobInputs(store, chunk.get_column("session_id").to_list())
            for job, gone, reset in group:
                if not chunk.height and not (first == 0 and gone):
                    continue
                started = time.perf_counter()
                if progress is not None:
                    done = f"sessions {first + 1}-{first + chunk.height}" if chunk.height else ""
                    progress(f"{job.name}: {done or f'dropping {len(gone)} sessions'}")
                rows = job.compute(inputs) if chunk.height else {}
                results.replace_job_results(
                    job.name,
                    job.version,
                    rows,
                    chunk,
                    gone=gone if first == 0 else (),
                    reset=reset and first == 0,
                    tables=job.tables,
                )
                report.seconds[job.name] += time.perf_counter() - started
    return report


def _stale(marks: pl.DataFrame, stamps: pl.DataFrame) -> pl.DataFrame:
    """Sessions whose newest event seq is not the one their stored results cover."""
    current = stamps.select("session_id", pl.col("watermark").alias("covered"))
    joined = marks.join(current, on="session_id", how="left")
    return joined.filter(
        pl.col("covered").is_null() | (pl.col("covered") != pl.col("watermark"))
    ).select("session_id", "watermark")


def _gone(marks: pl.DataFrame, stamps: pl.DataFrame) -> list[str]:
    live = set(marks.get_column("session_id").to_list())
    return [s for s in stamps.get_column("session_id").to_list() if s not in live]


def job_table_exists(store: EventStore, table: str) -> bool:
    """True when the job writing ``table`` (a ``job_*`` name, checked) has run on this store."""
    if not JOB_TABLE.fullmatch(table):
        raise ValueError(f"{table!r} is not a job table name (job_<name>)")
    return bool(store.query(TABLE_EXISTS_SQL, [table]).item())


def job_table(store: EventStore, table: str) -> pl.DataFrame:
    """All rows of a materialised ``job_*`` table (empty when the job never ran)."""
    if not job_table_exists(store, table):
        return pl.DataFrame()
    return store.query(f"SELECT * FROM {table}")
