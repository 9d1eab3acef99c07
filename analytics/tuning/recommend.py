"""Cross-validated recommendation: choose on the tuning sessions, report on the held-back ones.

Sessions are split by transcript file (``analytics.tuning.folds``; about 30% held back). The
rule (``rule_words``): among the progressive trials feasible on the tuning sessions (no turn over
the window, no violation), those that cost (or bill, under ``--objective tokens``) no more than
the cheapest feasible *baseline* (the library defaults and the rival strategies: what a user
would otherwise run) compete: the cheapest of those within ``RETENTION_SLACK`` of their best
artifact retention wins; when none is that cheap, the cheapest feasible trial is chosen and
the report says so. A recommendation never
asks a user to pay more than the alternative for less. It is written as a TOML file of
``CompactorConfig`` fields (what ``--config`` and ``CompactorConfig`` load), tool-time offload
included (``tool_offload_threshold``). A profile per model is chosen the same way on each
model's own tuning sessions when enough sessions name that model.
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
"""Within the baseline's cost, configs this close to the best artifact retention count as equal,
and the cheapest of them wins."""
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
        row = {"key": key, "name": spec.name, "kind": spec.kind, "baseline": is_baseline(spec)}
        rows.append({**row, **totals(chosen, window)})
    return pl.DataFrame(rows, infer_schema_length=None)


def figure_words(column: str, value: float, cost_unit: str = "USD") -> str:
    """A cost or tokens-billed figure with its unit: ``0.1234 USD``, ``12,345 tokens``."""
    if column == "cost":
        return f"{value:,.4f} {cost_unit}"
    return f"{value:,.0f} tokens"


def is_baseline(spec: StrategySpec) -> bool:
    """A rival strategy, or the progressive compactor with the library's default config."""
    return spec.kind != "progressive" or (spec.config or CompactorConfig()) == CompactorConfig()


def rule_words(objective: str) -> str:
    """The recommendation rule in words."""
    dear = "cost" if objective == "cost" else "bill in tokens"
    return (
        f"among progressive configs that {dear} no more than the cheapest baseline (library "
        "defaults and rival strategies), all with 0 turns over the window and no violations, "
        f"the cheapest whose artifact retention is within {RETENTION_SLACK:g} of the best of "
        "them (the cheapest progressive config when none is that cheap); chosen on the tuning "
        "sessions and reported on the held-back ones"
    )


@dataclass(frozen=True)
class Budget:
    """The cheapest feasible baseline of a table: what a recommendation must not exceed."""

    name: str
    value: float


def budget(table: pl.DataFrame, objective: str = "tokens") -> Budget | None:
    """The cheapest feasible baseline row by ``objective`` (None when no baseline is feasible)."""
    column = OBJECTIVE_COLUMNS[objective]
    base = feasible(table.filter(pl.col("baseline"))).sort(column, "name")
    if base.height == 0:
        return None
    return Budget(str(base["name"][0]), float(base[column][0]))


def choose(table: pl.DataFrame, objective: str = "tokens") -> str | None:
    """The key of the recommended progressive trial in ``table`` (None if none is feasible):
    see ``rule_words``."""
    column = OBJECTIVE_COLUMNS[objective]
    pool = feasible(table.filter(pl.col("kind") == "progressive"))
    if pool.height == 0:
        return None
    limit = budget(table, objective)
    within = pool.filter(pl.col(column) <= limit.value) if limit else pool.clear()
    if within.height:
        best = float(within["artifact_retention"].max())  # type: ignore[arg-type]
        pool = within.filter(pl.col("artifact_retention") >= best - RETENTION_SLACK)
    return str(pool.sort(column, "name")["key"][0])


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
    budget: Budget | None = None
    """The cheapest baseline on the tuning sessions, which the choice had to stay within."""
    column: str = "tokens_billed"
    """The figure the rule minimised (``cost`` or ``tokens_billed``)."""

    @property
    def within_budget(self) -> bool:
        """Whether it is no dearer than the cheapest baseline on the tuning sessions."""
        return self.budget is None or float(self.tune[self.column]) <= self.budget.value


def reproduce_words(name: str, calibrated: bool) -> str:
    """How the lab measured, and the ``replay`` command that bills its figures again."""
    if calibrated:
        return (
            "calibrated on the transcripts' provider usage where they have it (bytes / 4 where "
            "not), as a live agent and `compactlens replay` count: `compactlens replay "
            f"<held-back files> --config {name}` bills these figures"
        )
    return (
        "bytes / 4, uncalibrated (the transcripts' usage not fed): `compactlens replay "
        f"<held-back files> --config {name} --uncalibrated` bills these figures"
    )


def write_config(spec: StrategySpec, path: Path, note: str, *, calibrated: bool = True) -> Path:
    """The spec's ``CompactorConfig`` as TOML (loadable by ``--config``; tool-time offload is
    its ``tool_offload_threshold``, omitted when off), with ``note`` and how it was measured
    as comments."""
    config = spec.config or CompactorConfig()
    path.parent.mkdir(parents=True, exist_ok=True)
    header = f"# compactlens tune: {note}\n# measured {reproduce_words(path.name, calibrated)}\n"
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
    calibrated: bool = True,
) -> Recommendation | None:
    """Choose on ``tune_ids``, write the TOML to ``path``, report on ``held_ids``. None when no
    trial is feasible, or (``distinct``) when every trial bills the same on ``tune_ids`` (the
    sessions never compacted: nothing to choose between)."""
    tune_table = figures_table(trials, tune_ids, window)
    key = choose(tune_table, objective) if tune_table.height else None
    column = OBJECTIVE_COLUMNS[objective]
    compared = tune_table.filter(pl.col("kind") == "progressive")[column]
    if key is None or (distinct and compared.n_unique() < 2):
        return None
    spec, metrics = trials[key]
    held_rows = [m for m in metrics if m.session_id in held_ids]
    scope = f"model {model}" if model else "all models"
    note = f"{spec.name}, window {window}, chosen on {len(tune_ids)} sessions ({scope})"
    return Recommendation(
        key=key,
        name=spec.name,
        spec=spec,
        path=write_config(spec, path, note, calibrated=calibrated),
        tune=tune_table.filter(pl.col("key") == key).to_dicts()[0],
        held_back=totals(held_rows, window),
        model=model,
        budget=budget(tune_table, objective),
        column=column,
    )


def model_profiles(
    trials: Mapping[str, tuple[StrategySpec, Sequence[SessionMetrics]]],
    tune_ids: Collection[str],
    held_ids: Collection[str],
    window: int,
    folder: Path,
    stem: str,
    objective: str = "tokens",
    *,
    calibrated: bool = True,
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
            calibrated=calibrated,
        )
        if found is not None:
            out.append(found)
    return out


def budget_warnings(
    rec: Recommendation | None, profiles: Sequence[Recommendation] = (), cost_unit: str = "USD"
) -> list[str]:
    """A warning for each recommendation no progressive config could keep within its baseline's
    figure on the tuning sessions (it is then merely the cheapest progressive config)."""
    lines = []
    for found in [*([rec] if rec else []), *profiles]:
        if found.budget is None or found.within_budget:
            continue
        scope = f"for model {found.model}" if found.model else "overall"
        lines.append(
            f"warning: no progressive config in this run was as cheap as the baseline "
            f"{found.budget.name} ({figure_words(found.column, found.budget.value, cost_unit)}) "
            "on the tuning "
            f"sessions; the recommendation {scope} ({found.name}) is the cheapest progressive "
            "one: widen the grid (e.g. later soft/full, soft_min_gain = 1) or keep the baseline"
        )
    return lines


def retention_price(
    table: pl.DataFrame, rec: Recommendation | None, cost_unit: str = "USD"
) -> list[str]:
    """A line saying what the recommendation gives up, when a feasible progressive config keeps
    more than ``RETENTION_SLACK`` more of the artifacts on the held-back sessions (``table``)."""
    pool = feasible(table.filter(pl.col("kind") == "progressive"))
    if rec is None or pool.height == 0:
        return []
    ranked = pool.sort(["artifact_retention", rec.column], descending=[True, False])
    best = ranked.row(0, named=True)
    kept = float(rec.held_back["artifact_retention"])
    if float(best["artifact_retention"]) <= kept + RETENTION_SLACK:
        return []
    return [
        f"retention price: {rec.name} keeps {kept:.1%} of the artifacts on the held-back "
        f"sessions at {figure_words(rec.column, float(rec.held_back[rec.column]), cost_unit)}; "
        f"the best-retaining config, {best['name']}, keeps "
        f"{float(best['artifact_retention']):.1%} at "
        f"{figure_words(rec.column, float(best[rec.column]), cost_unit)}"
    ]


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
