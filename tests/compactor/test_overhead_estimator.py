"""OverheadCalibratedEstimator: a fixed prompt overhead and a slope, learnt from usage reports."""

from __future__ import annotations

import pytest

from compactor import OverheadCalibratedEstimator


def test_one_report_is_read_as_overhead() -> None:
    est = OverheadCalibratedEstimator()
    est.observe(1000, 16_000)
    assert est.slope == 1.0
    assert est.overhead == 15_000
    assert est.tokens_for_bytes(8000) == 2000 + 15_000


def test_slope_and_overhead_are_recovered_from_spread_reports() -> None:
    slope, overhead = 1.25, 12_000
    est = OverheadCalibratedEstimator()
    for x in range(1000, 40_000, 1500):
        est.observe(x, int(slope * x + overhead))
    assert est.slope == pytest.approx(slope, rel=0.01)
    assert est.overhead == pytest.approx(overhead, rel=0.02)
    assert est.observations == len(range(1000, 40_000, 1500))
    assert "1.250" in est.name


def test_alike_reports_keep_the_slope_instead_of_inflating_the_overhead() -> None:
    est = OverheadCalibratedEstimator()
    for x in range(1000, 20_000, 2000):
        est.observe(x, int(1.2 * x + 500))
    fitted = est.slope
    for _ in range(50):  # the same prompt size over and over: nothing new about the slope
        est.observe(50_000, int(1.2 * 50_000 + 500))
    assert est.slope == pytest.approx(fitted, rel=1e-6)
    assert est.overhead < 0.05 * 50_000


def test_absurd_reports_are_clamped_and_bad_values_ignored() -> None:
    est = OverheadCalibratedEstimator()
    est.observe(0, 100)
    est.observe(100, -5)
    assert est.observations == 0
    for x in range(1000, 30_000, 1000):
        est.observe(x, 10 * x)
    assert est.slope == 2.0
    with pytest.raises(ValueError, match="alpha"):
        OverheadCalibratedEstimator(alpha=0)
