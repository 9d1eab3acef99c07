"""Counterfactuals for emergency post-mortems: would one config change have avoided it?

The session's prefix, up to and including the emergency's turn, is replayed through
``CompactionSession`` once as it was (the baseline) and once per single change; each change
reports whether the emergency was avoided (no effective Emergency compaction anywhere in the
replayed prefix) and the tokens billed (``estimate_tokens`` of every view prepared, summed).
A turn is each point where the agent called the model, as in ``analytics.replay.driver``: a
``prepare()`` before every assistant message of the prefix, plus the emergency's own turn at its
end.

The changes, each alone, in the fixed order of preference used to name the smallest one (the
first change in this order that avoids the emergency; ``None`` when none does):

1. ``min_tail_halved``: ``min_tail_messages`` halved (at least 1);
2. ``offload_threshold_halved``: ``offload_threshold`` halved (at least 1 byte);
3. ``tool_time_offload``: an ``OffloadHook`` (threshold = the config's ``offload_threshold``)
   applied to every tool result as it is appended, files in a temporary folder;
4. ``warn_lower``, 5. ``soft_lower``, 6. ``full_lower``: that threshold 0.1 lower, with the
   thresholds below it (and ``fallback_target`` below ``warn``) moved down just enough to stay
   strictly increasing: still one decision ("compact earlier at this tier"), and valid.

The order goes from what changes the least about the context the model sees (a smaller verbatim
tail) to what changes when the whole head is summarised. A change that would leave the config
invalid (thresholds no longer strictly increasing, ``warn`` not above ``fallback_target``, a
value already at its minimum) is not replayed; it is listed under ``skipped`` with the reason.

The summariser is the offline ``ExtractiveSummarizer`` unless one is passed, and reports say
which (``summarizer``: ``"extractive"`` or the chat model). The estimator is the default byte
estimator: tiers here are decided on ``bytes / 4``, not on a live session's calibration. This
module is not a job: it replays, writes offload files to a temporary folder and deletes them.
It records no events.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import ValidationError

from analytics.errors import AnalyticsError
from analytics.jobs.common import BYTES_PER_TOKEN
from analytics.replay.driver import summarizer_spec
from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    OffloadHook,
    ProgressiveCompactor,
    Summarizer,
    TokenEstimator,
    ToolCall,
    estimate_tokens,
)

CHANGE_ORDER: tuple[str, ...] = (
    "min_tail_halved",
    "offload_threshold_halved",
    "tool_time_offload",
    "warn_lower",
    "soft_lower",
    "full_lower",
)
"""Every change, in the order of preference that names the smallest avoiding one."""

THRESHOLD_STEP = 0.1
_SESSION_ID = "counterfactual"
_METADATA_ONLY = "counterfactuals need content; this session was captured as metadata"


class CounterfactualError(AnalyticsError):
    """A session cannot be replayed (e.g. it was captured as metadata); the message says why."""


@dataclass(frozen=True)
class Change:
    """One single change: its name, the config it gives, and whether tool-time offload is on."""

    name: str
    detail: str
    config: CompactorConfig
    tool_time_offload: bool = False


@dataclass(frozen=True)
class PrefixOutcome:
    """One replay of the prefix: an effective Emergency happened?, tokens billed, turns."""

    emergency: bool
    tokens_billed: int
    turns: int


@dataclass(frozen=True)
class CounterfactualReport:
    """The baseline, each replayed change (in ``CHANGE_ORDER``), the skipped ones, the smallest."""

    summarizer: str
    baseline: PrefixOutcome
    results: list[tuple[Change, PrefixOutcome]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        """The baseline replay reached Emergency too (else no change can be said to avoid it)."""
        return self.baseline.emergency

    @property
    def smallest_change(self) -> str | None:
        """The first change in ``CHANGE_ORDER`` that avoids the emergency, else None (also when
        the baseline replay did not reproduce the emergency)."""
        if not self.reproduced:
            return None
        for change, outcome in self.results:
            if not outcome.emergency:
                return change.name
        return None

    def as_dict(self) -> dict[str, Any]:
        """The SPEC 5.3 counterfactual keys of a post-mortem, plus the baseline and skips."""
        return {
            "counterfactuals": [
                {
                    "change": change.name,
                    "detail": change.detail,
                    "emergency_avoided": not outcome.emergency,
                    "tokens_billed": outcome.tokens_billed,
                }
                for change, outcome in self.results
            ],
            "smallest_change": self.smallest_change,
            "reproduced": self.reproduced,
            "summarizer": self.summarizer,
            "baseline": {
                "emergency": self.baseline.emergency,
                "tokens_billed": self.baseline.tokens_billed,
            },
            "skipped": [{"change": name, "reason": why} for name, why in self.skipped],
        }


def single_changes(config: CompactorConfig) -> tuple[list[Change], list[tuple[str, str]]]:
    """The valid changes of ``config`` in ``CHANGE_ORDER``, and (name, reason) of the others."""
    tail, limit = config.min_tail_messages, config.offload_threshold
    proposals: list[tuple[str, str, dict[str, Any], bool]] = [
        ("min_tail_halved", f"min_tail_messages {tail} -> {max(1, tail // 2)}",
         {"min_tail_messages": max(1, tail // 2)}, False),
        ("offload_threshold_halved", f"offload_threshold {limit} -> {max(1, limit // 2)}",
         {"offload_threshold": max(1, limit // 2)}, False),
        ("tool_time_offload", f"OffloadHook on tool results above {limit} bytes", {}, True),
    ]  # fmt: skip
    for name in ("warn", "soft", "full"):
        update = _lowered(config, name)
        detail = ", ".join(f"{k} {getattr(config, k)} -> {v}" for k, v in update.items())
        proposals.append((f"{name}_lower", detail, update, False))
    changes: list[Change] = []
    skipped: list[tuple[str, str]] = []
    for name, detail, update, hook in proposals:
        if update and all(getattr(config, k) == v for k, v in update.items()):
            skipped.append((name, f"{detail}: already at its minimum"))
            continue
        try:
            changed = CompactorConfig.model_validate({**config.model_dump(), **update})
        except ValidationError as exc:
            reason = "; ".join(str(e["msg"]) for e in exc.errors())
            skipped.append((name, f"{detail} would be invalid: {reason}"))
            continue
        changes.append(Change(name, detail, changed, hook))
    return changes, skipped


_LADDER = ("fallback_target", "warn", "soft", "full")
_GAP = 0.05


def _lowered(config: CompactorConfig, name: str) -> dict[str, float]:
    """``name`` 0.1 lower and each value below it on the ladder moved down just enough."""
    update = {name: round(getattr(config, name) - THRESHOLD_STEP, 6)}
    ceiling = update[name]
    for lower in reversed(_LADDER[: _LADDER.index(name)]):
        value = getattr(config, lower)
        if value < ceiling:
            break
        update[lower] = round(ceiling - _GAP, 6)
        ceiling = update[lower]
    return update


def replay_prefix(
    history: Sequence[Message],
    config: CompactorConfig,
    context_window: int,
    emergency_index: int,
    *,
    work_dir: Path,
    system: Message | None = None,
    summarizer: Summarizer | None = None,
    tool_time_offload: bool = False,
    estimator: TokenEstimator | None = None,
) -> PrefixOutcome:
    """Replay ``history[:emergency_index]`` with a turn before each assistant message and one at
    the end (the emergency's turn); offload files go under ``work_dir``."""
    compactor = ProgressiveCompactor(
        summarizer or ExtractiveSummarizer(),
        context_window,
        config=config,
        offloader=CompactionOffloader(work_dir, _SESSION_ID),
        session_id=_SESSION_ID,
        estimator=estimator,
    )
    session = CompactionSession(compactor, system, session_id=_SESSION_ID)
    hook = (
        OffloadHook(work_dir, _SESSION_ID, threshold=config.offload_threshold)
        if tool_time_offload
        else None
    )
    called: dict[str, str] = {}
    billed = turns = 0
    for msg in [*history[:emergency_index], None]:
        if msg is None or msg.role == "assistant":
            view, _ = session.prepare()
            billed += estimate_tokens(view)
            turns += 1
        if msg is None:
            break
        called.update((tc.id, tc.name) for tc in msg.tool_calls)
        if hook is not None and msg.is_tool_result:
            msg = hook(msg, tool_name=called.get(msg.tool_call_id or "", msg.name or ""))
        session.append(msg)
    session.close()
    emergency = any(r.tier == CompactionTier.EMERGENCY for r in session.records)
    return PrefixOutcome(emergency=emergency, tokens_billed=billed, turns=turns)


def counterfactuals(
    history: Sequence[Message],
    config: CompactorConfig,
    context_window: int,
    emergency_index: int,
    *,
    system: Message | None = None,
    summarizer: Summarizer | None = None,
    estimator: TokenEstimator | None = None,
) -> CounterfactualReport:
    """The baseline and every single change of ``config``, replayed over the prefix.

    ``history``: the session's messages without the system prompt (``system`` apart), indexed
    like the store's ``messages.idx``; ``emergency_index``: the ``history_messages`` of the
    emergency's turn (how many history messages the session held when it prepared that turn).
    """
    if not 0 <= emergency_index <= len(history):
        raise CounterfactualError(
            f"emergency_index {emergency_index} is outside the history of {len(history)} "
            "messages; pass the history_messages of the emergency's turn"
        )
    chosen = summarizer or ExtractiveSummarizer()
    spec = summarizer_spec(ProgressiveCompactor(chosen, context_window, config=config))
    changes, skipped = single_changes(config)
    runs = [Change("baseline", "the session's config", config), *changes]
    outcomes: list[PrefixOutcome] = []
    for change in runs:
        with tempfile.TemporaryDirectory(prefix="compactlens-cf-") as tmp:
            outcomes.append(
                replay_prefix(
                    history,
                    change.config,
                    context_window,
                    emergency_index,
                    work_dir=Path(tmp),
                    system=system,
                    summarizer=chosen,
                    tool_time_offload=change.tool_time_offload,
                    estimator=estimator,
                )
            )
    return CounterfactualReport(
        spec, outcomes[0], list(zip(changes, outcomes[1:], strict=True)), skipped
    )


def messages_from_frame(messages: pl.DataFrame, session_id: str | None = None) -> list[Message]:
    """Rebuild a session's history (ordered by ``idx``) from the store's ``messages`` frame.

    Raises ``CounterfactualError`` for a session captured as metadata (no content), since a
    replay of sizes alone would not be the same session.
    """
    rows = messages if session_id is None else messages.filter(pl.col("session_id") == session_id)
    if rows.is_empty():
        raise CounterfactualError(f"no messages for session {session_id!r}; nothing to replay")
    if rows["content"].null_count() > 0:
        raise CounterfactualError(_METADATA_ONLY)
    has_name = "name" in rows.columns
    out: list[Message] = []
    for row in rows.sort("idx").iter_rows(named=True):
        out.append(
            Message(
                role=row["role"],
                content=row["content"],
                tool_calls=_tool_calls(row.get("tool_calls")),
                tool_call_id=row.get("tool_call_id"),
                is_error=bool(row.get("is_error")),
                name=row["name"] if has_name else None,
            )
        )
    return out


def _tool_calls(text: str | None) -> tuple[ToolCall, ...]:
    """The ``tool_calls`` JSON text ([{id, name, arguments}]) as ``ToolCall``s."""
    if not text:
        return ()
    calls: list[ToolCall] = []
    for item in json.loads(text):
        arguments = item.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCall(id=item["id"], name=item["name"], arguments=arguments))
    return tuple(calls)


class FixedEstimator:
    """The estimate a session had when its emergency fired, frozen: ``bytes/4 * slope +
    overhead``, read back from the estimator name on its records, so that a counterfactual
    decides tiers on the same sizes as the session did (calibration included)."""

    def __init__(self, slope: float = 1.0, overhead: float = 0.0, name: str = "bytes/4") -> None:
        self.slope, self.overhead, self._name = slope, overhead, name

    @property
    def name(self) -> str:
        return self._name

    def tokens_for_bytes(self, n_bytes: int) -> int:
        return int((n_bytes // BYTES_PER_TOKEN) * self.slope + self.overhead)

    @classmethod
    def from_name(cls, name: str | None) -> FixedEstimator:
        """``bytes/4``, ``bytes/4*calibrated(F)`` or ``bytes/4*S+O``; anything else: bytes/4."""
        text = name or "bytes/4"
        if match := re.fullmatch(r"bytes/4\*calibrated\(([\d.]+)\)", text):
            return cls(float(match.group(1)), 0.0, text)
        if match := re.fullmatch(r"bytes/4\*([\d.]+)\+([\d.]+)", text):
            return cls(float(match.group(1)), float(match.group(2)), text)
        return cls()
