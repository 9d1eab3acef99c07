"""Inputs at the edge of the contract keep the view sane: a compactor with no context window,
and a summary with a ``### `` section that is not one of the five anchors."""

from __future__ import annotations

import pytest

from compactor import (
    AnchorType,
    CompactionSession,
    CompactionTier,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    parse_anchors_and_summary,
)
from tests.compactor.builders import GOOD_SUMMARY, TASK, ScriptedSummarizer, conversation


@pytest.mark.parametrize("window", [0, -5])
def test_compact_force_without_a_context_window_returns_the_input_unchanged_and_says_why(
    window: int,
) -> None:
    msgs = conversation(12, result_bytes=3000)
    pc = ProgressiveCompactor(ExtractiveSummarizer(), window)
    assert pc.compact_force(msgs) == msgs
    out = pc.compact_detailed(msgs, tier=CompactionTier.EMERGENCY, trigger="manual")
    assert out.view == msgs
    assert out.record.effective is False
    assert out.record.error_codes == ["no_context_window"]
    assert f"context_window is {window}" in out.record.error
    assert "returned unchanged" in out.record.error


def test_manual_compact_without_a_context_window_keeps_the_whole_task() -> None:
    session = CompactionSession(ProgressiveCompactor(ScriptedSummarizer(), 0), "sys")
    session.extend(conversation(8)[1:])
    record = session.compact()
    view, _ = session.prepare()
    assert record.effective is False
    assert view[1].content == TASK
    assert view == session.view()


def _with_unknown_section(after: str) -> str:
    head, rest = GOOD_SUMMARY.split(f"### {after}\n", 1)
    body, tail = rest.split("\n\n", 1)
    return f"{head}### {after}\n{body}\n\n### Open Questions\n- is the cache shared?\n\n{tail}"


@pytest.mark.parametrize("after", ["Key Decisions", "Next Steps"])
def test_an_unknown_anchor_section_never_leaks_into_the_anchor_before_it(after: str) -> None:
    text = _with_unknown_section(after)
    anchors, summary = parse_anchors_and_summary(text)
    expected, expected_summary = parse_anchors_and_summary(GOOD_SUMMARY)
    assert anchors == expected
    assert summary == expected_summary
    joined = "\n".join(a.content for a in anchors)
    assert "Open Questions" not in joined and "is the cache shared" not in joined


def test_a_sub_heading_inside_the_summary_stays_in_the_summary() -> None:
    text = GOOD_SUMMARY + "\n\n### Details\nthe cache is per process"
    anchors, summary = parse_anchors_and_summary(text)
    assert summary.endswith("### Details\nthe cache is per process")
    assert anchors[-1].type == AnchorType.NEXT_STEP
    assert anchors[-1].content == "- run the tests again"


def test_a_deeper_heading_inside_an_anchor_is_part_of_that_anchor() -> None:
    text = GOOD_SUMMARY.replace(
        "### Key Decisions\n", "### Key Decisions\n#### Storage\n- SQLite, not files\n"
    )
    anchors, _ = parse_anchors_and_summary(text)
    decisions = next(a for a in anchors if a.type == AnchorType.KEY_DECISION)
    assert "SQLite, not files" in decisions.content
    assert "keep the public API" in decisions.content


def test_messages_keep_their_text_when_the_window_is_zero() -> None:
    msgs = [Message(role="system", content="s"), Message(role="user", content="x" * 500)]
    assert ProgressiveCompactor(ExtractiveSummarizer(), 0).compact_force(msgs)[1].content == (
        "x" * 500
    )
