"""Each strategy on the hand-built six-turn session, with figures worked out by hand.

View sizes (bytes // 4): system 40 + task 60 = 100 bytes (25 tokens); each exchange adds 423
bytes; a masked result is 27 bytes (the 25-byte placeholder and its id); a summary message
100 bytes. So the uncompacted views are 25, 130, 236, 342, 448, 553 tokens (1734).
"""

from __future__ import annotations

import random

import pytest

from analytics.importers import ImportedSession
from analytics.tuning import (
    NoCompaction,
    ObservationMasking,
    OpenHandsCondenser,
    ProgressiveStrategy,
    ThresholdSummary,
    measure,
)
from analytics.tuning.strategies import (
    split_system,
    task_index,
    truncate_to_window,
    turn_indices,
    view_bytes,
    window_bytes,
)
from compactor import CompactorConfig, Message, ToolCall, estimate_tokens, validate_history
from tests.analytics.tuning.builders import FixedSummarizer, six_turn_session


def _view_tokens(strategy: object, window: int) -> list[int]:
    result = strategy.run(six_turn_session(), window)  # type: ignore[attr-defined]
    return [estimate_tokens(t.view) for t in result.turns]


def test_no_compaction_drops_oldest_exchanges_pair_safely_to_fit_the_window() -> None:
    session = six_turn_session()
    result = NoCompaction().run(session, 400)
    metrics = measure(session, result, 400)
    assert [estimate_tokens(t.view) for t in result.turns] == [25, 130, 236, 342, 342, 342]
    assert metrics.tokens_billed == 1417
    assert metrics.uncompacted_tokens == 1734
    assert metrics.emergencies == 2
    assert metrics.turns_over_window == 0
    assert metrics.violations == 0
    last = result.turns[-1].view
    assert [m.content for m in last[:2]] == ["S" * 40, "T" * 60]  # system and task kept
    assert last[2].tool_calls[0].id == "c3"  # starts at a call, never at an orphaned result


def test_observation_masking_m1_keeps_only_the_newest_tool_result() -> None:
    session = six_turn_session()
    result = ObservationMasking(m=1).run(session, 1000)
    metrics = measure(session, result, 1000)
    assert [estimate_tokens(t.view) for t in result.turns] == [25, 130, 142, 154, 166, 178]
    assert metrics.tokens_billed == 795
    assert metrics.summarizer_input_tokens == 0
    assert metrics.emergencies == 0
    assert metrics.violations == 0


def test_observation_masking_has_no_window_guard() -> None:
    session = six_turn_session()
    metrics = measure(session, ObservationMasking(m=10).run(session, 400), 400)
    assert metrics.tokens_billed == 1734  # five results: nothing masked
    assert metrics.turns_over_window == 2  # 448 and 553 tokens


def test_threshold_summary_bills_the_summariser_reading_and_writing() -> None:
    session = six_turn_session()
    strategy = ThresholdSummary(0.835, keep_last=2, summarizer=FixedSummarizer)
    result = strategy.run(session, 500)
    metrics = measure(session, result, 500)
    assert [estimate_tokens(t.view) for t in result.turns] == [25, 130, 236, 342, 155, 261]
    assert metrics.view_tokens == 1149
    assert metrics.summarizer_input_tokens == 317  # three exchanges: 1269 bytes
    assert metrics.summarizer_output_tokens == 20
    assert metrics.tokens_billed == 1486
    assert len(result.summaries) == 1
    assert metrics.violations == 0


def test_openhands_condenser_summarises_the_middle_and_keeps_the_newest_half() -> None:
    session = six_turn_session()
    strategy = OpenHandsCondenser(max_events=8, summarizer=FixedSummarizer)
    result = strategy.run(session, 1000)
    metrics = measure(session, result, 1000)
    assert [estimate_tokens(t.view) for t in result.turns] == [25, 130, 236, 342, 261, 367]
    assert metrics.summarizer_input_tokens == 211  # two exchanges: 846 bytes
    assert metrics.tokens_billed == 1592
    fifth = result.turns[4].view
    assert [len(fifth), fifth[2].content.startswith("[Context Summary]")] == [7, True]


def test_progressive_strategy_goes_through_the_compactor_and_counts_its_summaries() -> None:
    session = six_turn_session()
    strategy = ProgressiveStrategy(CompactorConfig(min_tail_messages=2))
    result = strategy.run(session, 500)
    metrics = measure(session, result, 500)
    assert len(result.turns) == 6
    assert metrics.summarizer_input_tokens > 0
    assert metrics.tokens_billed < metrics.uncompacted_tokens
    assert metrics.turns_over_window == 0
    assert all(not validate_history(t.view) for t in result.turns)
    assert metrics.violations == 0


def test_the_config_s_tool_offload_threshold_shrinks_every_view_after_a_large_result() -> None:
    session = six_turn_session()
    config = CompactorConfig(tool_offload_preview_lines=0, tool_offload_preview_chars=0)
    offloading = config.model_copy(update={"tool_offload_threshold": 100})
    plain = measure(session, ProgressiveStrategy(config).run(session, 100_000), 100_000)
    hooked = measure(session, ProgressiveStrategy(offloading).run(session, 100_000), 100_000)
    assert plain.tokens_billed == 1734  # a large window: nothing to compact
    assert hooked.tokens_billed < plain.tokens_billed
    assert "tool_offload_threshold=100" in ProgressiveStrategy(offloading).name


def _truncated_per_turn(
    session: ImportedSession, window: int
) -> list[tuple[int, bool, list[Message]]]:
    """NoCompaction's views as its definition says, re-measuring every turn from scratch."""
    system, history = split_system(session)
    head = [system] if system is not None else []
    task = task_index(history)
    out = []
    for i in turn_indices(history):
        view, dropped = [*head, *history[:i]], False
        if view_bytes(view) > window_bytes(window):
            if task is not None and task < i:
                view, dropped = truncate_to_window(
                    [*head, history[task]], history[task + 1 : i], window_bytes(window)
                )
            else:
                view, dropped = truncate_to_window(head, history[:i], window_bytes(window))
        out.append((i, dropped, view))
    return out


def _odd_session(seed: int) -> ImportedSession:
    """Sizes from empty to one huge result, results that cannot be a suffix's first message,
    the task late or missing, surrogates: what the running sums must measure exactly."""
    rng = random.Random(seed)
    msgs = [Message(role="system", content="S" * rng.choice([0, 40]))]
    if rng.random() < 0.2:
        msgs.append(Message(role="assistant", content="hello first"))
    if rng.random() < 0.8:
        msgs.append(Message(role="user", content="## Task\n" + "t" * rng.randrange(0, 3000)))
    for k in range(rng.randrange(5, 40)):
        call = ToolCall(id=f"c{k}\ud800", name="run", arguments='{"cmd": "ls é"}')
        msgs.append(Message(role="assistant", content="", tool_calls=[call]))
        size = rng.choice([0, 1, 50, 400, 5000, 200_000])
        msgs.append(Message(role="tool", content="r" * size, tool_call_id=f"c{k}\ud800"))
        if rng.random() < 0.3:
            msgs.append(Message(role="user", content="more " * rng.randrange(0, 100)))
    msgs.append(Message(role="assistant", content="done"))
    return ImportedSession(
        session_id=f"odd{seed}", source_path="built", format="openai", messages=msgs
    )


@pytest.mark.parametrize("window", [10, 400, 2_000, 60_000])
def test_no_compaction_is_its_per_turn_definition_on_odd_sessions(window: int) -> None:
    for seed in range(12):
        session = _odd_session(seed)
        fast = NoCompaction().run(session, window)
        assert [(t.index, t.emergency, t.view) for t in fast.turns] == _truncated_per_turn(
            session, window
        ), seed
