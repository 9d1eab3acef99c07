"""``tune --json`` (SPEC 5.3 and 8): what ``run_tune`` found, as the JSON the CLI prints.

Every strategy's figures on the held-back sessions (cost and the cache split beside the tokens
billed), the Pareto front, the objective and the recommendation rule in words, the
recommended configuration with its TOML path, the held-back transcript files and its spread
across the tuning folds (each fold's figures, min/median/max of the objective), and each
per-model profile. ``save_summary`` keeps that object beside the run's log
(``<home>/tuning/<run_id>-tune.json``), as ``compactlens tune`` and the app both do, so the
tuning page shows the objective, the rule and the recommendation of every run, wherever it was
started; ``load_summary`` reads it back. Nothing here replays.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from analytics.tuning.effects import FIGURE_COLUMNS, identical_groups, knob_effects, range_words
from analytics.tuning.lab import TuneReport
from analytics.tuning.recommend import (
    Recommendation,
    figure_words,
    reproduce_words,
    rule_words,
)

STRATEGY_KEYS = ("name", "kind", "config", *FIGURE_COLUMNS)
"""The keys of each ``strategies`` row."""
SUMMARY_SUFFIX = "-tune.json"
"""``<home>/tuning/<run_id>-tune.json``: the ``tune --json`` object of the run's last report."""


def _recommendation(rec: Recommendation | None) -> dict[str, Any]:
    return {
        "name": rec.name if rec else None,
        "config": rec.spec.settings() if rec else None,
        "path": str(rec.path) if rec else None,
        # the held-back figures, without the wall time (the one figure no rerun reproduces)
        "held_back": (
            {k: v for k, v in rec.held_back.items() if k != "wall_time_s"} if rec else None
        ),
        # the cheapest baseline on the tuning sessions, which the rule kept the choice within
        "baseline": (
            {"name": rec.budget.name, rec.column: rec.budget.value, "within": rec.within_budget}
            if rec and rec.budget
            else None
        ),
    }


def tune_json(report: TuneReport) -> dict[str, Any]:
    """The ``tune --json`` object of ``report``."""
    rows = []
    for row in report.table.to_dicts():
        spec = report.specs[row["key"]]
        rows.append({k: spec.settings() if k == "config" else row[k] for k in STRATEGY_KEYS})
    recommended = {
        **_recommendation(report.recommended),
        "held_back_sessions": report.held_back_files,
        "rule": rule_words(report.objective),
        "held_back_by_file": report.held_back_by_file,
        "estimator": reproduce_words("<path>", report.calibrated),
        "calibrated": report.calibrated,
        "folds": report.folds,
    }
    profiles = [
        {"model": p.model, "sessions": p.tune.get("sessions"), **_recommendation(p)}
        for p in report.profiles
    ]
    groups = identical_groups(report.table, report.specs)
    effects = knob_effects(report.table, report.specs, report.objective)
    return {
        "strategies": rows,
        "pareto": report.pareto,
        "recommended": recommended,
        "objective": report.objective,
        "price_profile": report.price_profile,
        "cost_unit": report.cost_unit,
        "profiles": profiles,
        "notes": report.notes,
        "identical": [{"names": g.names, "varied": g.varied} for g in groups],
        "knobs": [
            {
                "knob": e.knob,
                "values": e.values,
                "spread": e.spread,
                "spread_share": e.share,
                "unit": _unit(report.objective, report.cost_unit),
                "changed_any_figure": e.any_figure,
            }
            for e in effects
        ],
    }


def _unit(objective: str, cost_unit: str) -> str:
    return cost_unit if objective == "cost" else "tokens"


def knob_lines(found: Mapping[str, Any]) -> list[str]:
    """``tune --json``'s ``knobs`` and ``identical`` in words: what moved the objective, what
    made no difference on these sessions, which trials had identical figures."""
    knobs = found.get("knobs") or []
    objective = str(found.get("objective", "tokens"))
    column = "cost" if objective == "cost" else "tokens_billed"
    unit = found.get("cost_unit", "USD")
    lines = []
    if knobs:
        lines.append(
            f"what moved the {'cost' if column == 'cost' else 'tokens billed'} on the held-back "
            "sessions (each knob moved alone, every other setting the same):"
        )
    idle = []
    for knob in knobs:
        values = f"{knob['knob']} {range_words(knob['values'])}"
        if knob["spread"] is None:
            lines.append(f"  {values}: never moved alone in this run, effect not measured")
        elif knob["spread"] == 0 and not knob["changed_any_figure"]:
            idle.append(values)
        else:
            share = f" ({knob['spread_share']:.1%})" if knob["spread_share"] else ""
            extra = "" if knob["spread"] else ", other figures moved"
            lines.append(
                f"  {values}: up to {figure_words(column, knob['spread'], unit)}{share}{extra}"
            )
    if idle:
        lines.append(f"  no effect on these sessions: {'; '.join(idle)}")
    return lines


def baseline_line(recommended: Mapping[str, Any], cost_unit: str = "USD") -> str | None:
    """The ``tune --json`` recommendation's baseline in words, with its unit (None when it had
    none)."""
    base = recommended.get("baseline")
    if not base:
        return None
    column = "cost" if "cost" in base else "tokens_billed"
    where = "within" if base["within"] else "OVER"
    return (
        f"cheapest baseline on the tuning sessions: {base['name']} "
        f"({figure_words(column, base[column], cost_unit)}); the recommendation is {where} it"
    )


def summary_path(home: Path, run_id: str) -> Path:
    """Where ``run_id``'s ``tune --json`` object is kept."""
    return home / "tuning" / f"{run_id}{SUMMARY_SUFFIX}"


def save_summary(home: Path, report: TuneReport) -> Path:
    """Keep ``tune_json(report)`` beside the run's log, replacing it whole (written to a
    temporary file first, so a reader never sees half of it)."""
    path = summary_path(home, report.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(tune_json(report), indent=1, default=str), "utf-8")
    os.replace(partial, path)
    return path


def load_summary(home: Path, run_id: str) -> dict[str, Any] | None:
    """The ``tune --json`` object kept for ``run_id`` (None: none was kept, e.g. a run from
    before this file existed, or it is unreadable)."""
    return _read_summary(summary_path(home, run_id))


def newest_summary(home: Path) -> dict[str, Any] | None:
    """The ``tune --json`` object of the newest run kept under ``<home>/tuning`` (None: none)."""
    kept = sorted(
        (home / "tuning").glob(f"*{SUMMARY_SUFFIX}"), key=lambda p: (p.stat().st_mtime, p.name)
    )
    return next((s for p in reversed(kept) if (s := _read_summary(p)) is not None), None)


def _read_summary(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
