"""The config changes a post-mortem tries, smallest first: each one a whole ``CompactorConfig``.

A change is named, described in words (``detail``: ``"warn 0.6 -> 0.5"``) and carries the full
config it gives, so the one that avoids an emergency can be written to a file and loaded by
``replay --config`` as it is. The catalogue, in the order of preference that names the smallest
avoiding change:

1. single changes: ``min_tail_halved``; ``offload_threshold_halved``; ``tool_time_offload``
   (tool results above the compaction offload threshold go to a file as they are appended:
   ``CompactorConfig.tool_offload_threshold`` where the library has it); ``warn_lower``,
   ``soft_lower``, ``full_lower`` (that threshold ``THRESHOLD_STEP`` lower, the ones below it
   moved down just enough to stay strictly increasing);
2. steps: each threshold two and three steps lower;
3. pairs: a single change of the tail or the offloads with a lowered threshold.

A change that would leave the config invalid, or changes nothing, is skipped with the reason.
Nothing here replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from compactor import CompactorConfig

THRESHOLD_STEP = 0.1
TOOL_OFFLOAD_FIELD = "tool_offload_threshold"
_LADDER = ("fallback_target", "warn", "soft", "full")
_GAP = 0.05


@dataclass(frozen=True)
class Change:
    """One change: its name, what it changes in words, and the whole config it gives."""

    name: str
    detail: str
    config: CompactorConfig
    tool_time_offload: bool = False
    """Tool results above the offload threshold offloaded as appended, where the config
    cannot say so itself (a library without ``tool_offload_threshold``)."""
    kind: str = "single"

    def config_dict(self) -> dict[str, Any]:
        """The config as ``replay --config`` loads it (JSON-ready)."""
        return self.config.model_dump(mode="json")


Proposal = tuple[str, str, dict[str, Any]]
"""(name, detail, field updates)."""


def _lowered(config: CompactorConfig, name: str, steps: int = 1) -> dict[str, Any]:
    """``name`` ``steps`` x 0.1 lower and each value below it on the ladder moved down just
    enough to stay strictly increasing."""
    return lowered_threshold(config.model_dump(), name, steps)


def lowered_threshold(values: dict[str, Any], name: str, steps: int = 1) -> dict[str, Any]:
    """The updates that put threshold ``name`` of config ``values`` ``steps`` x 0.1 lower,
    each value below it on the ladder moved down just enough to stay strictly increasing."""
    update: dict[str, Any] = {name: round(values[name] - steps * THRESHOLD_STEP, 6)}
    ceiling = update[name]
    for lower in reversed(_LADDER[: _LADDER.index(name)]):
        value = values[lower]
        if value < ceiling:
            break
        update[lower] = round(ceiling - _GAP, 6)
        ceiling = update[lower]
    return update


def _detail(config: CompactorConfig, update: dict[str, Any]) -> str:
    return ", ".join(f"{k} {getattr(config, k, None)} -> {v}" for k, v in update.items())


def _tool_offload(config: CompactorConfig) -> Proposal:
    limit = config.offload_threshold
    if TOOL_OFFLOAD_FIELD in CompactorConfig.model_fields:
        update = {TOOL_OFFLOAD_FIELD: limit}
        return ("tool_time_offload", _detail(config, update), update)
    return ("tool_time_offload", f"tool results above {limit} bytes offloaded as appended", {})


def _singles(config: CompactorConfig) -> list[Proposal]:
    tail, limit = config.min_tail_messages, config.offload_threshold
    out: list[Proposal] = [
        ("min_tail_halved", "", {"min_tail_messages": max(1, tail // 2)}),
        ("offload_threshold_halved", "", {"offload_threshold": max(1, limit // 2)}),
        _tool_offload(config),
    ]
    out += [(f"{name}_lower", "", _lowered(config, name)) for name in ("warn", "soft", "full")]
    return out


def _steps(config: CompactorConfig) -> list[Proposal]:
    return [
        (f"{name}_lower_x{steps}", "", _lowered(config, name, steps))
        for steps in (2, 3)
        for name in ("full", "soft", "warn")
    ]


def _pairs(config: CompactorConfig) -> list[Proposal]:
    singles = {name: update for name, _detail_text, update in _singles(config)}
    combos = [
        ("min_tail_halved", "full_lower"),
        ("min_tail_halved", "soft_lower"),
        ("offload_threshold_halved", "soft_lower"),
        ("tool_time_offload", "warn_lower"),
        ("tool_time_offload", "full_lower"),
        ("min_tail_halved", "offload_threshold_halved"),
    ]
    out: list[Proposal] = []
    for a, b in combos:
        update = {**singles[b], **singles[a]}
        out.append((f"{a}+{b}", "", update))
    return out


def catalogue(config: CompactorConfig) -> tuple[list[Change], list[tuple[str, str]]]:
    """Every valid change of ``config`` in the order of preference, and (name, reason) of the
    ones skipped."""
    changes: list[Change] = []
    skipped: list[tuple[str, str]] = []
    seen: set[str] = set()
    for kind, proposals in (
        ("single", _singles(config)),
        ("step", _steps(config)),
        ("pair", _pairs(config)),
    ):
        for name, given, update in proposals:
            detail = given or _detail(config, update)
            hook = "tool_time_offload" in name and TOOL_OFFLOAD_FIELD not in update
            if update and all(getattr(config, k, None) == v for k, v in update.items()):
                skipped.append((name, f"{detail}: already at its minimum"))
                continue
            try:
                changed = CompactorConfig.model_validate({**config.model_dump(), **update})
            except ValidationError as exc:
                reason = "; ".join(str(e["msg"]) for e in exc.errors())
                skipped.append((name, f"{detail} would be invalid: {reason}"))
                continue
            key = changed.model_dump_json() + str(hook)
            if key in seen:
                continue  # a step or pair that comes out as an earlier change
            seen.add(key)
            changes.append(Change(name, detail, changed, hook, kind))
    return changes, skipped
