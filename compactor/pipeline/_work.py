"""One compaction call in progress (``Work``) and the record it ends in.

``Work`` is the mutable state the pipeline threads through its steps: the view and where each
message came from, what was offloaded, summarised, dropped or cut, and every problem as a fixed
code plus its text. ``finish_outcome`` turns it into the ``CompactionRecord``; a call whose view
came back unchanged is a no-op there, whatever path it took, and its record says nothing of the
steps undone (no anchors, no claim of a change). Nothing here compacts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compactor.messages import Message
from compactor.pipeline._outcome import CompactionOutcome
from compactor.records import (
    CompactionRecord,
    CompactionTier,
    DroppedMessage,
    OffloadEntry,
    SummarizerStats,
    compression_ratio,
)
from compactor.summaries.anchors import Anchor
from compactor.tokens import TokenEstimator, linear_params

Trigger = Literal["auto", "manual", "cold_cache"]


@dataclass
class Work:
    """Mutable state of one pipeline run."""

    inputs: list[Message]
    view: list[Message]
    sources: list[int | None]
    tier: CompactionTier
    tokens_before: int
    trigger: Trigger
    t0: int = field(default_factory=time.perf_counter_ns)
    offloaded: list[OffloadEntry] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    error_codes: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    fallback: list[str] = field(default_factory=list)
    summarized: set[int] = field(default_factory=set)
    anchors: list[Anchor] = field(default_factory=list)
    summary: str = ""
    n_summarized: int = 0
    preserved: int | None = None
    """Non-system messages kept verbatim, when a truncation counted them."""
    stats: SummarizerStats | None = None
    dropped: list[DroppedMessage] = field(default_factory=list)
    cut: int = 0
    emergency: Literal["truncation", "offload"] | None = None

    @classmethod
    def start(
        cls, msgs: list[Message], tier: CompactionTier, tokens: int, trigger: Trigger
    ) -> Work:
        return cls(
            inputs=msgs,
            view=list(msgs),
            sources=list(range(len(msgs))),
            tier=tier,
            tokens_before=tokens,
            trigger=trigger,
        )

    def fail(self, code: str, text: str) -> None:
        """Note a problem: ``code`` is fixed (safe to keep anywhere), ``text`` may quote."""
        self.error_codes.append(code)
        self.errors.append(text)

    def unchanged(self) -> bool:
        return len(self.view) == len(self.inputs) and all(
            a is b or a == b for a, b in zip(self.view, self.inputs, strict=True)
        )


@dataclass(frozen=True)
class RecordContext:
    """What the record says about the compactor that made it."""

    session_id: str
    context_window: int
    estimator: TokenEstimator
    config_hash: str


_CHANGE_CODES = frozenset({"emergency_truncation", "emergency_offload"})
"""Codes that say what a call changed: a no-op changed nothing, so its record never has them
(the codes that say why nothing changed, such as ``window_too_small``, stay)."""


def finish_outcome(
    work: Work,
    ctx: RecordContext,
    tokens_after: int,
    tail_len: int,
    *,
    effective: bool,
) -> CompactionOutcome:
    """The record and view of ``work``; ``effective=False`` (or an unchanged view) is a no-op
    that returns the input untouched."""
    effective = effective and not work.unchanged()
    if not effective:
        work.view, work.sources = list(work.inputs), list(range(len(work.inputs)))
        tokens_after = work.tokens_before
    preserved = work.preserved if work.preserved is not None else tail_len
    failures = list(zip(work.error_codes, work.errors, strict=True))
    if not effective:  # a step that was undone leaves nothing on the record but its failures
        failures = [(code, text) for code, text in failures if code not in _CHANGE_CODES]
    record = CompactionRecord(
        session_id=ctx.session_id,
        tier=work.tier,
        tokens_before=work.tokens_before,
        tokens_after=tokens_after,
        msgs_before=len(work.inputs),
        msgs_after=len(work.view),
        anchors=work.anchors if effective else [],
        offloaded=work.offloaded if effective else [],
        summarized=work.n_summarized if effective else 0,
        preserved_tail=preserved if effective else 0,
        summary_text=work.summary if effective else "",
        compression_ratio=compression_ratio(work.tokens_before, tokens_after),
        duration=time.perf_counter_ns() - work.t0,
        error="; ".join(text for _, text in failures),
        error_codes=[code for code, _ in failures],
        trigger=work.trigger,
        effective=effective,
        context_window=ctx.context_window,
        fallback=" + ".join(work.fallback),
        repairs=work.repairs,
        dropped=work.dropped if effective else [],
        cut=work.cut if effective else 0,
        emergency=work.emergency if effective else None,
        summarizer=work.stats,
        **estimator_fields(ctx.estimator),
        config_hash=ctx.config_hash,
    )
    return CompactionOutcome(
        view=work.view,
        record=record,
        sources=work.sources,
        inputs=work.inputs,
        summarized_positions=work.summarized if effective else set(),
    )


def preserved_verbatim(
    view: Sequence[Message], sources: Sequence[int | None], inputs: Sequence[Message]
) -> int:
    """Non-system messages of ``view`` that are their input unchanged (the task included)."""
    return sum(
        1
        for m, src in zip(view, sources, strict=True)
        if src is not None and m.role != "system" and m == inputs[src]
    )


def estimator_fields(estimator: TokenEstimator) -> dict[str, Any]:
    """The record's estimator fields: its name, and its slope and overhead when linear."""
    slope, overhead = linear_params(estimator) or (None, None)
    return {"estimator": estimator.name, "estimator_slope": slope, "estimator_overhead": overhead}


def untouched_record(
    session_id: str, tokens: int, n_msgs: int, context_window: int, estimator: TokenEstimator
) -> CompactionRecord:
    """The record of a turn that decided tier NONE: nothing compacted, nothing changed."""
    return CompactionRecord(
        session_id=session_id,
        tier=CompactionTier.NONE,
        tokens_before=tokens,
        tokens_after=tokens,
        msgs_before=n_msgs,
        msgs_after=n_msgs,
        effective=False,
        compression_ratio=compression_ratio(tokens, tokens),
        context_window=context_window,
        **estimator_fields(estimator),
    )
