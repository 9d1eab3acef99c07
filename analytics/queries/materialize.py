"""Materialised job results: recomputed per session, only where the events changed.

Each ``Job`` turns the input frames of some sessions into rows of its ``job_*`` tables (every
row carries ``session_id``). ``refresh`` compares each session's event watermark (its newest
event seq) and each job's version with the stamps stored beside the results, recomputes the
stale sessions only, drops the rows of sessions that were deleted or superseded, and stores
rows and stamps in one transaction per job. Readers (the CLI, the app) read the tables and
never recompute the fleet. Fleet-wide figures that are cheap to aggregate (percentiles over
the ``compactions`` projection) are not materialised; see ``analytics.report.html``.

With ``dask`` (a scheduler address or a client) the computing fans out over a Dask cluster:
this process still reads each chunk's input frames (the store has one owner) and writes every
result in the same transactions, while the pure Polars job functions run on the workers, on
the frames shipped to them (``Job.inputs`` names them; a job without, such as one that reads
the store itself, is computed here). The next chunk is read while the cluster computes one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import polars as pl

from analytics.jobs.artifacts import artifact_detail, artifact_losses, artifact_retention
from analytics.jobs.costs import turn_costs
from analytics.jobs.grounding import summary_grounding
from analytics.jobs.ledger import compaction_ledger
from analytics.jobs.offloads import offload_read_backs
from analytics.jobs.postmortem import postmortem_frames
from analytics.jobs.retention import retention_detail, silent_drops
from analytics.jobs.timeline import session_timeline
from analytics.queries import frames as queries
from analytics.queries.fanout import DaskFanout
from analytics.store import EventStore
from analytics.store.results import JOB_TABLE, TABLE_EXISTS_SQL, JobResults

CHUNK_SESSIONS = 500
"""Sessions recomputed per transaction: bounds the memory of one refresh (message text
included) and keeps each chunk far below Arrow's 2 GiB string buffers."""


class JobInputs:
    """The input frames of a set of sessions, each read from the store once, on first use
    (or given: the frames shipped to a Dask worker, which has no store)."""

    def __init__(
        self,
        store: EventStore | None,
        sessions: Sequence[str],
        frames: dict[str, pl.DataFrame] | None = None,
    ) -> None:
        self._store = store
        self.sessions = list(sessions)
        self._frames: dict[str, pl.DataFrame] = dict(frames or {})

    @property
    def store(self) -> EventStore:
        if self._store is None:
            raise RuntimeError(
                "a job computed on a Dask worker has no store: list every frame it reads in "
                "Job.inputs, or give it inputs=None to compute it in the refreshing process"
            )
        return self._store

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
    inputs: tuple[str, ...] | None = None
    """The frames ``compute`` reads (``<name>_frame`` of ``analytics.queries.frames``), when
    that is all it reads: such a job can run on a Dask worker. None: computed here."""


def _timeline(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    return {"job_session_timeline": session_timeline(inputs["turns"], inputs["sessions"])}


def _retention(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    detail = retention_detail(inputs["anchor_items"], inputs["compactions"], inputs["sessions"])
    drops = silent_drops(
        detail, inputs["compactions"], inputs["turns"], model_calls=inputs["model_calls"]
    )
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


def _grounding(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    rows = summary_grounding(
        inputs["compactions"], inputs["anchor_items"], inputs["views"], inputs["messages"]
    )
    return {"job_grounding": rows}


def _costs(inputs: JobInputs) -> dict[str, pl.DataFrame]:
    rows = turn_costs(
        inputs["turns"],
        inputs["messages"],
        inputs["views"],
        inputs["compactions"],
        inputs["sessions"],
        inputs["usage"],
    )
    ledger = compaction_ledger(inputs["compactions"], rows, inputs["turns"], inputs["usage"])
    return {"job_turn_costs": rows, "job_ledger": ledger}


JOBS: tuple[Job, ...] = (
    Job("timeline", 1, _timeline, ("job_session_timeline",), ("turns", "sessions")),
    # retention 4: merges into exact copies match as into near ones; silent drops say why;
    # 5: each item's chain (survival by the number of compactions, issue 31); 6: an imported
    # session's compactions have the turn they precede (its model calls), "cap" only for ours
    Job(
        "retention",
        6,
        _retention,
        ("job_retention_detail", "job_silent_drops"),
        ("anchor_items", "compactions", "sessions", "turns", "model_calls"),
    ),
    # postmortem 5: causes from measured fixed parts, missing history, large turns, floors;
    # a burst is a turn's new messages (issue 26)
    Job(
        "postmortem",
        5,
        _postmortem,
        ("job_emergencies", "job_lead_up", "job_top_contributors"),
        ("compactions", "turns", "messages", "views", "sessions", "usage"),
    ),
    Job(
        "offloads",
        1,
        _offloads,
        ("job_offload_read_backs",),
        ("offloads", "messages", "sessions"),
    ),
    # artifacts 2: dates, Name.js, slash-separated words and diff prefixes are not paths
    # artifacts 3: paths need evidence (issue 27): Codex's JSON results decoded, Windows paths,
    # argument-list and $-prompt commands, editor verbs and code's error fields dropped
    Job(
        "artifacts",
        3,
        _artifacts,
        ("job_artifacts", "job_artifact_losses"),
        ("compactions", "views", "messages", "synthetic", "sessions"),
    ),
    # costs: each turn's cache split and cost under its session's price profile (issue 18);
    # 2: what truncations cut, and whether the uncompacted prompt fits the window (issue 26);
    # 3: each compaction's ledger (did it pay for itself, did it grow the context: issue 31)
    Job(
        "costs",
        3,
        _costs,
        ("job_turn_costs", "job_ledger"),
        ("turns", "messages", "views", "compactions", "sessions", "usage"),
    ),
    # grounding: is each anchor item and summary sentence in the history it replaced (issue 31)
    # grounding 2: the path facts of PATH_PATTERN (drives, ../../, /etc/hosts, .mcp.json)
    Job(
        "grounding",
        2,
        _grounding,
        ("job_grounding",),
        ("compactions", "anchor_items", "views", "messages"),
    ),
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
    dask: str | Any | None = None,
    sessions: Collection[str] | None = None,
) -> RefreshReport:
    """Bring every job's tables up to the store's events, recomputing stale sessions only
    (with ``sessions``, only those of them: the others' results stay as they are, and are
    brought up to date by a later refresh without it).

    Jobs with the same stale sessions (the usual case) share their input frames: sessions are
    taken ``CHUNK_SESSIONS`` at a time, each chunk is read once and handed to every job of the
    group, then dropped. Each (job, chunk) is one transaction. With ``dask`` (an address or a
    ``distributed.Client``) the jobs are computed on that cluster (see the module doc);
    ``DaskUnavailableError`` when it cannot be reached."""
    with DaskFanout.connect(dask) if dask is not None else nullcontext() as fanout:
        return _refresh(store, jobs, progress, fanout, sessions)


def _refresh(
    store: EventStore,
    jobs: Sequence[Job],
    progress: Callable[[str], Any] | None,
    fanout: DaskFanout | None,
    sessions: Collection[str] | None,
) -> RefreshReport:
    marks = queries.session_watermarks(store)
    asked = marks if sessions is None else marks.filter(pl.col("session_id").is_in(list(sessions)))
    results = JobResults(store)
    report = RefreshReport()
    # jobs with the same stale sessions share them: (those sessions, [(job, gone, reset)])
    plans: dict[tuple[str, ...], tuple[pl.DataFrame, list[tuple[Job, list[str], bool]]]] = {}
    for job in jobs:
        stamps = results.job_stamps(job.name)
        reset = bool(stamps.height) and bool((stamps.get_column("version") != job.version).any())
        stale = asked if reset else _stale(asked, stamps)
        gone = _gone(marks, stamps)
        key = tuple(stale.get_column("session_id").to_list())
        plans.setdefault(key, (stale, []))[1].append((job, gone, reset))
        report.recomputed[job.name] = stale.height
        report.dropped[job.name] = len(gone)
        report.seconds[job.name] = 0.0
    for stale, group in plans.values():
        chunks = _computed_chunks(store, stale, [job for job, _, _ in group], fanout)
        for first, chunk, computed in chunks:
            for job, gone, reset in group:
                if not chunk.height and not (first == 0 and gone):
                    continue
                started = time.perf_counter()
                if progress is not None:
                    done = f"sessions {first + 1}-{first + chunk.height}" if chunk.height else ""
                    progress(f"{job.name}: {done or f'dropping {len(gone)} sessions'}")
                rows = computed(job) if chunk.height else {}
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


Computed = Callable[[Job], dict[str, pl.DataFrame]]
"""A chunk's rows of one job (computed here on first call, or fetched from the cluster)."""


def _computed_chunks(
    store: EventStore, stale: pl.DataFrame, jobs: list[Job], fanout: DaskFanout | None
) -> Iterator[tuple[int, pl.DataFrame, Computed]]:
    """(first row, chunk, its rows per job) for each chunk of ``stale``, in order. On Dask the
    chunk after the one yielded is already read and submitted (one chunk ahead)."""
    starts = range(0, max(stale.height, 1), CHUNK_SESSIONS)
    if fanout is None:
        for first in starts:
            chunk = stale.slice(first, CHUNK_SESSIONS)
            inputs = JobInputs(store, chunk.get_column("session_id").to_list())
            yield first, chunk, partial(_compute_here, inputs)
        return
    ahead = _submit_chunk(store, stale, starts[0], jobs, fanout)
    for at, first in enumerate(starts):
        chunk, inputs, futures = ahead
        if at + 1 < len(starts):
            ahead = _submit_chunk(store, stale, starts[at + 1], jobs, fanout)
        yield first, chunk, partial(_compute_fetched, fanout, futures, inputs)


def _compute_here(inputs: JobInputs, job: Job) -> dict[str, pl.DataFrame]:
    return job.compute(inputs)


def _compute_fetched(
    fanout: DaskFanout, futures: dict[str, Any], inputs: JobInputs, job: Job
) -> dict[str, pl.DataFrame]:
    """The job's rows from the cluster, or computed here (a job that reads the store)."""
    if job.name not in futures:
        return job.compute(inputs)
    rows: dict[str, pl.DataFrame] = fanout.result(futures.pop(job.name))
    return rows


def _submit_chunk(
    store: EventStore, stale: pl.DataFrame, first: int, jobs: list[Job], fanout: DaskFanout
) -> tuple[pl.DataFrame, JobInputs, dict[str, Any]]:
    """Read the chunk at ``first``, ship its frames once, submit each job that can run remotely."""
    chunk = stale.slice(first, CHUNK_SESSIONS)
    sessions = chunk.get_column("session_id").to_list()
    inputs = JobInputs(store, sessions)
    remote = [job for job in jobs if job.inputs is not None] if chunk.height else []
    needed = sorted({name for job in remote for name in job.inputs or ()})
    shipped = fanout.scatter({name: inputs[name] for name in needed}) if needed else {}
    futures = {
        job.name: fanout.submit(
            _compute_shipped, job.compute, sessions, {n: shipped[n] for n in job.inputs or ()}
        )
        for job in remote
    }
    return chunk, inputs, futures


def _compute_shipped(
    compute: Compute, sessions: list[str], frames: dict[str, pl.DataFrame]
) -> dict[str, pl.DataFrame]:
    """On a Dask worker: the job on the frames shipped to it (no store there)."""
    return compute(JobInputs(None, sessions, frames))


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
