"""What to try: strategy specs (picklable, JSON-able descriptions of a strategy), the grid.

A ``StrategySpec`` names a strategy kind and its parameters, builds the strategy in whichever
process runs it, and is what the run log stores. ``default_grid`` spans the progressive
compactor's thresholds, minimum tail, offload threshold and tool-time offload (all of them
``CompactorConfig`` fields, so a spec's config alone reproduces its run); ``load_grid``
reads the same shape from a TOML or JSON file (``--grid``: exactly the configs to try, every
field it does not name at the library default) and ``validate_grid`` checks any grid
with pydantic, strictly (a ``"no"`` is not a bool, a ``true`` not a number, NaN not a ratio);
``count_configs`` sizes a grid before anything is built and ``plan_grid`` builds its valid
combinations, counting the others. Nothing here replays anything.
"""

from __future__ import annotations

import itertools
import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import (
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    create_model,
)

from analytics.errors import AnalyticsError
from analytics.tuning.rivals import ObservationMasking, OpenHandsCondenser, ThresholdSummary
from analytics.tuning.strategies import NoCompaction, ProgressiveStrategy, Strategy, fallback_for
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
    "soft": [0.7, 0.835],
    "full": [0.85, 0.92],
    "soft_min_gain": [0.05, 1.0],
    "min_tail_messages": [4, 8],
    "offload_threshold": [1000, 4000],
    "tool_offload_threshold": [None, 4000],
}
"""The default grid: 128 configurations (each list crossed with every other). Soft at 83.5% and
``soft_min_gain = 1`` (Soft summarises the whole head, not its older half) reach the configs
that compact rarely and deeply: under a prompt cache those are the cheap ones, as each
compaction turns the next prompt into a cache write."""


class StrategySpec(BaseModel):
    """One strategy to try: its kind, its ``CompactorConfig`` (progressive) or parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: StrategyKind
    config: CompactorConfig | None = None
    params: dict[str, float] = {}

    def build(self) -> Strategy:
        p = self.params
        if self.kind == "progressive":
            return ProgressiveStrategy(self.config or CompactorConfig())
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
            return (self.config or CompactorConfig()).model_dump(mode="json")
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
    """A progressive spec from config fields; every other field keeps the library default.

    ``fallback_target`` too, unless the default would not be below ``warn`` (0.5 for a warn
    of 0.5 or less): then it is 80% of ``warn`` (``fallback_for``). Raises ``ValueError`` for
    an invalid combination.
    """
    fields = dict(values)
    if "fallback_target" not in fields and "warn" in fields:
        fields["fallback_target"] = fallback_for(float(fields["warn"]))
    try:
        config = CompactorConfig.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
    return StrategySpec(kind="progressive", config=config)


class GridError(AnalyticsError, ValueError):
    """A grid that cannot be run as given: an unknown field, a value of the wrong type or out
    of range, an empty list, no valid combination, or more configurations than allowed."""


class StrategyError(AnalyticsError, ValueError):
    """A strategy name ``tune`` does not know."""


GRID_FIELDS = tuple(CompactorConfig.model_fields)
"""The keys a grid may have: every ``CompactorConfig`` field (tool-time offload is
``tool_offload_threshold``, None for off)."""
OFF_FIELDS = ("tool_offload_threshold", "cold_cache_compact")
"""The grid fields whose ``false`` means None (off): tool-time offload, and pulling a
compaction forward to a cold cache."""
MAX_TRIALS = 500
"""How many trials (grid configurations plus Optuna trials) a run plans unless told more."""


def _value_type(name: str) -> Any:
    """One value of grid field ``name``: the config field's type and bounds, strict (no string
    for a number or a bool, no bool for a number) and finite."""
    info = CompactorConfig.model_fields[name]
    finite = [AllowInfNan(False)] if info.annotation is float else []
    return Annotated[info.annotation, Strict(), *finite, *info.metadata]


def _as_list(value: Any) -> Any:
    """A scalar is a one-value list; a list or a table is left for validation to judge."""
    return value if isinstance(value, list | tuple | dict) else [value]


def _field(name: str) -> Any:
    values = cast(Any, list)[_value_type(name)]
    return (Annotated[values, BeforeValidator(_as_list), Field(min_length=1)] | None, None)


GridModel: type[BaseModel] = create_model(
    "GridModel",
    __config__=ConfigDict(extra="forbid", frozen=True),
    **{name: _field(name) for name in GRID_FIELDS},
)
"""A grid: each field a non-empty list of valid values of that field (or absent)."""


def validate_grid(data: Mapping[str, Any], source: str = "the grid") -> dict[str, list[Any]]:
    """``data`` checked field by field; ``GridError`` naming ``source``, each bad field and the
    value it holds, and what to write instead."""
    unknown = sorted(set(data) - set(GRID_FIELDS))
    if unknown:
        raise GridError(
            f"{source}: unknown field(s) {unknown}; use CompactorConfig fields (tool-time "
            "offload is tool_offload_threshold)"
        )
    try:
        checked = GridModel.model_validate(_offload_off(data))
    except ValidationError as exc:
        problems = [_problem(error, data) for error in exc.errors()[:3]]
        raise GridError(
            f"{source}: {'; '.join(problems)}; give each field a list of values of its type, "
            "e.g. warn = [0.5, 0.6], min_tail_messages = [4, 8], tool_offload_threshold = [4000]"
        ) from None
    return {k: list(v) for k, v in checked.model_dump(exclude_none=True).items()}


def _offload_off(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with ``false`` read as None (off) in ``OFF_FIELDS``: TOML has no null."""
    out = dict(data)
    for name in OFF_FIELDS:
        values = out.get(name)
        if values is False or isinstance(values, list):
            listed = values if isinstance(values, list) else [values]
            out[name] = [None if v is False else v for v in listed]
    return out


def _problem(error: Any, data: Mapping[str, Any]) -> str:
    name, *where = error["loc"]
    if where and isinstance(where[0], int):
        return f"{name}[{where[0]}] = {error['input']!r}: {error['msg']}"
    return f"{name} = {data.get(str(name))!r}: {error['msg']}"


def count_configs(grid: Mapping[str, Sequence[Any]]) -> int:
    """How many combinations ``grid`` makes (the product of its lists' lengths), computed
    without building one."""
    return math.prod(len(values) for values in grid.values())


def grid_size(grid: Mapping[str, Sequence[Any]]) -> str:
    """The product spelt out over the fields with more than one value: ``warn 2 × soft 3``."""
    parts = [f"{k} {len(v)}" for k, v in grid.items() if len(v) > 1]
    return " × ".join(parts) or "one value per field"


@dataclass(frozen=True)
class GridPlan:
    """The valid, distinct configurations of a grid, and the combinations that were not."""

    specs: list[StrategySpec]
    combinations: int
    invalid: int
    first_invalid: str = ""
    """The first invalid combination and why, e.g. ``warn=0.9, soft=0.7: thresholds must…``."""


def plan_grid(grid: Mapping[str, Sequence[Any]]) -> GridPlan:
    """Every valid combination of the grid's values as a spec (duplicates once); the invalid
    ones (e.g. soft >= full) counted, the first kept with its reason."""
    keys = list(grid)
    specs: list[StrategySpec] = []
    invalid, first = 0, ""
    for combo in itertools.product(*(grid[k] for k in keys)):
        values = dict(zip(keys, combo, strict=True))
        try:
            specs.append(progressive_spec(values))
        except ValueError as exc:
            invalid += 1
            if not first:
                shown = ", ".join(f"{k}={v}" for k, v in values.items())
                first = f"{shown}: {exc}"
    unique = list({s.name: s for s in specs}.values())
    return GridPlan(unique, count_configs(grid), invalid, first)


def grid_specs(grid: Mapping[str, Sequence[Any]]) -> list[StrategySpec]:
    """Every valid combination of the grid's values (invalid ones, e.g. soft >= full, skipped)."""
    return plan_grid(grid).specs


def load_grid(path: Path) -> dict[str, list[Any]]:
    """A grid from TOML (``.toml``) or JSON: each key a ``CompactorConfig`` field, each value a
    list (a scalar is a one-value list; ``tool_offload_threshold = false`` is off). The grid is
    exactly the configs to try: a key absent from the file keeps the library default
    (``progressive_spec``). Raises ``GridError`` (a ``ValueError``) naming the file, the field
    and the value."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except OSError as exc:
        raise GridError(f"{path}: cannot read the grid: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise GridError(f"{path}: not a valid grid file: {exc}") from None
    if not isinstance(data, dict):
        raise GridError(f"{path}: expected a table of field = [values], got {type(data).__name__}")
    return validate_grid(data, str(path))
