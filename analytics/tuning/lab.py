"""``run_tune``: the tuning lab end to end, and ``tune_json`` (SPEC 5.3 ``tune --json``).

Imports the sessions, splits them by transcript file into tuning folds and held-back files
(``analytics.tuning.folds``), evaluates the rivals and the grid (then the Optuna search) on every
session through a backend, logging each trial as it finishes, and recommends a configuration
chosen on the tuning folds; the figures reported (the table, the Pareto front) are those on the
held-back sessions, with the spread of the recommendation across the folds. Sessions are
replayed in the agent's world (``analytics.tuning.world``): calibrated on the transcripts'
usage as ``compactlens replay`` does, unless ``calibrate=False`` (``--uncalibrated`` for both).
Printing is the CLI's job: progress goes through a callback.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import polars as pl

from analytics.errors import AnalyticsError
from analytics.importers import ImportedSession, ImportIssue, import_path
from analytics.jobs.prices import BUILTIN_PROFILES, PriceProfile, profile_name_for_model
from analytics.tuning.execution import Backend, Setting, Task, open_backend
from analytics.tuning.folds import (
    FileSplit,
    SessionSource,
    figures_by_file,
    fold_spread,
    split_by_file,
)
from analytics.tuning.metrics import SessionMetrics
from analytics.tuning.pareto import pareto_front
from analytics.tuning.recommend import (
    Recommendation,
    budget_warnings,
    figures_table,
    model_profiles,
    profile_warnings,
    recommend,
    retention_price,
)
from analytics.tuning.runlog import RunLog, TrialRecord, new_header, run_path
from analytics.tuning.search import optuna_search
from analytics.tuning.specs import (
    DEFAULT_GRID,
    MAX_TRIALS,
    STRATEGY_KINDS,
    GridError,
    GridPlan,
    StrategyError,
    StrategySpec,
    count_configs,
    grid_size,
    load_grid,
    plan_grid,
    rival_specs,
    validate_grid,
)
from compactor import CompactorConfig

PathArg = str | os.PathLike[str]
Objective = Literal["cost", "tokens"]


@dataclass(frozen=True)
class TuneProgress:
    """Trials done of all planned, the best feasible progressive trial so far, an ETA."""

    done: int
    total: int
    best_name: str = ""
    best_tokens_billed: int | None = None
    eta_s: float | None = None
    objective: str = "tokens"
    best_value: float | None = None
    """The best trial's figure on the objective (cost, or tokens billed)."""
    sessions: int = 0
    """How many sessions each trial replays."""
    cost_unit: str = ""
    """The currency of ``best_value`` when the objective is cost."""


TuneProgressCallback = Callable[[TuneProgress], None]


@dataclass
class TuneReport:
    """What a tuning run found. ``table`` holds each trial's figures on the held-back sessions."""

    run_id: str
    window: int
    path: Path
    sessions: int
    tune_sessions: list[str]
    held_back_sessions: list[str]
    table: pl.DataFrame
    tune_table: pl.DataFrame
    """The same figures on the tuning sessions (what the recommendation was chosen on)."""
    specs: dict[str, StrategySpec]
    pareto: list[str]
    recommended: Recommendation | None
    profiles: list[Recommendation] = field(default_factory=list)
    issues: list[ImportIssue] = field(default_factory=list)
    resumed: int = 0
    evaluated: int = 0
    notes: list[str] = field(default_factory=list)
    """What the plan left out and why (grid combinations that are not valid configs), and
    warnings about the per-model profiles."""
    objective: str = "tokens"
    price_profile: str | None = None
    """The profile every session was priced under, or None (each session's model's)."""
    held_back_files: list[str] = field(default_factory=list)
    """The transcript files of the held-back sessions."""
    folds: dict[str, Any] | None = None
    """The recommendation's k-fold cross-validation (``folds.fold_spread``), or None."""
    held_back_by_file: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The recommendation's figures on each held-back transcript file."""
    calibrated: bool = True
    """Whether the transcripts' usage calibrated the counts (as ``replay`` without
    ``--uncalibrated``)."""
    cost_unit: str = "USD"
    """The currency of ``cost`` (``USD``, ``Mtok`` for the ``none`` profile: millions of
    tokens; ``USD + Mtok`` when sessions were priced under profiles of both)."""


def _load(paths: Sequence[PathArg]) -> tuple[list[ImportedSession], list[ImportIssue]]:
    sessions: dict[str, ImportedSession] = {}
    issues: list[ImportIssue] = []
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise AnalyticsError(
            f"no such file or folder: {', '.join(missing)}; give transcript files or folders"
        )
    for path in paths:
        found, problems = import_path(Path(path))
        issues += problems
        for s in found:
            if s.turns:
                sessions.setdefault(s.session_id, s)
    return [sessions[k] for k in sorted(sessions)], issues


def count_sessions(paths: Sequence[PathArg]) -> int:
    """How many sessions ``run_tune`` would replay from ``paths`` (those with a model turn);
    ``AnalyticsError`` for a path that does not exist."""
    sessions, _issues = _load(paths)
    return len(sessions)


def _run_id(
    sessions: Sequence[ImportedSession],
    window: int,
    specs: Sequence[StrategySpec],
    trials: int,
    pricing: str = "",
    calibrate: bool = False,
    held: Sequence[str] = (),
) -> str:
    h = hashlib.sha256()
    for s in sessions:
        h.update(s.session_id.encode())
        h.update(s.model_dump_json(include={"messages"}).encode())
        if calibrate:  # the usage decides a calibrated run's figures
            h.update(s.model_dump_json(include={"usage"}).encode())
    h.update(json.dumps([window, trials, [x.model_dump(mode="json") for x in specs]]).encode())
    h.update(pricing.encode())
    h.update(b"calibrated" if calibrate else b"")  # uncalibrated runs keep their old ids
    h.update(json.dumps(list(held)).encode())  # the split decides the Optuna trials
    return h.hexdigest()[:12]


def _held_files(
    sources: Sequence[SessionSource], held_back: Sequence[PathArg] | None
) -> set[str] | None:
    """The source paths ``held_back`` names (a file, or every file under a folder), checked:
    ``AnalyticsError`` for a path that names no session's file, or when nothing is left."""
    if held_back is None:
        return None
    files = {s.source_path for s in sources if s.source_path}
    resolved = {f: Path(f).resolve() for f in files}
    held: set[str] = set()
    for path in held_back:
        wanted = Path(path).resolve()
        found = {f for f, r in resolved.items() if r == wanted or wanted in r.parents}
        if not found:
            raise AnalyticsError(
                f"--hold-back {path}: no session of the transcripts given comes from it "
                "(name a transcript file or folder among the paths to tune on)"
            )
        held |= found
    if held >= files:
        raise AnalyticsError(
            f"--hold-back holds back all {len(files)} transcript file(s): leave some to tune on"
        )
    return held


class _Runner:
    """Evaluates tasks not yet in the log, logs them, and reports progress."""

    def __init__(
        self,
        log: RunLog,
        setting: Setting,
        total: int,
        open_: Callable[[], Backend],
        progress: TuneProgressCallback | None,
        tune_ids: set[str],
        objective: str = "tokens",
    ) -> None:
        self.log, self.setting, self.total, self._open = log, setting, total, open_
        self.progress, self.tune_ids = progress, tune_ids
        self.objective = objective
        self.backend: Backend | None = None
        self.sessions = 0
        self.evaluated = 0
        self.started = time.perf_counter()
        self.best: tuple[float, str, int] | None = None

    def __call__(self, tasks: Sequence[Task]) -> dict[str, list[SessionMetrics]]:
        missing = [t for t in tasks if t[0] not in self.log.done]
        if missing:
            specs = dict(missing)
            if self.backend is None:
                self.backend = self._open()
            for key, metrics in self.backend.run(missing, self.setting):
                spec = specs[key]
                self.log.add(
                    TrialRecord(
                        run_id=self.log.header.run_id,
                        key=key,
                        name=spec.name,
                        spec=spec,
                        metrics=metrics,
                    )
                )
                self.evaluated += 1
                self._report(spec, metrics)
        return {key: self.log.done[key].metrics for key, _ in tasks}

    def _report(self, spec: StrategySpec, metrics: list[SessionMetrics]) -> None:
        tune = [m for m in metrics if m.session_id in self.tune_ids]
        if spec.kind == "progressive" and not any(
            m.turns_over_window or m.violations for m in tune
        ):
            billed = sum(m.tokens_billed for m in tune)
            value = sum(m.cost for m in tune) if self.objective == "cost" else float(billed)
            if self.best is None or value < self.best[0]:
                self.best = (value, spec.name, billed)
        if self.progress is None:
            return
        done = len(self.log.done)
        elapsed = time.perf_counter() - self.started
        eta = elapsed / self.evaluated * max(self.total - done, 0)
        if self.best is None:
            self.progress(
                TuneProgress(
                    done, self.total, eta_s=eta, objective=self.objective, sessions=self.sessions
                )
            )
            return
        value, name, billed = self.best
        unit = _cost_unit(self.setting.profile, metrics)
        self.progress(
            TuneProgress(
                done, self.total, name, billed, eta, self.objective, value, self.sessions, unit
            )
        )

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()


def _grid(grid: PathArg | Mapping[str, Sequence[Any]] | None) -> tuple[dict[str, list[Any]], str]:
    """The grid checked, and what to call it in a message."""
    if grid is None:
        return dict(DEFAULT_GRID), "the default grid"
    if isinstance(grid, Mapping):
        return validate_grid(grid), "the grid"
    return load_grid(Path(grid)), str(grid)


@dataclass(frozen=True)
class _Plan:
    tasks: list[Task]
    notes: list[str]


def _plan(
    strategies: Sequence[str] | None,
    grid: PathArg | Mapping[str, Sequence[Any]] | None,
    trials: int = 0,
    max_trials: int = MAX_TRIALS,
) -> _Plan:
    """The fixed trials: the rivals asked for, then (with ``progressive``) the library's
    default config and the grid, keyed ``rival:<name>`` / ``grid:<name>``. ``GridError`` for a
    bad grid, one with no valid configuration, or one that with ``trials`` plans more than
    ``max_trials`` (counted before any configuration is built)."""
    kinds = list(strategies or STRATEGY_KINDS)
    unknown = sorted(set(kinds) - set(STRATEGY_KINDS))
    if unknown:
        raise StrategyError(f"unknown strategies {unknown}; choose from {list(STRATEGY_KINDS)}")
    specs, notes = rival_specs(kinds), []
    if "progressive" in kinds:
        planned, source = _grid(grid)
        size = count_configs(planned)
        if size + trials > max_trials:
            raise GridError(
                f"{source}: the grid makes {size:,} configurations ({grid_size(planned)})"
                + (f" and --trials adds {trials:,}" if trials else "")
                + f", over --max-trials {max_trials:,}: shorten the grid's lists or raise "
                "--max-trials (each trial replays every session)"
            )
        found = plan_grid(planned)
        if not found.specs:
            raise GridError(
                f"{source}: no combination of the grid is a valid CompactorConfig (e.g. "
                f"{found.first_invalid}); keep warn < soft < full < emergency across the lists"
            )
        if found.invalid:
            notes.append(
                f"{found.invalid:,} of {found.combinations:,} grid combinations are not valid "
                f"configs and were skipped (e.g. {found.first_invalid})"
            )
        specs += [StrategySpec(kind="progressive", config=CompactorConfig()), *found.specs]
    tasks: dict[str, StrategySpec] = {}
    for spec in specs:
        tasks.setdefault(f"{'grid' if spec.kind == 'progressive' else 'rival'}:{spec.name}", spec)
    if "progressive" in kinds:
        notes.append(_plan_words(found, len(tasks) - len(found.specs), kinds, trials))
    return _Plan(list(tasks.items()), notes)


def _plan_words(found: GridPlan, others: int, kinds: Sequence[str], trials: int) -> str:
    """What the run will try, counted: the grid's configs, the library defaults (a baseline,
    unless the grid holds them), the rivals, the Optuna trials."""
    rivals = [k for k in kinds if k != "progressive"]
    parts = [f"{len(found.specs):,} grid config(s)"]
    if others > len(rivals):
        parts.append("the library defaults (a baseline)")
    if rivals:
        parts.append(f"{len(rivals)} rival strateg{'y' if len(rivals) == 1 else 'ies'}")
    if trials:
        parts.append(f"{trials:,} Optuna trial(s)")
    return f"trials: {', '.join(parts)}; every trial replays every session"


def run_tune(
    paths: Sequence[PathArg],
    window: int,
    grid: PathArg | Mapping[str, Sequence[Any]] | None = None,
    trials: int = 0,
    strategies: Sequence[str] | None = None,
    workers: int | None = None,
    dask: str | None = None,
    home: PathArg = "data",
    progress: TuneProgressCallback | None = None,
    *,
    seed: int = 0,
    max_trials: int = MAX_TRIALS,
    price_profile: PriceProfile | None = None,
    objective: Objective | None = None,
    calibrate: bool = True,
    held_back: Sequence[PathArg] | None = None,
) -> TuneReport:
    """Replays ``paths``' sessions under the rivals, the grid and ``trials`` Optuna trials at
    ``window``, priced under ``price_profile`` (default: each session's model's), calibrated on
    the transcripts' usage as ``replay`` is (unless ``calibrate`` is False: bytes / 4, as
    ``replay --uncalibrated``); resumes the same run if it was interrupted. ``objective``
    (default ``cost`` when some session has a priced profile, else ``tokens``) drives the
    recommendation and the Pareto front. ``held_back`` (files or folders among ``paths``)
    chooses the held-back files instead of the split by name. Raises
    ``AnalyticsError`` for a path that does not exist or when no session has a turn, for a
    ``held_back`` path that holds no session's file or one that leaves nothing to tune on,
    ``StrategyError`` for a strategy name and ``GridError`` for a bad grid or one over
    ``max_trials`` with the trials (both ``AnalyticsError`` and ``ValueError``), before
    anything is imported."""
    plan = _plan(strategies, grid, trials, max_trials)
    tasks = plan.tasks
    trials = trials if any(spec.kind == "progressive" for _k, spec in tasks) else 0
    sessions, issues = _load(paths)
    if not sessions:
        raise AnalyticsError(f"no session with a model turn in {[str(p) for p in paths]}")
    ids = [s.session_id for s in sessions]
    sources = [SessionSource(s.session_id, s.source_path, s.parent_session_id) for s in sessions]
    split = split_by_file(sources, _held_files(sources, held_back))
    tune_ids, held_ids = split.tune, split.held
    chosen_objective = objective or _default_objective(sessions, price_profile)
    pricing = price_profile.model_dump_json() if price_profile else "by-model"
    specs_planned = [spec for _k, spec in tasks]
    run_id = _run_id(sessions, window, specs_planned, trials, pricing, calibrate, held_ids)
    run_id += f"-s{seed}"
    home_path = Path(home)
    log = RunLog(
        run_path(home_path, run_id), new_header(run_id, window, ids, held_ids, len(tasks) + trials)
    )
    resumed = len(log.done)
    runner = _Runner(
        log,
        Setting(window, price_profile, calibrate),
        len(tasks) + trials,
        lambda: open_backend(sessions, workers=workers, dask=dask),
        progress,
        set(tune_ids),
        chosen_objective,
    )
    runner.sessions = len(sessions)
    try:
        runner(tasks)
        searched = (
            optuna_search(trials, runner, set(tune_ids), seed=seed, objective=chosen_objective)
            if trials
            else []
        )
    finally:
        runner.close()
    specs = dict(tasks + searched)
    results = {key: (spec, log.done[key].metrics) for key, spec in specs.items()}
    report = _report(
        results, run_id, window, home_path, log.path, split, chosen_objective, calibrate
    )
    report.issues, report.resumed, report.evaluated = issues, resumed, runner.evaluated
    report.price_profile = price_profile.name if price_profile else None
    report.cost_unit = _cost_unit(price_profile, [m for _s, ms in results.values() for m in ms])
    held = set(held_ids)
    report.held_back_files = sorted({s.source_path for s in sessions if s.session_id in held})
    if report.recommended is not None:
        chosen = log.done[report.recommended.key].metrics
        files = {s.session_id: s.source_path for s in sessions if s.session_id in held}
        report.held_back_by_file = figures_by_file(chosen, files)
    report.notes = [
        *plan.notes,
        *budget_warnings(report.recommended, report.profiles, report.cost_unit),
        *retention_price(report.table, report.recommended, report.cost_unit),
        *profile_warnings(report.profiles, len(tune_ids)),
    ]
    return report


def _cost_unit(profile: PriceProfile | None, metrics: Sequence[SessionMetrics]) -> str:
    """The currency the costs are in (see ``TuneReport.cost_unit``)."""
    if profile is not None:
        return profile.currency
    found = {BUILTIN_PROFILES[m.profile].currency for m in metrics if m.profile in BUILTIN_PROFILES}
    return " + ".join(sorted(found)) or "USD"


def _default_objective(
    sessions: Sequence[ImportedSession], profile: PriceProfile | None
) -> Objective:
    """``cost`` when some session is priced (a profile was given, or a model has one)."""
    if profile is not None:
        return "cost" if profile.caching != "none" else "tokens"
    priced = any(profile_name_for_model(s.model) != "none" for s in sessions)
    return "cost" if priced else "tokens"


def _report(
    results: Mapping[str, tuple[StrategySpec, Sequence[SessionMetrics]]],
    run_id: str,
    window: int,
    home: Path,
    path: Path,
    split: FileSplit,
    objective: str = "tokens",
    calibrate: bool = True,
) -> TuneReport:
    tune_ids, held_ids = split.tune, split.held
    table = figures_table(results, set(held_ids), window)
    folder = home / "tuning"
    rec_path = folder / f"{run_id}-recommended.toml"
    tune, held = set(tune_ids), set(held_ids)
    chosen = recommend(
        results, tune, held, window, rec_path, objective=objective, calibrated=calibrate
    )
    profiles = model_profiles(
        results, tune, held, window, folder, run_id, objective, calibrated=calibrate
    )
    folds = fold_spread(results, split, chosen.key, window, objective) if chosen else None
    return TuneReport(
        run_id=run_id,
        window=window,
        path=path,
        sessions=len(set(tune_ids) | set(held_ids)),
        tune_sessions=tune_ids,
        held_back_sessions=held_ids,
        table=table,
        tune_table=figures_table(results, set(tune_ids), window),
        specs={k: v[0] for k, v in results.items()},
        pareto=pareto_front(table, objective) if table.height else [],
        recommended=chosen,
        profiles=profiles,
        objective=objective,
        folds=folds,
        calibrated=calibrate,
    )
