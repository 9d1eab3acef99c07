"""Cross-validated recommendation: choose on the tuning sessions, report on the held-back ones.

Sessions are split by transcript file (``analytics.tuning.folds``; about 30% held back).
Among the progressive trials feasible on the tuning sessions (no turn over the window, no
violation), the recommendation is the one billing the fewest tokens whose artifact retention is
within ``RETENTION_SLACK`` of the best feasible retention. It is written as a TOML file of
``CompactorConfig`` fields (what ``--config`` and ``CompactorConfig`` load), tool-time offload
included (``tool_offload_threshold``). A profile per model is chosen the
same way on each model's own tuning sessions when enough sessions name that model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import tomli_w

from analytics.tuning.metrics import SessionMetrics, totals
from analytics.tuning.pareto import OBJECTIVE_COLUMNS, feasible
from analytics.tuning.specs import StrategySpec
from compactor import CompactorConfig

HELD_BACK_SHARE = 0.3
RETENTION_SLACK = 0.02
MIN_PROFILE_SESSIONS = 5
"""A model needs this many tuning sessions for a profile of its own."""
FEW_PROFILE_SESSIONS = 20
"""A profile chosen on fewer tuning sessions than this is a hint, and is said to be one."""


def figures_table(
    trials: Mapping[str, tuple[StrategySpec, Sequence[SessionMetrics]]],
    session_ids: Collection[str],
    window: int,
) -> pl.DataFrame:
    """One row per trial: its totals over ``session_ids`` (``key``, ``name``, ``kind`` first)."""
    rows: list[dict[str, Any]] = []
    for key, (spec, metrics) in trials.items():
        chosen = [m for m in metrics if m.session_id in session_ids]
        rows.append({"key": key, "name": spec.name, "kind": spec.kind, **totals(chosen, window)})
    return pl.DataFrame(rows, infer_schema_length=None)


def rule_words(objective: str) -> str:
    """The recommendation rule in words."""
    cheapest = (
        "cheapest config by cost" if objective == "cost" else "config billing the fewest tokens"
    )
    return (
        f"the {cheapest} whose artifact retention is within {RETENTION_SLACK:g} of the best, "
        "among progressive configs with 0 turns over the window and no violations, chosen on "
        "the tuning sessions and reported on the held-back ones"
    )


def choose(table: pl.DataFrame, objective: str = "tokens") -> str | None:
    """The key of the recommended progressive trial in ``table`` (None if none is feasible):
    see ``rule_words``."""
    pool = feasible(table.filter(pl.col("kind") == "progressive"))
    if pool.height == 0:
        return None
    best = float(pool["artifact_retention"].max())  # type: ignore[arg-type]
    good = pool.filter(pl.col("artifact_retention") >= best - RETENTION_SLACK)
    key: str = good.sort(OBJECTIVE_COLUMNS[objective], "name")["key"][0]
    return key


@dataclass(frozen=True)
class Recommendation:
    """A recommended spec, where it was written, and its figures on the held-back sessions."""

    key: str
    name: str
    spec: StrategySpec
    path: Path
    tune: dict[str, Any]
    held_back: dict[str, Any]
    model: str = ""


def write_config(spec: StrategySpec, path: Path, note: str) -> Path:
    """The spec's ``CompactorConfig`` as TOML (loadable by ``--config``; tool-time offload is
    its ``tool_offload_threshold``, omitted when off), with ``note`` as a comment."""
    config = spec.config or CompactorConfig()
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# compactlens tune: {note}\n"
        f"# measured uncalibrated (bytes / 4): `compactlens replay --config {path.name} "
        "--uncalibrated` reproduces its figures\n"
    )
    body = tomli_w.dumps(config.model_dump(mode="json", exclude_none=True))  # TOML has no null
    path.write_text(header + body, encoding="utf-8")
    return path


def _safe(name: str) -> str:
    """A file-name part for a model name; names that had to change get a hash suffix, so two
    models never share a file."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")[:60] or "model"
    if safe == name:
        return safe
    return f"{safe}-{hashlib.sha256(name.encode()).hexdigest()[:6]}"


def recommend(
    trials: Mapping[str, tuple[StrategySpec, Sequence[SessionMetrics]]],
    tune_ids: Collection[str],
    held_ids: Collection[str],
    window: int,
    path: Path,
    *,
    model: str = "",
    distinct: bool = False,
    objective: str = "tokens",
) -> Recommendation | None:
    """Choose on ``tune_ids``, write the TOML to ``path``, report on ``held_ids``. None when no
    trial is feasible, or (``distinct``) when every trial bills the same on ``tune_ids`` (the
    sessions never compacted: nothing to choose between)."""
    tune_table = figures_table(trials, tune_ids, window)
    key = choose(tune_table, objective) if tune_table.height else None
    column = OBJECTIVE_COLUMNS[objective]
    if key is None or (distinct and tune_table[column].n_unique() < 2):
        return None
    spec, metrics = trials[key]
    held_rows = [m for m in metrics if m.session_id in held_ids]
    scope = f"model {model}" if model else "all models"
    note = f"{spec.name}, window {window}, chosen on {len(tune_ids)} sessions ({scope})"
    return Recommendation(
        key=key,
        name=spec.name,
        spec=spec,
        path=write_config(spec, path, note),
        tune=tune_table.filter(pl.col("key") == key).to_dicts()[0],
        held_back=totals(held_rows, window),
        model=model,
    )


def model_profiles(
    trials: Mapping[str, tuple[StrategySpec, Sequence[SessionMetrics]]],
    tune_ids: Collection[str],
    held_ids: Collection[str],
    window: int,
    folder: Path,
    stem: str,
    objective: str = "tokens",
) -> list[Recommendation]:
    """A recommendation per model with at least ``MIN_PROFILE_SESSIONS`` tuning sessions on
    which the trials differ."""
    some = next(iter(trials.values()), None)
    if some is None:
        return []
    by_model: dict[str, list[str]] = {}
    for m in some[1]:
        if m.model:
            by_model.setdefault(m.model, []).append(m.session_id)
    out: list[Recommendation] = []
    for model, ids in sorted(by_model.items()):
        tune = [s for s in ids if s in tune_ids]
        held = [s for s in ids if s in held_ids]
        if len(tune) < MIN_PROFILE_SESSIONS or not held:
            continue
        path = folder / f"{stem}-recommended-{_safe(model)}.toml"
        found = recommend(
            trials,
            set(tune),
            set(held),
            window,
            path,
            model=model,
            distinct=True,
            objective=objective,
        )
        if found is not None:
            out.append(found)
    return out


def profile_warnings(profiles: Sequence[Recommendation], tune_sessions: int) -> list[str]:
    """One line per per-model profile, said aloud; a warning for one chosen on fewer than
    ``FEW_PROFILE_SESSIONS`` sessions."""
    lines = []
    for p in profiles:
        n = int(p.tune.get("sessions") or 0)
        line = (
            f"profile for model {p.model}: {p.name}, chosen on {n} of {tune_sessions} tuning "
            f"sessions, written to {p.path}"
        )
        if n < FEW_PROFILE_SESSIONS:
            line += (
                f"; warning: only {n} sessions, treat it as a hint and check it on more "
                "sessions of that model before relying on it"
            )
        lines.append(line)
    return lines
