"""Counterfactual replays of an emergency's prefix, and rebuilding a session from its frame.

The issue's case: an emergency caused by ONE 200 kB tool result. A task, three small tool
exchanges, then a ``bash`` call whose result is 200,000 bytes, at a 52,000-token window: the
result alone is 50,000 tokens, so the next turn is over 0.95 and Emergency fires.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from analytics.replay.changes import Change, catalogue
from analytics.replay.counterfactual import (
    CounterfactualError,
    CounterfactualReport,
    PrefixOutcome,
    Trial,
    counterfactuals,
    messages_from_frame,
)
from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    ToolCall,
    estimate_tokens,
)

WINDOW = 52_000
SYSTEM = Message(role="system", content="You are a coding agent.")
BIG = ("x" * 99 + "\n") * 2000


def _session_with_one_big_result() -> list[Message]:
    history = [Message(role="user", content="Fix the failing test in parser.py")]
    for i in range(3):
        call = ToolCall(id=f"c{i}", name="read_file", arguments='{"path": "parser.py"}')
        history.append(Message(role="assistant", content=f"step {i}", tool_calls=(call,)))
        history.append(Message(role="tool", content=f"small result {i}", tool_call_id=f"c{i}"))
    run = ToolCall(id="big", name="bash", arguments='{"cmd": "pytest -v"}')
    history.append(Message(role="assistant", content="run the tests", tool_calls=(run,)))
    history.append(Message(role="tool", content=BIG, tool_call_id="big"))
    history.append(Message(role="assistant", content="the tests ran"))
    return history


def test_the_big_result_really_causes_an_emergency(tmp_path: Path) -> None:
    history = _session_with_one_big_result()
    assert len(BIG.encode()) == 200_000
    assert estimate_tokens([SYSTEM, *history[:8]]) / WINDOW < 0.6
    assert estimate_tokens([SYSTEM, *history[:9]]) / WINDOW >= 0.95
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(), WINDOW, offloader=CompactionOffloader(tmp_path, "s")
    )
    session = CompactionSession(compactor, SYSTEM, session_id="s")
    tiers = []
    for msg in history:
        if msg.role == "assistant":
            tiers.append(session.prepare()[1].tier)
        session.append(msg)
    assert tiers == [CompactionTier.NONE] * 4 + [CompactionTier.EMERGENCY]
    assert [r.tier for r in session.records] == [CompactionTier.EMERGENCY]


def test_tool_time_offload_is_the_smallest_change_that_avoids_it() -> None:
    report = counterfactuals(
        _session_with_one_big_result(), CompactorConfig(), WINDOW, 9, system=SYSTEM
    ).as_dict()
    avoided = {c["change"]: c["emergency_avoided"] for c in report["counterfactuals"]}
    # Compacting earlier cannot help: the one result alone is over the emergency threshold.
    assert avoided == {
        "min_tail_halved": False,
        "offload_threshold_halved": False,
        "tool_time_offload": True,
        "warn_lower": False,
        "soft_lower": False,
        "full_lower": False,
    }
    assert report["smallest_change"] == "tool_time_offload"
    assert report["smallest_change_verified"] is True
    applied = CompactorConfig.model_validate(report["smallest_change_config"])
    assert (
        applied != CompactorConfig() or "offloaded as appended" in report["smallest_change_detail"]
    )
    assert report["summarizer"] == "extractive"
    assert report["baseline"]["emergency"] is True
    assert report["skipped"] == []
    details = {c["change"]: c["detail"] for c in report["counterfactuals"]}
    assert details["warn_lower"] == "warn 0.6 -> 0.5, fallback_target 0.5 -> 0.45"
    assert details["soft_lower"] == "soft 0.7 -> 0.6, warn 0.6 -> 0.55"
    billed = {c["change"]: c["tokens_billed"] for c in report["counterfactuals"]}
    assert all(tokens > 0 for tokens in billed.values())
    json.dumps(report)


def test_the_replay_stops_at_the_emergency_turn() -> None:
    history = _session_with_one_big_result()
    report = counterfactuals(history[:7], CompactorConfig(), WINDOW, 7, system=SYSTEM)
    assert report.baseline.emergency is False
    assert report.baseline.turns == 4  # before each of 3 assistant messages, then the end
    assert report.smallest_change is None  # nothing reproduced: no change can claim to avoid it
    found = report.as_dict()
    assert found["reproduced"] is False
    assert found["counterfactuals"], "the single changes are still listed"
    assert all(c["emergency_avoided"] is None for c in found["counterfactuals"])
    assert found["smallest_change_config"] is None and found["smallest_change_verified"] is None


def test_every_change_is_tried_when_the_config_leaves_room() -> None:
    config = CompactorConfig(warn=0.5, soft=0.7, full=0.85, fallback_target=0.3)
    changes, skipped = catalogue(config)
    singles = [c.name for c in changes if c.kind == "single"]
    assert singles == [
        *("min_tail_halved", "offload_threshold_halved", "tool_time_offload"),
        *("warn_lower", "soft_lower", "full_lower"),
    ]
    assert skipped == []
    by_name = {c.name: c for c in changes}
    assert by_name["min_tail_halved"].config.min_tail_messages == 3
    assert by_name["offload_threshold_halved"].config.offload_threshold == 2000
    tool_time = by_name["tool_time_offload"]
    assert tool_time.tool_time_offload or tool_time.config != config
    assert by_name["warn_lower"].config.warn == 0.4
    assert by_name["soft_lower"].config.soft == 0.6
    assert by_name["full_lower"].config.full == 0.75


def test_changes_that_cannot_be_made_are_skipped_with_the_reason() -> None:
    config = CompactorConfig(
        warn=0.1, soft=0.6, full=0.8, min_tail_messages=1, offload_threshold=1,
        fallback_target=0.05, emergency_target=0.05,
    )  # fmt: skip
    changes, skipped = catalogue(config)
    singles = [c.name for c in changes if c.kind == "single"]
    assert singles == ["tool_time_offload", "soft_lower", "full_lower"]
    assert [name for name, _ in skipped][:3] == [
        "min_tail_halved",
        "offload_threshold_halved",
        "warn_lower",
    ]
    assert "already at its minimum" in skipped[0][1]
    assert "warn 0.1 -> 0.0, fallback_target 0.05 -> -0.05 would be invalid" in skipped[2][1]


def test_the_smallest_change_follows_the_order_of_preference() -> None:
    config = CompactorConfig()
    still = PrefixOutcome(frozenset({2}), 10, 2)
    avoided = PrefixOutcome(frozenset(), 10, 2)
    trials = [
        Trial(Change("min_tail_halved", "", config), still, False),
        Trial(Change("tool_time_offload", "", config, True), avoided, True),
        Trial(Change("warn_lower", "", config), avoided, True),
    ]
    assert CounterfactualReport("extractive", still, trials).smallest_change == (
        "tool_time_offload"
    )
    nothing = [Trial(t.change, still, False) for t in trials]
    assert CounterfactualReport("extractive", still, nothing).smallest_change is None
    not_reproduced = CounterfactualReport("extractive", avoided, trials)
    assert not_reproduced.smallest_change is None


def test_an_emergency_index_outside_the_history_is_refused() -> None:
    with pytest.raises(CounterfactualError, match="emergency_index 12 is outside"):
        counterfactuals(_session_with_one_big_result(), CompactorConfig(), WINDOW, 12)


def _frame(content: list[str | None]) -> pl.DataFrame:
    calls = json.dumps([{"id": "t1", "name": "grep", "arguments": '{"q": "x"}'}])
    return pl.DataFrame(
        {
            "session_id": ["s", "s", "s", "other"],
            "idx": [2, 0, 1, 0],
            "role": ["user", "user", "assistant", "user"],
            "content": content,
            "tool_calls": [None, None, calls, None],
            "tool_call_id": ["t1", None, None, None],
            "is_error": [True, False, None, False],
            "name": ["grep", None, None, None],
        }
    )


def test_a_session_is_rebuilt_from_its_messages_frame_in_history_order() -> None:
    rebuilt = messages_from_frame(_frame(["no match", "find x", "searching", "hi"]), "s")
    assert rebuilt == [
        Message(role="user", content="find x"),
        Message(
            role="assistant",
            content="searching",
            tool_calls=(ToolCall(id="t1", name="grep", arguments='{"q": "x"}'),),
        ),
        Message(role="user", content="no match", tool_call_id="t1", is_error=True, name="grep"),
    ]


def test_a_metadata_capture_session_is_refused() -> None:
    with pytest.raises(CounterfactualError) as caught:
        messages_from_frame(_frame([None, None, None, "hi"]), "s")
    assert str(caught.value) == (
        "counterfactuals need content; this session was captured as metadata"
    )
