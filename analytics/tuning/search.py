"""The multi-objective search: Optuna's TPE over the progressive compactor's settings.

Objectives: minimise cost or tokens billed (``--objective``), maximise artifact retention, both
on the tuning sessions only; constraint: no turn over the window and no invariant violation
(``Trial.set_constraint``, Optuna 5's replacement of ``constraints_func``). Trials are asked in
fixed batches of ``BATCH`` (evaluated in parallel by the caller) with a seeded sampler, so the
study is a deterministic function of its results: a resumed run replays the same asks and
tells, taking finished trials from the run log instead of evaluating them again, and reaches
the same trials as an uninterrupted run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

from analytics.extras import require
from analytics.tuning.metrics import SessionMetrics, totals
from analytics.tuning.pareto import OBJECTIVE_COLUMNS
from analytics.tuning.specs import StrategySpec, progressive_spec

BATCH = 4
"""Trials asked before any is told (independent of the worker count, for reproducibility)."""

EvaluateBatch = Callable[[Sequence[tuple[str, StrategySpec]]], dict[str, list[SessionMetrics]]]
"""Evaluates (key, spec) pairs (or reads them from the log) and returns metrics by key."""


def spec_for_trial(trial: optuna.trial.BaseTrial) -> StrategySpec:
    """The progressive spec a trial suggests (always a valid ``CompactorConfig``)."""
    full = trial.suggest_float("full", 0.6, 0.9, step=0.05)
    soft_gap = trial.suggest_float("soft_gap", 0.05, 0.2, step=0.05)
    warn_gap = trial.suggest_float("warn_gap", 0.05, 0.3, step=0.05)
    values: dict[str, Any] = {
        "full": round(full, 3),
        "soft": round(full - soft_gap, 3),
        "warn": round(full - soft_gap - warn_gap, 3),
        "min_tail_messages": trial.suggest_int("min_tail_messages", 2, 12),
        "offload_threshold": trial.suggest_int("offload_threshold", 500, 16000, log=True),
        "tool_offload_threshold": trial.suggest_categorical("tool_offload_threshold", [None, 4000]),
        # the cache's knobs (issue 31): Soft pulled forward to an expired cache from this far
        # below Soft (0: off), and Warn offloads held when they would not pay against it
        "cache_priced_offload": trial.suggest_categorical("cache_priced_offload", [False, True]),
    }
    cold_gap = trial.suggest_categorical("cold_cache_gap", [0.0, 0.1, 0.2])
    if cold_gap:
        values["cold_cache_compact"] = round(values["soft"] - cold_gap, 3)
    return progressive_spec(values)


def objectives(
    metrics: Sequence[SessionMetrics], tune_ids: Collection[str], objective: str = "tokens"
) -> tuple[float, ...]:
    """(cost or tokens billed, artifact retention, infeasibility) on the tuning sessions."""
    figures = totals([m for m in metrics if m.session_id in tune_ids], window=1)
    infeasible = float(figures["turns_over_window"] or 0) + float(figures["violations"] or 0)
    return (
        float(figures[OBJECTIVE_COLUMNS[objective]] or 0),
        float(figures["artifact_retention"] or 0.0),
        infeasible,
    )


def optuna_search(
    trials: int,
    evaluate_batch: EvaluateBatch,
    tune_ids: Collection[str],
    *,
    seed: int = 0,
    objective: str = "tokens",
) -> list[tuple[str, StrategySpec]]:
    """Runs ``trials`` trials; returns (key, spec) of each, in trial order."""
    require("optuna", "tune", "tuning's Optuna search")  # only a search needs it
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(directions=["minimize", "maximize"], sampler=sampler)
    done: list[tuple[str, StrategySpec]] = []
    while len(done) < trials:
        asked = [study.ask() for _ in range(min(BATCH, trials - len(done)))]
        batch = [(f"optuna:{t.number}", spec_for_trial(t)) for t in asked]
        results = evaluate_batch(batch)
        for trial, (key, spec) in zip(asked, batch, strict=True):
            tokens, retention, infeasible = objectives(results[key], tune_ids, objective)
            trial.set_constraint("infeasible", infeasible)  # feasible when <= 0
            study.tell(trial, [tokens, retention])
            done.append((key, spec))
    return done
