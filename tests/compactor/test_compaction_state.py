"""The compaction message as state: markdown tasks survive every compaction, restarts parse back.

Issue 6 defect 1: the ``## Original Request`` section used to be re-read from the previous
compaction message by its headers, so a task was cut at its first ``## `` line from the second
compaction on, and a task's own ``## Summary`` / ``### Next Steps`` were read as the previous
summary and anchors.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor import (
    Anchor,
    AnchorType,
    CompactionSession,
    CompactionTier,
    ExtractiveSummarizer,
    MemorySink,
    Message,
    ProgressiveCompactor,
)
from compactor.events import CompactionRecorded
from compactor.summaries._message import (
    COMPACTION_MARKER,
    CompactionState,
    find_task_index,
    parse_compaction_message,
    render_compaction_message,
)
from tests.compactor.builders import ScriptedSummarizer, exchange
from tests.fuzzing import examples

MARKDOWN_TASK = """Fix the timezone bug in `parse_date`.

## Expected Behaviour
Dates with an offset keep it.

## Steps to reproduce
1. run `pytest tests/test_dates.py`

## Summary
THIS IS THE TASK'S OWN SUMMARY SECTION

### Next Steps
- the task's own next steps, not the agent's

~~~
a tilde fence in the task
~~~
[Context Compaction]
## Original Request
the end of the task"""

# Pieces that break a header-based reader: headers, the marker, fences of every length.
_TRICKY = st.sampled_from(
    [
        "## Summary",
        "## Original Request",
        "### Next Steps",
        "### User Intent",
        "## Anchors",
        "## Offloaded References",
        COMPACTION_MARKER,
        "~~~",
        "~~~~",
        "~~~~~~~~",
        "N/A",
        "",
        " ",
        "\r",
        "text",
    ]
)
_TEXT = st.lists(st.one_of(_TRICKY, st.text(max_size=12)), max_size=12).map("\n".join)


def _not_na(text: str) -> bool:
    return text.strip() not in ("", "N/A")


@settings(max_examples=examples(300), deadline=None)
@given(
    task=_TEXT.filter(_not_na),
    summary=_TEXT.filter(_not_na),
    intent=_TEXT,
    refs=st.lists(_TEXT.filter(lambda t: "\n" not in t and t != ""), max_size=3),
    active=_TEXT.filter(lambda t: t.strip() == t),
)
def test_a_rendered_compaction_message_parses_back_to_the_same_state(
    task: str, summary: str, intent: str, refs: list[str], active: str
) -> None:
    anchors = [Anchor(type=t, content="N/A") for t in AnchorType]
    parsed_intent = parse_compaction_message(
        render_compaction_message(
            CompactionState(anchors=[Anchor(type=AnchorType.USER_INTENT, content=intent)])
        )
    )
    assert parsed_intent is not None
    state = CompactionState(
        anchors=[parsed_intent.anchors[0], *anchors[1:]],
        summary=summary,
        task=task,
        references=list(dict.fromkeys(refs)),
        active_tasks=active,
    )

    message = render_compaction_message(state)

    assert message.content.startswith(COMPACTION_MARKER + "\n## Anchors")
    assert parse_compaction_message(message) == state


@settings(max_examples=examples(200), deadline=None)
@given(text=_TEXT)
def test_a_user_message_that_merely_looks_like_a_compaction_is_a_task(text: str) -> None:
    looks_like = Message(role="user", content=f"{COMPACTION_MARKER}\n## Summary\n{text}")

    assert parse_compaction_message(looks_like) is None
    assert find_task_index([Message(role="system", content="s"), looks_like]) == 1


def _session(window: int) -> CompactionSession:
    compactor = ProgressiveCompactor(ExtractiveSummarizer(), window)
    session = CompactionSession(compactor, "You are a coding agent.", session_id="md")
    session.append(Message(role="user", content=MARKDOWN_TASK))
    return session


def test_a_markdown_task_is_carried_whole_through_every_compaction() -> None:
    session = _session(6_000)
    carried: list[str] = []
    for i in range(120):
        session.extend(exchange(i, 600))
        view, record = session.prepare()
        if record.effective and record.summarized:
            state = parse_compaction_message(view[1])
            assert state is not None
            carried.append(state.task)

    assert len(carried) >= 3, "the session must compact several times"
    assert carried == [MARKDOWN_TASK] * len(carried)
    state = session.compactor.state
    assert state is not None
    assert "THIS IS THE TASK'S OWN SUMMARY" not in state.summary
    next_steps = next(a for a in state.anchors if a.type == AnchorType.NEXT_STEP)
    assert "the task's own next steps" not in next_steps.content


def test_a_compactor_restarted_on_a_saved_view_reads_the_previous_compaction_exactly() -> None:
    session = _session(6_000)
    for i in range(40):
        session.extend(exchange(i, 600))
        session.prepare()
    saved = session.view()
    assert parse_compaction_message(saved[1]) is not None
    before = parse_compaction_message(saved[1])

    summarizer = ScriptedSummarizer()
    fresh = ProgressiveCompactor(summarizer, 6_000)
    more = [m for i in range(97, 100) for m in exchange(i, 2_000)]
    out = fresh.compact_detailed(saved + more, tier=CompactionTier.FULL)

    assert out.record.effective
    _transcript, previous = summarizer.calls[-1]
    assert before is not None and previous is not None
    assert previous.anchors == before.anchors and previous.summary == before.summary
    after = parse_compaction_message(out.view[1])
    assert after is not None and after.task == MARKDOWN_TASK
    assert all(not m.content.startswith(COMPACTION_MARKER) for m in _transcript)


@pytest.mark.parametrize("capture", ["full", "metadata"])
def test_the_compaction_event_carries_each_anchor_item_once_parsed(capture: str) -> None:
    sink = MemorySink()
    compactor = ProgressiveCompactor(ScriptedSummarizer(), 4_000)
    session = CompactionSession(
        compactor,
        "sys",
        session_id="items",
        event_sink=sink,
        capture=capture,  # type: ignore[arg-type]
    )
    session.append(Message(role="user", content="Fix the cache"))
    for i in range(30):
        session.extend(exchange(i, 400))
        session.prepare()

    payloads = [e.payload for e in sink.of_type("compaction_recorded")]
    summaries = [p for p in payloads if isinstance(p, CompactionRecorded) and p.record.summarized]
    assert summaries
    payload = summaries[0]
    got = [(i.anchor_type, i.item) for i in payload.anchor_items]
    if capture == "metadata":
        assert got == []
        return
    assert got == [
        ("user_intent", "Fix the failing cache test"),
        ("execution_progress", "read src/cache.py"),
        ("key_decision", "keep the public API: callers depend on it"),
        ("tried_solution", "clearing the cache on write: test still failed"),
        ("next_step", "run the tests again"),
    ]


def test_a_previous_compaction_message_is_folded_not_dropped() -> None:
    pc = ProgressiveCompactor(ScriptedSummarizer(), 100_000)
    first = pc.compact_detailed(
        [Message(role="system", content="s"), Message(role="user", content="task")]
        + [m for i in range(20) for m in exchange(i, 800)],
        tier=CompactionTier.FULL,
    )
    again = pc.compact_detailed(
        [*first.view, *[m for i in range(20, 40) for m in exchange(i, 800)]],
        tier=CompactionTier.FULL,
    )

    statuses = again.status_of_inputs()
    assert parse_compaction_message(first.view[1]) is not None
    assert statuses[1] == "summarized"
    assert "dropped" not in statuses
    # the folded compaction message is marked summarized but not counted as summarised content
    assert again.record.summarized == statuses.count("summarized") - 1
    # from the inputs: all but the system message, the folded message and the kept tail
    assert again.record.summarized == len(again.inputs) - 2 - again.record.preserved_tail
    assert again.record.preserved_tail > 0
