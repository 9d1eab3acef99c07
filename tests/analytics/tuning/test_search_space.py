"""The Optuna search space (``spec_for_trial``) reaches the cache's knobs, and every point of it
is a valid config: thresholds rising, ``cold_cache_compact`` below Soft."""

from __future__ import annotations

import itertools

import optuna
import pytest

from analytics.tuning.search import spec_for_trial

BASE = {
    "full": 0.8,
    "soft_gap": 0.1,
    "warn_gap": 0.1,
    "min_tail_messages": 6,
    "offload_threshold": 4000,
    "tool_offload_threshold": None,
}


@pytest.mark.parametrize(("gap", "priced"), list(itertools.product([0.0, 0.1, 0.2], [False, True])))
def test_a_trial_sets_the_cache_knobs_it_suggests(gap: float, priced: bool) -> None:
    trial = optuna.trial.FixedTrial({**BASE, "cold_cache_gap": gap, "cache_priced_offload": priced})
    config = spec_for_trial(trial).config
    assert config is not None
    assert config.cache_priced_offload is priced
    if gap == 0.0:
        assert config.cold_cache_compact is None
    else:
        assert config.cold_cache_compact == pytest.approx(0.7 - gap)


def test_every_corner_of_the_space_is_a_valid_config() -> None:
    """The lowest Soft (full 0.6, soft gap 0.2) with the widest cold gap stays above 0."""
    for full, soft_gap, warn_gap, gap in itertools.product(
        [0.6, 0.9], [0.05, 0.2], [0.05, 0.3], [0.0, 0.1, 0.2]
    ):
        values = {**BASE, "full": full, "soft_gap": soft_gap, "warn_gap": warn_gap}
        trial = optuna.trial.FixedTrial(
            {**values, "cold_cache_gap": gap, "cache_priced_offload": True}
        )
        config = spec_for_trial(trial).config
        assert config is not None
        assert 0 < config.warn < config.soft < config.full
        assert config.cold_cache_compact is None or 0 < config.cold_cache_compact < config.soft
