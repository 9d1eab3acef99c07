"""Odd usage reports never break the agent: counts that are no token counts are ignored (one
warning, no exception, no event), and one report far off the fit cannot hold the estimate off
for many turns."""

from __future__ import annotations

import logging
import math

import pytest

from compactor import (
    CalibratedEstimator,
    CompactionSession,
    CompactionTier,
    ExtractiveSummarizer,
    MemorySink,
    Message,
    OverheadCalibratedEstimator,
    ProgressiveCompactor,
)
from compactor.tokens import message_bytes, raw_tokens
from tests.compactor.builders import TASK, exchange

WINDOW = 128_000
HIDDEN = 10_000
"""Tokens of the harness's own prompt, which every report counts and no message shows."""


Estimators = type[OverheadCalibratedEstimator] | type[CalibratedEstimator]


def _session(
    sink: MemorySink | None = None, make: Estimators = OverheadCalibratedEstimator
) -> CompactionSession:
    compactor = ProgressiveCompactor(ExtractiveSummarizer(), WINDOW, estimator=make())
    session = CompactionSession(compactor, "sys", session_id="usage", event_sink=sink)
    session.append(Message(role="user", content=TASK))
    return session


def _true_count(session: CompactionSession, view: list[Message]) -> int:
    """What the provider counts for ``view``: its raw estimate plus the hidden prompt."""
    n_bytes = sum(message_bytes(m) for m in view)
    return raw_tokens(session.compactor.estimator, n_bytes) + HIDDEN


@pytest.mark.parametrize(
    "bad", [2**63, 1e300, math.inf, -math.inf, math.nan, None, -5, 1.5, True, "1000"]
)
def test_a_report_that_is_no_token_count_is_ignored_with_one_warning(
    bad: object, caplog: pytest.LogCaptureFixture
) -> None:
    sink = MemorySink()
    session = _session(sink)
    view, _ = session.prepare()
    session.observe_usage(input_tokens=_true_count(session, view))
    name = session.compactor.estimator.name

    with caplog.at_level(logging.WARNING):
        session.observe_usage(input_tokens=bad)  # type: ignore[arg-type]
        session.observe_usage(input_tokens=10_000, output_tokens=bad)  # type: ignore[arg-type]
    session.extend(exchange(1, 400))
    view, record = session.prepare()

    assert record.tier == CompactionTier.NONE
    assert session.compactor.estimator.name == name
    assert session.usage_ignored == 2
    assert len(sink.of_type("usage_reported")) == 1
    warnings = [r for r in caplog.records if "usage report ignored" in r.getMessage()]
    assert len(warnings) == 1


def _tiers(
    make: Estimators, outlier_at: int | None, turns: int = 40
) -> tuple[list[CompactionTier], list[int]]:
    """Tiers and the estimate of a fixed size, per turn, of an agent whose reports are true
    except one of 5M tokens at ``outlier_at``."""
    session = _session(make=make)
    tiers: list[CompactionTier] = []
    estimates: list[int] = []
    for turn in range(turns):
        session.extend(exchange(turn, 8_000))
        view, record = session.prepare()
        tiers.append(record.tier)
        reported = 5_000_000 if turn == outlier_at else _true_count(session, view)
        session.observe_usage(input_tokens=reported)
        estimates.append(session.compactor.estimator.tokens_for_bytes(100_000))
    return tiers, estimates


@pytest.mark.parametrize("make", [OverheadCalibratedEstimator, CalibratedEstimator])
def test_one_outlier_report_cannot_hold_the_estimate_high(make: Estimators) -> None:
    outlier_at = 8
    tiers, estimates = _tiers(make, outlier_at)
    plain_tiers, plain_estimates = _tiers(make, None)

    after = tiers[outlier_at + 1 :]
    assert after.count(CompactionTier.EMERGENCY) <= plain_tiers.count(CompactionTier.EMERGENCY) + 1
    # the next true report corrects it: from then on the estimate is about the one without the
    # outlier (a fit that chases a moving ratio lags a little for the report it did not get)
    assert estimates[outlier_at + 1 :] == pytest.approx(plain_estimates[outlier_at + 1 :], rel=0.1)


def test_a_first_report_far_off_is_forgotten_after_two_true_ones() -> None:
    # (CalibratedEstimator's factor is clamped to [0.25, 4]: a first report far off moves it
    # at most that far, and the next reports pull it back by ``alpha`` each)
    odd, fresh = OverheadCalibratedEstimator(), OverheadCalibratedEstimator()
    odd.observe(2_000, 5_000_000)
    for x in (3_000, 5_000):
        odd.observe(x, x * 6 // 5 + 300)
        fresh.observe(x, x * 6 // 5 + 300)
    assert odd.tokens_for_bytes(40_000) == fresh.tokens_for_bytes(40_000)


@pytest.mark.parametrize("make", [OverheadCalibratedEstimator, CalibratedEstimator])
def test_two_reports_in_a_row_far_off_are_a_real_change(make: Estimators) -> None:
    est = make()
    for x in (3_000, 5_000, 7_000):
        est.observe(x, x // 2)
    before = est.tokens_for_bytes(40_000)
    est.observe(8_000, 8_000 * 6)  # held: one report far off is not learnt from
    assert est.tokens_for_bytes(40_000) == before
    est.observe(9_000, 9_000 * 6)  # a second: the harness changed
    assert est.tokens_for_bytes(40_000) > 3 * before
