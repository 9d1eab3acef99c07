"""``cold_cache_compact`` pulls a due compaction forward to a turn whose prompt cache expired.

A turn that comes more than ``cold_cache_ttl_s`` after the previous ``prepare()`` has its whole
prompt written to the provider's cache again, so a compaction then costs no cached prefix it
would keep: with ``cold_cache_compact`` set, such a turn runs Soft from that fraction of the
window, below Soft's own threshold. The session's clock is the test's (``clock=``), so the
gaps are exact; the sizes are measured here with the compactor's own estimator.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from compactor import (
    CompactionSession,
    CompactionTier,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
)
from tests.compactor.cached_sessions import Clock

WINDOW = 4_000


def _session(config: CompactorConfig, clock: Clock) -> CompactionSession:
    compactor = ProgressiveCompactor(ExtractiveSummarizer(), WINDOW, config=config)
    session = CompactionSession(compactor, "You fix bugs.", clock=clock)
    session.append(Message(role="user", content="Fix the failing parser test in src/parse.rs."))
    while compactor.tokens(session.view()) < 0.55 * WINDOW:  # half full: below Warn and Soft
        n = len(session.history)
        session.append(Message(role="assistant", content=f"step {n}: read src/parse.rs " * 8))
        session.append(Message(role="user", content=f"output {n}: " + "line of a log " * 20))
    return session


def _turn(session: CompactionSession, clock: Clock, after_s: float) -> CompactionTier:
    clock.now += timedelta(seconds=after_s)
    _view, record = session.prepare()
    return record.tier if record.effective else CompactionTier.NONE


@pytest.mark.parametrize(
    ("cold", "gap_s", "expected"),
    [
        (0.5, 400, CompactionTier.SOFT),  # the cache expired: Soft now, at 55% of the window
        (0.5, 200, CompactionTier.NONE),  # still warm: wait for Soft's own threshold
        (0.6, 400, CompactionTier.NONE),  # not yet at the fraction asked
        (None, 400, CompactionTier.NONE),  # off (the default)
    ],
)
def test_a_turn_after_the_cache_ttl_compacts_from_the_fraction_asked(
    cold: float | None, gap_s: float, expected: CompactionTier
) -> None:
    clock = Clock()
    config = CompactorConfig(warn=0.6, soft=0.7, cold_cache_compact=cold, cold_cache_ttl_s=300)
    session = _session(config, clock)
    assert _turn(session, clock, 1) == CompactionTier.NONE  # the first prepare: no gap to judge

    assert _turn(session, clock, gap_s) == expected


def test_the_fraction_must_be_below_soft() -> None:
    with pytest.raises(ValueError, match=r"cold_cache_compact=0\.7 must be below soft=0\.7"):
        CompactorConfig(soft=0.7, cold_cache_compact=0.7)


def test_a_config_without_the_knob_hashes_as_before_it_existed() -> None:
    assert CompactorConfig().config_hash() == CompactorConfig(cold_cache_ttl_s=300).config_hash()
    assert CompactorConfig().config_hash() != CompactorConfig(cold_cache_compact=0.5).config_hash()


def test_a_compaction_pulled_forward_says_so_in_its_trigger() -> None:
    """``trigger`` tells a compaction the cache pulled forward from one its threshold fired."""
    clock = Clock()
    session = _session(CompactorConfig(cold_cache_compact=0.5), clock)
    session.prepare()
    clock.now += timedelta(seconds=400)
    _view, pulled = session.prepare()
    assert (pulled.tier, pulled.effective, pulled.trigger) == (
        CompactionTier.SOFT,
        True,
        "cold_cache",
    )

    warm = _session(CompactorConfig(cold_cache_compact=0.5), Clock())
    while not warm.records:  # grow to Soft's own threshold, one warm turn after another
        warm.append(Message(role="user", content="more output " * 30))
        warm.prepare()
    assert warm.records[-1].trigger == "auto"
