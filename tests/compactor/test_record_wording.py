"""What a record says matches what happened: a failed manual ``/compact`` in a window too small
names Emergency once; a no-op (its view is its input) carries no anchors and claims no change."""

from __future__ import annotations

from compactor import (
    Anchor,
    AnchorType,
    ByteEstimator,
    CompactionSession,
    CompactionTier,
    Message,
    ProgressiveCompactor,
)
from compactor.pipeline._work import RecordContext, Work, finish_outcome
from tests.compactor.builders import TASK, ScriptedSummarizer, conversation, exchange


def test_a_failed_manual_compact_in_a_too_small_window_says_emergency_once() -> None:
    system = "You are a coding agent. " * 120
    window = len(system) // 4  # the system prompt alone fills the whole window
    compactor = ProgressiveCompactor(
        ScriptedSummarizer(error=RuntimeError("model offline")), window
    )
    session = CompactionSession(compactor, system, session_id="tiny")
    session.append(Message(role="user", content=TASK))
    session.extend([m for i in range(8) for m in exchange(i, 600)])

    record = session.compact()

    assert record.tier == CompactionTier.EMERGENCY
    assert record.fallback == "emergency"
    assert len(record.error_codes) == len(set(record.error_codes))
    assert record.error_codes.count("window_too_small") == 1
    assert record.error.count("this window is too small") == 1


def test_a_no_op_record_carries_no_anchors_and_claims_no_change() -> None:
    msgs = conversation(3, 200)
    work = Work.start(msgs, CompactionTier.EMERGENCY, 1_000, "auto")
    # a step that was undone: the view is the input again
    work.anchors = [Anchor(type=t, content=f"about {t.value}") for t in AnchorType]
    work.fail("summary_not_smaller", "LLM summary failed in TierFull: no reduction")
    work.fail("emergency_truncation", "emergency fallback: forced truncation")
    ctx = RecordContext(
        session_id="s", context_window=4_000, estimator=ByteEstimator(), config_hash=""
    )

    record = finish_outcome(work, ctx, 1_000, 6, effective=True).record

    assert record.effective is False
    assert record.anchors == []
    assert record.error_codes == ["summary_not_smaller"]
    assert record.error == "LLM summary failed in TierFull: no reduction"
