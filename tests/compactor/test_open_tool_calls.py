"""``prepare()`` while a tool call is still open (the agent looks at the view mid-turn): the
view is repaired for that call only, the open exchange is never checkpointed, and the real
result, once it arrives, is shown paired with its call."""

from __future__ import annotations

import json

import pytest

from compactor import (
    CompactionSession,
    CompactionTier,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    ToolCall,
    validate_history,
)
from compactor.pipeline.pairs import MISSING_RESULT
from tests.compactor.builders import TASK, ScriptedSummarizer, exchange, window_for


def _open_call(i: int) -> tuple[Message, Message]:
    call = ToolCall(id=f"open_{i}", name="bash", arguments=json.dumps({"command": "make test"}))
    asked = Message(role="assistant", content=f"running the tests ({i})", tool_calls=[call])
    answer = Message(role="tool", tool_call_id=call.id, name="bash", content=f"{i} passed\n" * 40)
    return asked, answer


def _batch(t: int) -> list[Message]:
    """Twelve finished exchanges."""
    return [m for i in range(12) for m in exchange(100 * t + i, 400)]


WINDOW = window_for([Message(role="user", content=TASK), *_batch(0)], 0.85)


def _session(window: int = WINDOW) -> CompactionSession:
    session = CompactionSession(
        ProgressiveCompactor(ScriptedSummarizer(), window), "sys", session_id="open"
    )
    session.append(Message(role="user", content=TASK))
    return session


def _texts(view: list[Message]) -> str:
    return "\n".join(m.content for m in view)


@pytest.mark.parametrize("turns", [1, 3])
def test_prepare_with_an_open_tool_call_never_checkpoints_the_placeholder(turns: int) -> None:
    session = _session()
    for t in range(turns):
        session.extend(_batch(t))
        asked, answer = _open_call(t)
        session.append(asked)
        view, record = session.prepare()  # mid-turn: the call has no result yet
        assert record.effective and record.tier >= CompactionTier.SOFT
        assert validate_history(view) == []
        at = view.index(asked)
        assert view[at + 1].tool_call_id == "open_" + str(t)
        assert view[at + 1].content == MISSING_RESULT  # repaired for the view sent now
        assert session.checkpoint <= session.history.index(asked)
        assert MISSING_RESULT not in _texts(session.view())

        session.append(answer)
        view, record = session.prepare()
        assert validate_history(view) == []
        at = view.index(asked)
        assert view[at + 1] == answer  # the real result, right after its call
        assert MISSING_RESULT not in _texts(view)
        assert "[orphaned tool result" not in _texts(view)


def test_an_open_call_with_some_results_in_keeps_them_and_fills_only_the_missing_one() -> None:
    session = _session()
    session.extend(_batch(0))
    calls = [ToolCall(id=f"par_{k}", name="bash", arguments="{}") for k in range(2)]
    session.append(Message(role="assistant", content="two at once", tool_calls=calls))
    first = Message(role="tool", tool_call_id="par_0", content="first result")
    session.append(first)
    view, record = session.prepare()
    assert record.effective
    assert validate_history(view) == []
    assert first in view
    assert [m.content for m in view if m.tool_call_id == "par_1"] == [MISSING_RESULT]
    second = Message(role="tool", tool_call_id="par_1", content="second result")
    session.append(second)
    view, _ = session.prepare()
    assert validate_history(view) == []
    assert view[-2:] == [first, second]


def test_manual_compact_with_an_open_call_leaves_the_call_open_for_its_result() -> None:
    session = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 50_000), "sys", session_id="m"
    )
    session.append(Message(role="user", content=TASK))
    for i in range(10):
        session.extend(exchange(i, 400))
    asked, answer = _open_call(0)
    session.append(asked)
    record = session.compact()
    assert record.effective
    session.append(answer)
    view, _ = session.prepare()
    assert validate_history(view) == []
    assert view[-2:] == [asked, answer]
