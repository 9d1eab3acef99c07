"""What to try: strategy specs (picklable, JSON-able descriptions of a strategy), the grid.

A ``StrategySpec`` names a strategy kind and its parameters, builds the strategy in whichever
process runs it, and is what the run log stores. ``default_grid`` spans the progressive
compactor's thresholds, minimum tail, offload threshold and tool-time offload; ``load_grid``
reads the same shape from a TOML or JSON file (``--grid``). Nothing here replays anything.
"""

from __future__ import annotations

import itertools
import json
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from analytics.tuning.rivals import ObservationMasking, OpenHandsCondenser, ThresholdSummary
from analytics.tuning.strategies import NoCompaction, ProgressiveStrategy, Strategy
from compactor import CompactorConfig

StrategyKind = Literal["progressive", "no-compaction", "masking", "threshold", "openhands"]
STRATEGY_KINDS: tuple[StrategyKind, ...] = (
    "progressive",
    "no-compaction",
    "masking",
    "threshold",
    "openhands",
)

DEFAULT_GRID: dict[str, list[Any]] = {
    "warn": [0.4, 0.6],
    "soft": [0.7, 0.8],
    "full": [0.85, 0.9],
    "min_tail_messages": [4, 8],
    "offload_threshold": [1000, 4000],
    "tool_time_offload": [False, True],
}
"""The default grid: 64 configurations (each list crossed with every other)."""


class StrategySpec(BaseModel):
    """One strategy to try: its kind, its ``CompactorConfig`` (progressive) or parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: StrategyKind
    config: CompactorConfig | None = None
    tool_time_offload: bool = False
    params: dict[str, float] = {}

    def build(self) -> Strategy:
        p = self.params
        if self.kind == "progressive":
            return ProgressiveStrategy(self.config or CompactorConfig(), self.tool_time_offload)
        if self.kind == "masking":
            return ObservationMasking(m=int(p.get("m", 10)))
        if self.kind == "threshold":
            return ThresholdSummary(fraction=float(p.get("fraction", 0.835)))
        if self.kind == "openhands":
            return OpenHandsCondenser(max_events=int(p.get("max_events", 100)))
        return NoCompaction()

    @property
    def name(self) -> str:
        return self.build().name

    def settings(self) -> dict[str, Any]:
        """The spec as the ``config`` of ``tune --json``."""
        if self.kind == "progressive":
            config = (self.config or CompactorConfig()).model_dump(mode="json")
            return {**config, "tool_time_offload": self.tool_time_offload}
        return dict(self.params)


def rival_specs(kinds: Sequence[str] = STRATEGY_KINDS) -> list[StrategySpec]:
    """The baselines: no compaction, masking M=10, thresholds 83.5% and 90%, OpenHands N=100."""
    all_rivals = [
        StrategySpec(kind="no-compaction"),
        StrategySpec(kind="masking", params={"m": 10}),
        StrategySpec(kind="threshold", params={"fraction": 0.835}),
        StrategySpec(kind="threshold", params={"fraction": 0.9}),
        StrategySpec(kind="openhands", params={"max_events": 100}),
    ]
    return [s for s in all_rivals if s.kind in kinds]


def progressive_spec(values: Mapping[str, Any]) -> StrategySpec:
    """A progressive spec from config fields plus ``tool_time_offload``.

    ``fallback_target`` defaults to the smaller of 0.5 and 80% of ``warn`` (it must stay below
    ``warn``). Raises ``ValueError`` for an invalid combination.
    """
    fields = {k: v for k, v in values.items() if k != "tool_time_offload"}
    if "fallback_target" not in fields and "warn" in fields:
        fields["fallback_target"] = round(min(0.5, 0.8 * float(fields["warn"])), 4)
    try:
        config = CompactorConfig.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(str(exc.errors()[0]["msg"])) from None
    return StrategySpec(
        kind="progressive", config=config, tool_time_offload=bool(values.get("tool_time_offload"))
    )


def grid_specs(grid: Mapping[str, Sequence[Any]]) -> list[StrategySpec]:
    """Every valid combination of the grid's values (invalid ones, e.g. soft >= full, skipped)."""
    keys = list(grid)
    specs: list[StrategySpec] = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        try:
            specs.append(progressive_spec(dict(zip(keys, combo, strict=True))))
        except ValueError:
            continue
    return list({s.name: s for s in specs}.values())


def load_grid(path: Path) -> dict[str, list[Any]]:
    """A grid from TOML (``.toml``) or JSON: each key a ``CompactorConfig`` field or
    ``tool_time_offload``, each value a list (a scalar is a one-value list). Keys absent from
    the file keep the default grid's values. Raises ``ValueError`` naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the grid: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not a valid grid file: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a table of field = [values]")
    known = set(CompactorConfig.model_fields) | {"tool_time_offload"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {unknown}; use CompactorConfig fields")
    grid = dict(DEFAULT_GRID)
    for key, value in data.items():
        grid[key] = list(value) if isinstance(value, list) else [value]
    return grid
