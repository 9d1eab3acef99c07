"""Metrics on hand-built strategy results: violations, artifact retention, anchor retention."""

from __future__ import annotations

from analytics.tuning import StrategyResult, TurnView, measure, totals
from analytics.tuning.metrics import anchor_counts, artifact_counts, message_artifacts
from compactor import Anchor, AnchorType, Message, ToolCall
from tests.analytics.tuning.builders import six_turn_session

SYSTEM = Message(role="system", content="sys")
TASK = Message(role="user", content="Fix the bug in src/app.py please")
CALL = Message(
    role="assistant",
    tool_calls=[ToolCall(id="c1", name="bash", arguments='{"command": "pytest -x tests"}')],
)
RESULT = Message(role="tool", content="ok", tool_call_id="c1")
EDIT = Message(
    role="assistant",
    tool_calls=[ToolCall(id="c2", name="edit", arguments='{"path": "src/cache.py"}')],
)
EDIT_RESULT = Message(role="tool", content="edited", tool_call_id="c2")
NOTE = Message(role="user", content="Summary: ran `pytest -x tests`")
HISTORY = [TASK, CALL, RESULT, EDIT, EDIT_RESULT, Message(role="assistant", content="done")]


def test_artifacts_are_paths_and_commands_of_calls_and_text() -> None:
    assert message_artifacts(TASK) == {"src/app.py"}
    assert message_artifacts(CALL) == {"pytest -x tests"}
    assert message_artifacts(EDIT) == {"src/cache.py"}
    assert message_artifacts(RESULT) == set()  # tool output is not an artifact


def test_artifacts_of_removed_messages_count_as_kept_only_if_still_in_the_view() -> None:
    result = StrategyResult(history=HISTORY, system=SYSTEM)
    result.turns.append(TurnView(index=5, view=[SYSTEM, TASK, NOTE]))
    # removed: CALL (pytest -x tests: in NOTE), EDIT (src/cache.py: gone)
    assert artifact_counts(result) == (2, 1)


def test_a_view_without_the_task_or_with_a_broken_exchange_is_a_violation() -> None:
    session = six_turn_session()
    result = StrategyResult(history=HISTORY, system=SYSTEM)
    result.turns.append(TurnView(index=3, view=[SYSTEM, TASK, CALL, RESULT]))  # fine
    result.turns.append(TurnView(index=5, view=[SYSTEM, CALL, RESULT, EDIT]))  # both
    result.turns.append(TurnView(index=5, view=[SYSTEM, RESULT]))  # both again
    assert measure(session, result, 1000).violations == 4


def test_anchor_retention_is_item_survival_from_one_summary_to_the_next() -> None:
    first = [Anchor(type=AnchorType.KEY_DECISION, content="- use redis\n- keep the API")]
    second = [Anchor(type=AnchorType.KEY_DECISION, content="- use redis")]
    assert anchor_counts([first, second]) == (2, 1)
    assert anchor_counts([first]) == (0, 0)


def test_totals_of_nothing_at_risk_retain_everything() -> None:
    session = six_turn_session()
    result = StrategyResult(history=HISTORY, system=SYSTEM)
    result.turns.append(TurnView(index=1, view=[SYSTEM, TASK]))
    figures = totals([measure(session, result, 100)], 100)
    assert figures["artifact_retention"] == 1.0
    assert figures["anchor_retention"] is None
    assert figures["tokens_billed"] == 8  # 3 + 32 bytes
