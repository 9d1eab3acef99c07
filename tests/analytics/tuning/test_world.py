"""The agent's world of a session: with the transcript's usage every strategy counts (and the
rivals decide on) the prompt the provider reported, hidden harness prompt included; without it,
or uncalibrated, bytes / 4. Figures are computed here from the hand-built session's bytes."""

from __future__ import annotations

import pytest

from analytics.importers import ImportedSession
from analytics.importers.session import TurnUsage
from analytics.tuning import NoCompaction, ProgressiveStrategy, ThresholdSummary, measure
from analytics.tuning.strategies import view_bytes
from analytics.tuning.world import SessionWorld, session_world
from compactor import CompactorConfig
from tests.analytics.tuning.builders import six_turn_session

HIDDEN = 1000
"""Tokens the provider counts on every call that the transcript's messages do not show."""


def _with_usage(session: ImportedSession) -> ImportedSession:
    """``session`` with a report for each of its model calls: its prompt's bytes / 4 plus
    ``HIDDEN`` tokens, as a harness with its own system prompt would be billed."""
    usage = [
        TurnUsage(
            message_index=i,
            input_tokens=view_bytes(session.messages[:i]) // 4 + HIDDEN,
            output_tokens=7,
        )
        for i, m in enumerate(session.messages)
        if m.role == "assistant"
    ]
    return session.model_copy(update={"usage": usage})


def test_every_turn_after_the_first_report_counts_the_hidden_prompt() -> None:
    session = _with_usage(six_turn_session())
    window = 100_000  # nothing compacts: the views are the history

    plain = measure(session, NoCompaction().run(session, window, calibrate=False), window)
    counted = measure(session, NoCompaction().run(session, window), window)
    product = measure(session, ProgressiveStrategy(CompactorConfig()).run(session, window), window)

    # the first turn is counted before any report; each of the other five carries HIDDEN
    # (give or take a token of the least-squares fit's rounding)
    assert plain.view_tokens == sum(
        view_bytes(session.messages[:i]) // 4 for i in (2, 4, 6, 8, 10, 12)
    )
    assert counted.view_tokens - plain.view_tokens == pytest.approx(5 * HIDDEN, abs=5)
    assert product.view_tokens == counted.view_tokens  # the replay's own counts, the same world
    assert product.uncompacted_tokens == counted.uncompacted_tokens


def test_a_threshold_rival_fires_on_the_prompt_the_provider_counts() -> None:
    session = _with_usage(six_turn_session())
    largest = view_bytes(session.messages[:12]) // 4  # the last turn's view, in bytes / 4
    window = 1300  # 83.5% of it is 1,085: above every view, below a counted one from turn 2
    assert largest < 0.835 * window < HIDDEN + view_bytes(session.messages[:4]) // 4

    blind = ThresholdSummary(0.835).run(session, window, calibrate=False)
    seeing = ThresholdSummary(0.835).run(session, window)

    assert blind.summarizer_input_tokens == 0 and not blind.summaries
    assert seeing.summarizer_input_tokens > 0


def test_without_usage_or_uncalibrated_the_world_is_bytes_over_four() -> None:
    bare = six_turn_session()
    assert session_world(bare) == SessionWorld()
    assert session_world(_with_usage(bare), calibrate=False) == SessionWorld()
    assert SessionWorld().tokens(3, 4003) == 1000
    assert SessionWorld().window_bytes(3, 1000) == 4003


@pytest.mark.parametrize("window", [1, 999, 1000, 1234, 50_000])
def test_the_window_in_bytes_is_the_most_a_turn_counts_within_it(window: int) -> None:
    world = session_world(_with_usage(six_turn_session()))
    assert len(world.estimators) == 6
    turn = 3  # reports seen: its estimator counts HIDDEN on top
    most = world.window_bytes(turn, window)

    if window < HIDDEN:
        assert most == 0 and world.tokens(turn, 0) > window
    else:
        assert world.tokens(turn, most) <= window < world.tokens(turn, most + 1)
    assert world.calibration.overhead == pytest.approx(HIDDEN, abs=1)
    assert world.outputs == dict.fromkeys(range(1, 7), 7)
