"""What made a difference in a tuning run: trials with identical figures, and each knob's effect.

``identical_groups`` puts the trials whose figures on the held-back sessions are all equal into
one group (a grid often holds configs that never differ on a set of sessions: a Warn no view
reaches); ``knob_effects`` takes each ``CompactorConfig`` field the progressive trials vary and
measures what moving it alone did to the objective: among trials equal in every other field,
the largest spread of the objective across its values (none when no two trials differ in that
field alone). A ``fallback_target`` a config did not set (``fallback_for`` its warn) is not a
knob of its own. ``range_words`` writes a knob's values as the tables show them. Pure: a table
and the specs in, plain values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from analytics.tuning.pareto import OBJECTIVE_COLUMNS
from analytics.tuning.specs import StrategySpec
from analytics.tuning.strategies import fallback_for

FIGURE_COLUMNS = (
    "tokens_billed",
    "saved_share",
    "summarizer_tokens",
    "turns_over_window",
    "emergencies",
    "artifact_retention",
    "anchor_retention",
    "violations",
    "cost",
    "cache_read_tokens",
    "cache_write_tokens",
)
"""The figures ``tune`` shows for each trial (``tune --json``'s, in its order): two trials
with all of them equal count as identical."""


@dataclass(frozen=True)
class Group:
    """Trials with identical figures, in the table's order, and the knobs that differ in it."""

    keys: list[str]
    names: list[str]
    varied: dict[str, list[Any]]
    """Config fields (of its progressive trials) whose values differ within the group."""


@dataclass(frozen=True)
class KnobEffect:
    """What moving one config field alone did to the objective on the held-back sessions."""

    knob: str
    values: list[Any]
    spread: float | None
    """The largest max − min of the objective across the knob's values among trials equal in
    every other field (None: no two trials differ in this field alone)."""
    share: float | None
    """That spread over the smallest figure it was measured against (None as above, or 0)."""
    any_figure: bool
    """Whether moving it alone changed any figure (retention, emergencies, ...), not just the
    objective."""


def knob_values(spec: StrategySpec) -> dict[str, Any]:
    """A progressive spec's settings as knobs: ``fallback_target`` left out when it is the one
    ``fallback_for`` its warn (it moves with warn, it was not set)."""
    values = dict(spec.settings())
    if values.get("fallback_target") == fallback_for(float(values["warn"])):
        values.pop("fallback_target")
    return values


def _figures(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(c) for c in FIGURE_COLUMNS)


def identical_groups(table: pl.DataFrame, specs: Mapping[str, StrategySpec]) -> list[Group]:
    """Every group of two or more trials of ``table`` (rows with ``key`` and the
    ``FIGURE_COLUMNS``) whose figures are all equal, in the order of its first row."""
    by_figures: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in table.iter_rows(named=True):
        by_figures.setdefault(_figures(row), []).append(row)
    groups = []
    for rows in by_figures.values():
        if len(rows) < 2:
            continue
        keys = [str(r["key"]) for r in rows]
        configs = [knob_values(specs[k]) for k in keys if specs[k].kind == "progressive"]
        groups.append(Group(keys, [str(r["name"]) for r in rows], _varied(configs)))
    return groups


def _varied(configs: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    fields = sorted({f for c in configs for f in c})
    out: dict[str, list[Any]] = {}
    for name in fields:
        seen = _distinct(c.get(name) for c in configs)
        if len(seen) > 1:
            out[name] = seen
    return out


def _distinct(values: Any) -> list[Any]:
    """The distinct values, None (off) first, then ascending."""
    found = list(dict.fromkeys(values))
    return sorted(found, key=lambda v: (v is not None, v if v is not None else 0))


def knob_effects(
    table: pl.DataFrame, specs: Mapping[str, StrategySpec], objective: str = "tokens"
) -> list[KnobEffect]:
    """Each knob the progressive trials of ``table`` vary, largest effect on ``objective``
    first (those never moved alone last), see the module text."""
    column = OBJECTIVE_COLUMNS[objective]
    rows = [
        (knob_values(specs[str(r["key"])]), r)
        for r in table.iter_rows(named=True)
        if specs[str(r["key"])].kind == "progressive"
    ]
    knobs = _varied([values for values, _row in rows])
    effects = []
    for knob, values in knobs.items():
        cells: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
        for settings, row in rows:
            rest = tuple(sorted((k, repr(v)) for k, v in settings.items() if k != knob))
            cells.setdefault(rest, []).append({**row, "_value": settings.get(knob)})
        spread: float | None = None
        share: float | None = None
        moved = False
        for cell in cells.values():
            if len({repr(r["_value"]) for r in cell}) < 2:
                continue
            figures = [float(r[column] or 0) for r in cell]
            width = max(figures) - min(figures)
            moved = moved or len({_figures(r) for r in cell}) > 1
            if spread is None or width > spread:
                spread = width
                share = width / min(figures) if min(figures) > 0 else None
        effects.append(KnobEffect(knob, values, spread, share, moved))
    return sorted(effects, key=lambda e: (e.spread is None, -(e.spread or 0.0), e.knob))


def range_words(values: Sequence[Any]) -> str:
    """A knob's values as the tables show them: ``0.4–0.6`` for numbers (lowest to highest),
    ``off`` for None, a list for anything else."""
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    others = [v for v in values if v is not None and v not in numbers]
    parts = ["off"] if None in values else []
    if len(numbers) > 1:
        parts.append(f"{_number(min(numbers))}–{_number(max(numbers))}")
    else:
        parts += [_number(v) for v in numbers]
    return ", ".join([*parts, *(_number(v) for v in others)])


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
