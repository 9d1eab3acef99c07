"""Soft widens to the whole head when its older half holds too little to be worth a summary."""

from __future__ import annotations

from pathlib import Path

from compactor import (
    CompactionTier,
    CompactorConfig,
    Message,
    ProgressiveCompactor,
    estimate_tokens,
    validate_history,
)
from tests.compactor.builders import TASK, ScriptedSummarizer, exchange, window_for


def _lopsided() -> list[Message]:
    """Small old exchanges, then big recent ones: the older half of the head is tiny."""
    msgs = [Message(role="system", content="sys"), Message(role="user", content=TASK)]
    for i in range(6):
        msgs += exchange(i, 40)
    for i in range(6, 12):
        msgs += exchange(i, 3000)
    return msgs


def test_soft_widens_when_the_older_half_is_too_small_to_pay(tmp_path: Path) -> None:
    msgs = _lopsided()
    summarizer = ScriptedSummarizer()
    pc = ProgressiveCompactor(summarizer, window_for(msgs, 0.75))
    view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.SOFT
    assert record.fallback == "soft widened to the whole head"
    head = len(msgs) - 1 - record.preserved_tail
    assert record.summarized == head
    assert len(summarizer.calls) == 1
    assert estimate_tokens(view) < estimate_tokens(msgs)
    assert validate_history(view) == []


def test_without_widening_the_tiny_half_summary_does_not_pay(tmp_path: Path) -> None:
    """What widening avoids: summarising only the tiny half cannot beat its own compaction
    message, so the compactor must fall back to trimming messages without a summary."""
    msgs = _lopsided()
    pc = ProgressiveCompactor(
        ScriptedSummarizer(), window_for(msgs, 0.75), config=CompactorConfig(soft_min_gain=0.0)
    )
    _view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.SOFT
    assert record.fallback == "budget_trim"
    assert record.error.endswith("the summary did not reduce the context")
    assert record.anchors == []
