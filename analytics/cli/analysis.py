"""The analysis commands: ``stats``, ``retention``, ``postmortem`` and ``report``.

Each opens the store as its owner, brings the materialised jobs up to date (only sessions whose
events changed are recomputed; with ``--dask ADDRESS`` computed on that Dask cluster, the store
still read and written here), then prints a table or, with ``--json``, the SPEC 5.3 object.
The figures come from ``analytics.queries.stats``, ``analytics.queries.findings`` and
``analytics.report.html``; this module parses options and prints.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import TaskID

from analytics.cli.common import (
    Command,
    HomeOption,
    PriceProfileOption,
    WindowOption,
    handled,
    json_text,
    resolve_home,
)
from analytics.cli.inputs import split_issues
from analytics.cli.tables import (
    postmortem_table,
    retention_table,
    stats_table,
    tune_table,
    warn_net_negative,
)
from analytics.cli.terminal import (
    PROGRESS_EVERY_S,
    RunProgress,
    console,
    err_console,
    print_issues,
    print_note,
    print_skipped,
    trial_progress,
)
from analytics.jobs.prices import PriceProfile
from analytics.queries.counterfactual_job import counterfactual_job
from analytics.queries.findings import postmortem_json, retention_json
from analytics.queries.materialize import JOBS, Job, refresh
from analytics.queries.stats import COHORT_KEYS, CohortKey, fleet_stats
from analytics.report.html import write_report
from analytics.store import DB_NAME, EventStore, StoreError, store_exists
from analytics.store.lending import reading_store
from analytics.text import SURROGATE
from analytics.tuning import newest_summary, run_tune, save_summary, tune_json
from analytics.tuning.lab import Objective
from analytics.tuning.prices import PriceProfileError, resolve_profile
from analytics.tuning.specs import MAX_TRIALS, GridError

JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object on stdout")]
DaskOption = Annotated[
    str | None,
    typer.Option(help="A Dask scheduler address (tcp://HOST:PORT) to compute on"),
]
"""``tune`` replays on that cluster; the analysis commands compute the changed sessions' jobs
there (the store is still read and written by this process)."""


def _session_text(value: str | None) -> str | None:
    """A session id is text: bytes the terminal could not decode (kept by Python as lone
    surrogates) are refused here, as a usage error, before any store or job reads them."""
    if value is not None and SURROGATE.search(value):
        shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise typer.BadParameter(
            f"'{shown}' holds bytes that are not UTF-8 text, so no session has that id; "
            "`compactlens stats` and the app's sessions page list the ids"
        )
    return value


SessionArgument = Annotated[
    str | None,
    typer.Argument(help="One session id (default: every session)", callback=_session_text),
]


@contextmanager
def analysed(
    root: Path, extra: Sequence[Job] = (), *, dask: str | None = None, session: str | None = None
) -> Iterator[EventStore]:
    """The store of ``root``, opened as its owner, with every job's results up to date (and
    the ``extra`` jobs', such as the counterfactual replays of ``postmortem``: for ``session``
    alone when one is named, since a question about one session should not wait for the
    replays of every other), computed on the Dask cluster at ``dask`` when given."""
    db = root / DB_NAME
    if not store_exists(root):  # a lake is always there
        raise StoreError(
            f"no database at {db}: load events first with `compactlens ingest --home {root}` "
            "(or import/replay transcripts)",
            str(db),
        )
    with reading_store(root, " ".join(sys.argv[:2])) as store:
        with err_console.status("updating the analysis of changed sessions…"):
            refresh(store, JOBS, dask=dask)
            if extra:
                refresh(store, extra, dask=dask, sessions=None if session is None else [session])
        yield store


def _emit(payload: dict[str, Any]) -> None:
    typer.echo(json_text(payload))


ByOption = Annotated[
    list[str] | None,
    typer.Option(
        "--by", help=f"Group sessions by {', '.join(COHORT_KEYS)} (repeatable): one table each"
    ),
]


def _cohort_keys(by: list[str] | None) -> list[CohortKey]:
    unknown = sorted(set(by or ()) - set(COHORT_KEYS))
    if unknown:
        raise typer.BadParameter(
            f"cannot group by {unknown}; choose from {list(COHORT_KEYS)}", param_hint="--by"
        )
    return [k for k in COHORT_KEYS if k in (by or ())]


def stats(
    as_json: JsonOption = False,
    home: HomeOption = None,
    by: ByOption = None,
    price_profile: PriceProfileOption = None,
    dask: DaskOption = None,
) -> None:
    """Headline figures of every job: compactions, compression, emergencies, retention, cost."""
    keys = _cohort_keys(by)
    profile = price_profile_of(price_profile)
    root = resolve_home(home, write=False)
    with handled(), analysed(root, dask=dask) as store:
        figures = fleet_stats(store, root / "spool", price_profile=profile, by=keys)
    if as_json:
        _emit(figures)
        warn_net_negative(figures)  # on stderr: stdout stays one JSON object
    else:
        stats_table(figures)


def price_profile_of(value: str | None) -> PriceProfile | None:
    try:
        return resolve_profile(value) if value else None
    except PriceProfileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--price-profile") from None


def retention(
    session: SessionArgument = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    dask: DaskOption = None,
) -> None:
    """Anchor retention item by item, and the silent drops of intent and decisions."""
    root = resolve_home(home, write=False)
    with handled(), analysed(root, dask=dask) as store:
        found = retention_json(store, session)
    if as_json:
        _emit(found)
    else:
        retention_table(found)


def postmortem(
    session: SessionArgument = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    counterfactuals: Annotated[
        bool,
        typer.Option(
            "--counterfactuals/--no-counterfactuals",
            help="Replay each emergency's lead-up under single config changes",
        ),
    ] = True,
    dask: DaskOption = None,
) -> None:
    """Emergency post-mortems grouped by session and cause: how many and when, one lead-up, the
    fix, what was lost (``--json``: every emergency, and the groups)."""
    root = resolve_home(home, write=False)
    with handled(), analysed(root, dask=dask) as store:
        if counterfactuals:  # for the session alone when one is named: no waiting on the rest
            with RunProgress() as bars:
                progress = _CounterfactualProgress(bars)
                job = counterfactual_job(progress)
                refresh(store, (job,), dask=dask, sessions=None if session is None else [session])
            progress.finish()
        found = postmortem_json(store, session, counterfactuals=counterfactuals)
    if as_json:
        _emit(found)
    else:
        postmortem_table(found)


class _CounterfactualProgress:
    """How far the counterfactual replays are: a bar on a terminal, else a line on stderr at
    most every ``PROGRESS_EVERY_S`` seconds (``counterfactuals: N of M emergencies, session
    X``) and one at ``finish``. A refresh hands the job its sessions in chunks, so M is the
    emergencies of the chunks begun so far."""

    def __init__(self, bars: RunProgress) -> None:
        self.bars = bars
        self.task: TaskID | None = None
        self.started = time.monotonic()
        self.printed = self.started - PROGRESS_EVERY_S
        self.finished = 0  # emergencies of the chunks done
        self.current = 0  # emergencies of the chunk being replayed

    def __call__(self, done: int, total: int, session_id: str | None) -> None:
        if session_id is None:  # a chunk is done
            self.finished, self.current = self.finished + total, 0
        elif done == 0:
            self.current = total
        at = self.finished + (0 if session_id is None else done)
        known = self.finished + self.current
        if not known:
            return
        if err_console.is_terminal:
            if self.task is None:
                self.task = self.bars.progress.add_task("counterfactuals", unit="emergencies")
            extra = "" if session_id is None else f", session {session_id}"
            self.bars.progress.update(self.task, completed=at, total=known, extra=extra)
        elif session_id is not None and time.monotonic() - self.printed >= PROGRESS_EVERY_S:
            self._line(f"{at:,} of {known:,} emergencies, session {session_id}")

    def finish(self) -> None:
        if self.finished and not err_console.is_terminal:
            self._line(f"{self.finished:,} of {self.finished:,} emergencies replayed")

    def _line(self, text: str) -> None:
        self.printed = time.monotonic()
        print_note(f"counterfactuals: {text} ({self.printed - self.started:,.0f} s)")


def report(
    out: Annotated[Path, typer.Argument(help="The HTML file to write")],
    home: HomeOption = None,
    by: ByOption = None,
    dask: DaskOption = None,
) -> None:
    """One self-contained HTML report (Plotly inline: it opens offline)."""
    keys = _cohort_keys(by) if by else None
    root = resolve_home(home, write=False)
    with handled(), analysed(root, dask=dask) as store:
        written = write_report(
            store, out, spool_dir=root / "spool", by=keys, tuning=newest_summary(root)
        )
    console.print(f"wrote {written} ({written.stat().st_size:,} bytes)", soft_wrap=True)


def tune(
    paths: Annotated[list[Path], typer.Argument(help="Transcript files or folders")],
    window: WindowOption,
    grid: Annotated[
        Path | None, typer.Option(help="TOML/JSON: CompactorConfig fields and values to try")
    ] = None,
    trials: Annotated[int, typer.Option(min=0, help="Optuna trials after the grid")] = 0,
    max_trials: Annotated[
        int,
        typer.Option(
            "--max-trials", min=1, help="Refuse a run of more grid configs plus --trials than this"
        ),
    ] = MAX_TRIALS,
    strategies: Annotated[
        list[str] | None,
        typer.Option(
            "--strategies",
            help="progressive, no-compaction, masking, threshold, openhands (repeatable)",
        ),
    ] = None,
    workers: Annotated[
        int | None, typer.Option(min=0, help="Processes (default: the CPU count)")
    ] = None,
    dask: DaskOption = None,
    as_json: JsonOption = False,
    home: HomeOption = None,
    price_profile: PriceProfileOption = None,
    objective: Annotated[
        Objective | None,
        typer.Option(
            "--objective",
            help="What the recommendation and the Pareto front minimise (default: cost when a "
            "price profile is known, else tokens)",
        ),
    ] = None,
    uncalibrated: Annotated[
        bool,
        typer.Option(
            "--uncalibrated",
            help="Byte estimate only, the transcripts' usage not fed (as replay --uncalibrated); "
            "by default sessions are counted calibrated, as replay and a live agent count them",
        ),
    ] = False,
    hold_back: Annotated[
        list[Path] | None,
        typer.Option(
            "--hold-back",
            help="A transcript file or folder among PATHS to hold back for the recommendation's "
            "figures (repeatable; default: 30% of the files, chosen by their names)",
        ),
    ] = None,
) -> None:
    """The tuning lab: replay sessions under many configs and rival strategies, recommend one."""
    profile = price_profile_of(price_profile)
    root = resolve_home(home)
    with handled(), RunProgress() as bars:
        try:
            found = run_tune(
                paths,
                window,
                grid=grid,
                trials=trials,
                strategies=strategies,
                workers=workers,
                dask=dask,
                home=root,
                progress=trial_progress(bars),
                max_trials=max_trials,
                price_profile=profile,
                objective=objective,
                calibrate=not uncalibrated,
                held_back=hold_back,
            )
        except GridError as exc:
            raise typer.BadParameter(str(exc), param_hint="--grid") from None
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    for note in found.notes:
        print_note(note)
    skipped, rejected = split_issues(paths, found.issues)  # skipped: a folder's README, ...
    print_skipped(skipped)
    print_issues(rejected)
    payload = tune_json(found)
    save_summary(root, found)  # the app's tuning page shows this run's rule and objective
    if as_json:
        _emit(payload)
    else:
        tune_table(payload)
    if rejected:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the analysis commands to ``app``."""
    for command in (stats, retention, postmortem, report, tune):
        app.command(cls=Command)(command)
