"""Calibration job: bias, spread and learned factor of hand-built usage reports, and the CJK
share of hand-written messages, answers worked out by hand as literals."""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import Any

import polars as pl
import pytest

from analytics.jobs.calibration import cjk_share, estimator_calibration

_USAGE_SCHEMA = {
    "session_id": pl.String,
    "model": pl.String,
    "prompt": pl.String,
    "estimated_input_tokens": pl.Int64,
    "raw_estimated_tokens": pl.Int64,
    "input_tokens": pl.Int64,
}


def _usage(*rows: tuple[str, str | None, str, int | None, int | None, int | None]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_USAGE_SCHEMA, orient="row")


SESSIONS = pl.DataFrame(
    {
        "session_id": ["g", "c", "meta", "idle", "gone"],
        "model": ["gpt", "claude", "gpt", "gpt", "gpt"],
        "capture": ["full", "full", "metadata", "full", "full"],
        "deleted_at": [None, None, None, None, datetime(2026, 1, 1)],
    }
)


def _row(frame: pl.DataFrame, **keys: Any) -> dict[str, Any]:
    rows = frame.filter(**keys).to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_bias_spread_and_learned_factor_of_two_reports() -> None:
    # ratios reported/estimated 1.1 and 0.9; reported/raw 1.375 and 1.125
    usage = _usage(("g", "gpt", "view", 100, 80, 110), ("g", "gpt", "view", 200, 160, 180))
    row = _row(estimator_calibration(usage, SESSIONS), model="gpt", prompt="view")
    assert row["reports"] == 2
    assert row["bias"] == pytest.approx(0.0, abs=1e-12)
    assert row["spread"] == pytest.approx(statistics.stdev([1.1, 0.9]))
    assert row["learned_factor"] == pytest.approx(1.25)


def test_under_counting_estimator_has_positive_bias_and_median_factor() -> None:
    # ratios 1.2, 1.5, 1.3 → bias mean(0.2, 0.5, 0.3); raw factors 1.0, 2.0, 1.3 → median 1.3
    usage = _usage(
        ("c", "claude", "view", 100, 120, 120),
        ("c", "claude", "view", 100, 75, 150),
        ("c", "claude", "view", 100, 100, 130),
    )
    row = _row(estimator_calibration(usage, SESSIONS), model="claude")
    assert row["bias"] == pytest.approx((0.2 + 0.5 + 0.3) / 3)
    assert row["spread"] == pytest.approx(statistics.stdev([1.2, 1.5, 1.3]))
    assert row["learned_factor"] == pytest.approx(1.3)


def test_prompt_kinds_are_apart_and_model_falls_back_to_the_sessions() -> None:
    usage = _usage(("g", None, "view", 100, 100, 110), ("g", "gpt", "history", 100, 100, 150))
    frame = estimator_calibration(usage, SESSIONS)
    assert frame.select("model", "prompt", "reports").to_dicts() == [
        {"model": "gpt", "prompt": "history", "reports": 1},
        {"model": "gpt", "prompt": "view", "reports": 1},
    ]
    assert _row(frame, prompt="history")["bias"] == pytest.approx(0.5)
    assert _row(frame, prompt="view")["spread"] is None


def test_per_model_grouping_pools_prompt_kinds() -> None:
    usage = _usage(("g", "gpt", "view", 100, 100, 110), ("g", "gpt", "history", 100, 100, 150))
    frame = estimator_calibration(usage, SESSIONS, by=("model",))
    assert frame.columns == ["model", "reports", "bias", "spread", "learned_factor"]
    assert frame["reports"].to_list() == [2]
    assert frame["bias"].to_list() == [pytest.approx(0.3)]


def test_reports_without_estimate_or_provider_count_and_deleted_sessions_are_left_out() -> None:
    usage = _usage(
        ("g", "gpt", "view", 0, 0, 100),
        ("g", "gpt", "view", 100, 100, None),
        ("gone", "gpt", "view", 100, 100, 300),
        ("g", "gpt", "view", 100, 0, 120),
    )
    row = _row(estimator_calibration(usage, SESSIONS), model="gpt")
    assert row["reports"] == 1
    assert row["bias"] == pytest.approx(0.2)
    assert row["learned_factor"] is None


def test_cjk_share_counts_ideographs_kana_and_hangul_over_non_space_characters() -> None:
    messages = pl.DataFrame(
        {
            "session_id": ["g", "g", "c", "meta", "gone"],
            "content": ["漢字 ab", "  \n", "カナ한국。", None, "漢"],
        }
    )
    frame = cjk_share(messages, SESSIONS)
    assert frame.to_dicts() == [
        {"session_id": "c", "characters": 5, "cjk_characters": 5, "cjk_share": 1.0},
        {"session_id": "g", "characters": 4, "cjk_characters": 2, "cjk_share": 0.5},
        {"session_id": "idle", "characters": 0, "cjk_characters": 0, "cjk_share": None},
        {"session_id": "meta", "characters": 0, "cjk_characters": 0, "cjk_share": None},
    ]


def test_latin_only_text_has_zero_share_not_null() -> None:
    messages = pl.DataFrame({"session_id": ["g"], "content": ["plain ascii, façade"]})
    assert _row(cjk_share(messages, SESSIONS), session_id="g")["cjk_share"] == 0.0


def test_empty_frames_give_empty_results_with_their_columns() -> None:
    calibration = estimator_calibration(_usage(), SESSIONS.head(0))
    assert calibration.height == 0
    assert calibration.columns == ["model", "prompt", "reports", "bias", "spread", "learned_factor"]
    empty_messages = pl.DataFrame(schema={"session_id": pl.String, "content": pl.String})
    share = cjk_share(empty_messages, SESSIONS.head(0))
    assert share.height == 0
    assert share.columns == ["session_id", "characters", "cjk_characters", "cjk_share"]
