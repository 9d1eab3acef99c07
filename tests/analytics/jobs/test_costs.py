"""The cache rules of each price profile, and the costs job on hand-built frames."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from analytics.jobs.cache_model import CacheSplit, fit_calibration, split_cost, split_prompt
from analytics.jobs.costs import turn_costs
from analytics.jobs.prices import (
    ANTHROPIC,
    DEEPSEEK,
    NONE,
    OPENAI,
    PriceProfile,
    profile_name_for_model,
)


@pytest.mark.parametrize(
    ("profile", "prompt", "prefix", "expected"),
    [
        (ANTHROPIC, 5000, 4000, CacheSplit(4000, 1000, 0)),
        (ANTHROPIC, 5000, 1000, CacheSplit(0, 5000, 0)),  # under the 1024-token minimum
        (ANTHROPIC, 900, 800, CacheSplit(0, 0, 900)),  # too short to cache at all
        (OPENAI, 5000, 4000, CacheSplit(3968, 0, 1032)),  # 1024 + 23 x 128
        (OPENAI, 5000, 1000, CacheSplit(0, 0, 5000)),
        (DEEPSEEK, 5000, 4000, CacheSplit(3968, 0, 1032)),  # 62 x 64
        (DEEPSEEK, 5000, 63, CacheSplit(0, 0, 5000)),
        (NONE, 5000, 4000, CacheSplit(0, 0, 5000)),
        (DEEPSEEK, 100, 4000, CacheSplit(64, 0, 36)),  # a prefix never exceeds the prompt
    ],
)
def test_each_profile_splits_a_prompt_by_its_own_cache_rules(
    profile: PriceProfile, prompt: int, prefix: int, expected: CacheSplit
) -> None:
    assert split_prompt(profile, prompt, prefix) == expected


def test_the_none_profile_costs_the_tokens_billed_in_millions() -> None:
    assert split_cost(NONE, split_prompt(NONE, 2_000_000, 1_500_000)) == 2.0


def test_anthropic_bills_a_read_at_a_tenth_and_a_write_at_a_premium() -> None:
    read = split_cost(ANTHROPIC, CacheSplit(1_000_000, 0, 0))
    write = split_cost(ANTHROPIC, CacheSplit(0, 1_000_000, 0))
    assert read == pytest.approx(0.30)
    assert write == pytest.approx(3.75)


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("claude-sonnet-4-20250514", "anthropic"),
        ("openrouter/openai/claude-3-5-sonnet", "anthropic"),
        ("deepseek/deepseek-chat", "deepseek"),
        ("openrouter/deepseek/deepseek-coder", "deepseek"),
        ("gpt-4o", "openai"),
        ("gemini/gemini-1.5-pro-exp-0801", "none"),
        (None, "none"),
    ],
)
def test_a_sessions_profile_comes_from_its_model_name(model: str | None, profile: str) -> None:
    assert profile_name_for_model(model) == profile


def test_the_fit_finds_a_harness_overhead_and_a_slope() -> None:
    raw = [100, 1000, 5000, 9000]
    fitted = fit_calibration(raw, [int(1.2 * x + 15_000) for x in raw])
    assert fitted.slope == pytest.approx(1.2, abs=1e-6)
    assert fitted.overhead == pytest.approx(15_000, abs=1)


T0 = dt.datetime(2026, 12, 2, tzinfo=dt.UTC)


ViewRow = tuple[str, int, str]


def _views(compaction_id: str, before: list[ViewRow], after: list[ViewRow]) -> pl.DataFrame:
    """compaction_views rows of one compaction of session ``s``: (sha256, bytes, status)."""
    return pl.DataFrame(
        [
            {
                "compaction_id": compaction_id,
                "session_id": "s",
                "side": side,
                "position": p,
                "sha256": sha,
                "bytes": n,
                "status": status,
            }
            for side, rows in (("before", before), ("after", after))
            for p, (sha, n, status) in enumerate(rows)
        ]
    )


def _frames(
    gap_s: float = 1.0,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """One session, an 8,000-byte system prompt, six 8,000-byte history messages, three turns
    (after 2, 4 and 6 messages); a Full compaction before the third turn replaces history 0-3
    with a 2,000-byte summary and keeps 4-5."""
    turns = pl.DataFrame(
        {
            "session_id": ["s"] * 3,
            "seq": [2, 5, 9],
            "turn": [1, 2, 3],
            "messages": [3, 5, 4],
            "history_messages": [2, 4, 6],
            "occurred_at": [T0 + dt.timedelta(seconds=gap_s * k) for k in range(3)],
        }
    )
    messages = pl.DataFrame({"session_id": ["s"] * 7, "idx": list(range(7)), "bytes": [8000] * 7})
    before = [("sys", 8000, "system")] + [(f"h{i}", 8000, "summarized") for i in range(4)]
    before += [("h4", 8000, "kept"), ("h5", 8000, "kept")]
    after = [("sys", 8000, "system"), ("sum", 2000, "synthetic"), ("h4", 8000, "kept")]
    after += [("h5", 8000, "kept")]
    views = _views("c1", before, after)
    compactions = pl.DataFrame(
        {
            "id": ["c1"],
            "session_id": ["s"],
            "seq": [8],
            "tier": [3],
            "effective": [True],
            "summary_text": ["x" * 2000],
            "summarizer_model": ["extractive"],
            "summarizer_input_tokens": [0],
            "summarizer_output_tokens": [0],
        }
    )
    sessions = pl.DataFrame({"session_id": ["s"], "model": ["claude-x"], "system_bytes": [8000]})
    usage = pl.DataFrame(
        schema={
            "session_id": pl.String,
            "seq": pl.Int64,
            "raw_estimated_tokens": pl.Int64,
            "input_tokens": pl.Int64,
            "output_tokens": pl.Int64,
        }
    )
    return turns, messages, views, compactions, sessions, usage


def test_a_compaction_makes_the_next_prompt_a_cache_write_after_the_system_prompt() -> None:
    costs = turn_costs(*_frames())

    rows = costs.select(
        "turn", "prompt_tokens", "cache_read_tokens", "cache_write_tokens", "tier"
    ).rows()
    # turn 1: the warm 2,000-token system prompt is read; turn 2: the whole previous view;
    # turn 3: only the system prompt survives the compaction, the rest is written again
    assert rows == [(1, 6000, 2000, 4000, 0), (2, 10000, 6000, 4000, 0), (3, 6500, 2000, 4500, 3)]
    assert costs["profile"].unique().to_list() == ["anthropic"]


def test_the_uncompacted_bill_reads_the_whole_previous_history() -> None:
    costs = turn_costs(*_frames(), profile=ANTHROPIC)
    third = costs.row(2, named=True)
    expected = split_cost(ANTHROPIC, CacheSplit(10000, 4000, 0), third["output_tokens"])
    assert third["uncompacted_cost"] == pytest.approx(expected)
    assert third["cost"] < third["uncompacted_cost"]


def test_an_offline_summary_is_counted_as_what_an_llm_would_have_read_and_written() -> None:
    costs = turn_costs(*_frames())
    third = costs.row(2, named=True)
    assert (third["summarizer_input_tokens"], third["summarizer_output_tokens"]) == (8000, 500)
    assert third["summarizer_estimated"] is True


def test_a_gap_longer_than_the_ttl_reads_nothing() -> None:
    costs = turn_costs(*_frames(gap_s=600), profile=ANTHROPIC)
    assert costs["cache_read_tokens"].to_list() == [2000, 0, 0]


def _emergency_frames() -> tuple[
    pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame
]:
    """An 8,000-byte system prompt and six 8,000-byte messages; an Emergency before the third
    turn keeps the task (h0), drops h1 and h2, shortens h3 to 2,000 bytes and keeps h4-h5; the
    compactor counted 14,000 tokens before and 8,500 after. Window 12,000, reserve 1,000."""
    turns = pl.DataFrame(
        {
            "session_id": ["s"] * 3,
            "seq": [2, 5, 9],
            "turn": [1, 2, 3],
            "messages": [3, 5, 5],
            "history_messages": [2, 4, 6],
            "occurred_at": [T0 + dt.timedelta(seconds=k) for k in range(3)],
            "tokens": [6000, 10000, 8500],
            "history_tokens": [6000, 10000, 14000],
            "context_window": [12_000, None, 12_000],
            "reserve_tokens": [1000, 1000, 1000],
        }
    )
    messages = pl.DataFrame({"session_id": ["s"] * 7, "idx": list(range(7)), "bytes": [8000] * 7})
    before = [("sys", 8000, "system"), ("h0", 8000, "kept"), ("h1", 8000, "dropped")]
    before += [("h2", 8000, "dropped"), ("h3", 8000, "changed")]
    before += [("h4", 8000, "kept"), ("h5", 8000, "kept")]
    after = [("sys", 8000, "system"), ("h0", 8000, "kept"), ("h3'", 2000, "changed")]
    after += [("h4", 8000, "kept"), ("h5", 8000, "kept")]
    views = _views("e1", before, after)
    compactions = pl.DataFrame(
        {
            "id": ["e1"],
            "session_id": ["s"],
            "seq": [8],
            "tier": [4],
            "effective": [True],
            "tokens_before": [14_000],
            "tokens_after": [8_500],
        }
    )
    sessions = pl.DataFrame(
        {
            "session_id": ["s"],
            "model": ["claude-x"],
            "system_bytes": [8000],
            "context_window": [12_000],
        }
    )
    usage = pl.DataFrame(
        schema={
            "session_id": pl.String,
            "seq": pl.Int64,
            "raw_estimated_tokens": pl.Int64,
            "input_tokens": pl.Int64,
            "output_tokens": pl.Int64,
        }
    )
    return turns, messages, views, compactions, sessions, usage


def test_what_an_emergency_dropped_or_shortened_is_cut_on_the_turns_without_it() -> None:
    costs = turn_costs(*_emergency_frames(), profile=NONE)

    rows = costs.select(
        "prompt_tokens",
        "uncompacted_prompt_tokens",
        "cut_tokens",
        "estimated_cut_tokens",
        "estimated_emergency_cut_tokens",
        "tier",
    ).rows()
    # 16,000 bytes dropped and 6,000 taken off h3: 5,500 tokens, all the third turn left out
    assert rows == [
        (6000, 6000, 0, 0, 0, 0),
        (10000, 10000, 0, 0, 0, 0),
        (8500, 14000, 5500, 5500, 5500, 4),
    ]
    third = costs.row(2, named=True)
    assert third["cut_cost"] == pytest.approx(5500 / 1e6)
    assert third["cut_cost"] == pytest.approx(third["uncompacted_cost"] - third["cost"])


def test_a_turn_whose_uncompacted_prompt_and_reserve_exceed_the_window_is_flagged() -> None:
    costs = turn_costs(*_emergency_frames())
    # 6,000 and 10,000 tokens fit 12,000 with a 1,000 reserve (the second turn takes the
    # session's window); the whole 14,000-token history does not
    assert costs["uncompacted_over_window"].to_list() == [False, False, True]
