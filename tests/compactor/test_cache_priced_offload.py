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

from compactor import CompactionTier, CompactorConfig, MemorySink, Message
from compactor.events import CompactionRecorded
from tests.compactor.cached_sessions import (
    READ,
    SOFT_AT,
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
    (1, 58, 40),
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
    return cost, READ * saved * turns + deferral


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
    """The cases above straddle the rule: large offloads pay, a small one before a large
    cached prompt is held."""
    held = []
    for results, lines, growth in CASES:
        clock = Clock()
        session = cached_session(
            tmp_path / f"{results}-{growth}", True, clock, results=results, lines=lines
        )
        first_warn_turn(session, clock, growth)
        held.append(session.offloads_held)
    assert held == [0, 0, 1, 1]


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
    held = [
        e.payload
        for e in sink.of_type("compaction_recorded")
        if isinstance(e.payload, CompactionRecorded)
        and e.payload.record.fallback.startswith("offload held:")
    ]
    assert len(held) == 1


def test_off_by_default_and_hashes_as_before() -> None:
    assert CompactorConfig().cache_priced_offload is False
    assert (
        CompactorConfig().config_hash()
        == CompactorConfig(cache_read_price=0.1, cache_write_price=1.25).config_hash()
    )
    assert (
        CompactorConfig().config_hash() != CompactorConfig(cache_priced_offload=True).config_hash()
    )
