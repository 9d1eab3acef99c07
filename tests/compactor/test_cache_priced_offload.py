"""``cache_priced_offload`` holds a Warn offload that would not pay for itself against the cache.

An offload rewrites the cached prompt from its first offloaded result on: that turn pays the
cache-write price where a cache read was due. It earns back the offloaded tokens' cache reads
on each later turn until Soft, which rewrites the prefix anyway. The sessions here grow by a
fixed amount per turn, so the turns until Soft are known; the saved tokens and the first
offloaded message are read from the same session run with the knob off (the offload it makes),
and the bill is computed here from raw byte counts (bytes // 4, the default estimator).
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import pytest

from compactor import (
    CalibratedEstimator,
    CompactionTier,
    CompactorConfig,
    MemorySink,
    Message,
    ToolCall,
)
from compactor.events import CompactionRecorded
from tests.compactor.cached_sessions import (
    READ,
    SOFT_AT,
    WINDOW,
    WRITE,
    Clock,
    cached_session,
    first_warn_turn,
    grow,
    raw_bytes,
    raw_tokens,
)

CASES = [  # (results, lines, growth): three large results or one just over the threshold
    (3, 100, 40),
    (3, 100, 900),
    (1, 58, 5),  # one small result pays when Soft is far enough away...
    (1, 58, 40),  # ...not when it comes sooner
    (1, 58, 900),
]


def _bill(
    prev: list[Message], before: list[Message], offloaded: list[Message], growth: int
) -> tuple[float, float]:
    """(cost, earned) of the offload the knob-off twin made, from raw bytes: the cached prompt
    from the first offloaded message on is written again (less what the offload removes); each
    turn until Soft reads ``saved`` fewer tokens; and Soft comes ``saved / growth`` turns
    later, each worth a cycle's compaction (a rewrite of what a summary leaves, half of Soft's
    threshold before any summary, and the summariser reading the rest) over its turns."""
    first = next(i for i, (a, b) in enumerate(zip(before, offloaded, strict=True)) if a != b)
    saved = raw_tokens(before) - raw_tokens(offloaded)
    cached = sum(raw_bytes(m) for m in prev)
    rewritten = max(0, cached - sum(raw_bytes(m) for m in before[:first])) // 4
    cost = WRITE * (rewritten - min(saved, rewritten)) - READ * rewritten
    turns = math.ceil((SOFT_AT - raw_tokens(before)) / growth)
    left = SOFT_AT / 2
    cycle = (SOFT_AT - left) / growth
    deferral = min(saved / growth, cycle) / cycle * (WRITE * left + SOFT_AT - left)
    return cost, READ * saved * (turns - 1) + deferral  # Soft's own turn is in the deferral


@pytest.mark.parametrize(("results", "lines", "growth"), CASES)
def test_warn_offloads_only_when_what_it_earns_before_soft_and_by_putting_soft_off_repays_it(
    tmp_path: Path, results: int, lines: int, growth: int
) -> None:
    off_clock, on_clock = Clock(), Clock()
    off = cached_session(tmp_path, False, off_clock, results=results, lines=lines)
    _prev, before, offloaded, record = first_warn_turn(off, off_clock, growth)
    assert record.tier == CompactionTier.WARN and record.effective

    on = cached_session(tmp_path, True, on_clock, results=results, lines=lines)
    prev, before_on, sent, held_record = first_warn_turn(on, on_clock, growth)
    assert before_on == before  # the same history up to this turn
    cost, earned = _bill(prev, before, offloaded, growth)
    assert abs(earned - cost) > 0.02 * cost, "a case this close would test rounding, not the rule"

    if earned >= cost:
        assert sent == offloaded and on.offloads_held == 0
    else:
        assert sent == before, "held: the view goes out as it was, cache intact"
        assert on.offloads_held == 1
        assert held_record.tier == CompactionTier.WARN
        assert not held_record.effective
        assert held_record.fallback.startswith("offload held:")
        turns = math.ceil((SOFT_AT - raw_tokens(before)) / growth)
        assert f"{turns} turns until Soft" in held_record.fallback


def test_the_cases_cover_both_decisions(tmp_path: Path) -> None:
    """The cases above straddle the rule: large offloads pay; a small one before a large
    cached prompt pays only when Soft is far (the growth alone flips it)."""
    held = []
    for results, lines, growth in CASES:
        clock = Clock()
        session = cached_session(
            tmp_path / f"{results}-{growth}", True, clock, results=results, lines=lines
        )
        first_warn_turn(session, clock, growth)
        held.append(session.offloads_held)
    assert held == [0, 0, 0, 1, 1]


def test_a_cold_cache_offloads_whatever_the_horizon(tmp_path: Path) -> None:
    """After the TTL nothing is cached: the offload only makes the rewrite smaller."""
    clock = Clock()
    session = cached_session(tmp_path, True, clock, results=1, lines=58)  # held when warm
    _prev, before, sent, record = first_warn_turn(session, clock, 900, gap_s=301)
    assert record.effective and raw_tokens(sent) < raw_tokens(before)
    assert session.offloads_held == 0


def test_held_turns_record_one_event_per_streak_then_soft_summarises(tmp_path: Path) -> None:
    clock, sink = Clock(), MemorySink()
    session = cached_session(tmp_path, True, clock, sink, results=1, lines=58)
    first_warn_turn(session, clock, 900)
    tiers = []
    while not session.records:
        grow(session, 900)
        clock.now += timedelta(seconds=10)
        _view, record = session.prepare()
        tiers.append((record.tier, record.effective))
    assert session.offloads_held >= 2, "the streak held more than one turn"
    assert tiers[-1] == (CompactionTier.SOFT, True)
    held = _held_events(sink)
    assert len(held) == 1


def _held_events(sink: MemorySink) -> list[CompactionRecorded]:
    """The compaction events of held Warn offloads, in the order recorded."""
    return [
        e.payload
        for e in sink.of_type("compaction_recorded")
        if isinstance(e.payload, CompactionRecorded)
        and e.payload.record.fallback.startswith("offload held:")
    ]


def test_off_by_default_and_hashes_and_records_as_before() -> None:
    """The default config's hash is the one releases before the cache knobs gave it, and what a
    session records of it leaves the later fields out while they are at their default."""
    assert CompactorConfig().cache_priced_offload is False
    assert CompactorConfig().config_hash() == "f2218ddbc86e"
    assert CompactorConfig(cache_priced_offload=True).config_hash() != "f2218ddbc86e"
    later = {"cache_priced_offload", "cache_read_price", "cache_write_price", "cold_cache_ttl_s"}
    assert not later & set(CompactorConfig().recorded())
    assert CompactorConfig(cache_read_price=0.26).recorded()["cache_read_price"] == 0.26


def test_growth_is_counted_in_bytes_so_a_calibration_learnt_meanwhile_is_no_growth(
    tmp_path: Path,
) -> None:
    """A provider report after the first turn scales every count by 1.1: the turns until Soft
    the held record names are those of the real growth (40 tokens of bytes per turn, counted
    by the estimator as it is now), not of the jump the calibration made."""
    clock = Clock()
    estimator = CalibratedEstimator()
    session = cached_session(tmp_path, True, clock, results=1, lines=58, estimator=estimator)
    clock.now += timedelta(seconds=10)
    first, _record = session.prepare()
    first_bytes = sum(raw_bytes(m) for m in first)
    session.observe_usage(input_tokens=round(raw_tokens(first) * 1.1))
    turns = 1
    while True:
        grow(session, 40)
        turns += 1
        clock.now += timedelta(seconds=10)
        before = session.view()
        _view, record = session.prepare()
        if record.tier == CompactionTier.WARN:
            break
    assert not record.effective and session.offloads_held == 1
    now = estimator.tokens_for_bytes(sum(raw_bytes(m) for m in before))
    growth = (now - estimator.tokens_for_bytes(first_bytes)) / (turns - 1)
    assert growth == pytest.approx(1.1 * 40, rel=0.05)
    expected = math.ceil((SOFT_AT - now) / growth)
    assert f"{expected} turns until Soft" in record.fallback


def test_a_held_turn_with_an_exchange_open_records_every_message_at_its_history_index(
    tmp_path: Path,
) -> None:
    """The view sent while a tool call awaits its result is repaired (a stand-in result); the
    held event still names each history message by its index, the stand-in as synthetic."""
    clock, sink = Clock(), MemorySink()
    session = cached_session(tmp_path, True, clock, sink, results=1, lines=58)
    while True:  # warm turns below Warn, then the call is made on the turn that reaches it
        clock.now += timedelta(seconds=10)
        session.prepare()
        grow(session, 900)
        if raw_tokens(session.view()) >= 0.6 * WINDOW:
            break
    call = ToolCall(id="open1", name="read_file", arguments='{"path": "a.py"}')
    session.append(Message(role="assistant", content="", tool_calls=[call]))
    clock.now += timedelta(seconds=10)
    _view, record = session.prepare()
    assert record.fallback.startswith("offload held:")
    held = _held_events(sink)
    assert len(held) == 1
    after = held[0].after
    named = [item.index for item in after if item.status != "synthetic"]
    assert named == [None, *range(len(session.history))]  # the system prompt, then history
    assert [item.role for item in after if item.status == "synthetic"] == ["tool"]
