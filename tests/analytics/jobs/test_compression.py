"""Compression job: percentiles, tokens saved and summariser cost of hand-built compactions,
with answers worked out by hand (linear percentiles) and written as literals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl
import pytest

from analytics.jobs.compression import (
    compression_by_session,
    compression_by_tier,
    compression_by_tier_and_trigger,
)

STATS = [
    "count",
    "noops",
    "ratio_p50",
    "ratio_p90",
    "ratio_p99",
    "tokens_saved",
    "summarizer_input_tokens",
    "summarizer_output_tokens",
    "summarizer_latency_p50_ms",
    "summarizer_latency_p90_ms",
]


def _compaction(
    session_id: str, tier: int, before: int, after: int, **extra: Any
) -> dict[str, Any]:
    return {
        "id": f"{session_id}-{tier}-{after}",
        "session_id": session_id,
        "tier": tier,
        "trigger": "auto",
        "effective": True,
        "tokens_before": before,
        "tokens_after": after,
        "compression_ratio": after / before,
        "summarizer_input_tokens": 100,
        "summarizer_output_tokens": 10,
        "summarizer_latency_ms": None,
    } | extra


def _frame(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(
        list(rows),
        schema={
            "id": pl.String,
            "session_id": pl.String,
            "tier": pl.Int64,
            "trigger": pl.String,
            "effective": pl.Boolean,
            "tokens_before": pl.Int64,
            "tokens_after": pl.Int64,
            "compression_ratio": pl.Float64,
            "summarizer_input_tokens": pl.Int64,
            "summarizer_output_tokens": pl.Int64,
            "summarizer_latency_ms": pl.Float64,
        },
    )


SESSIONS = pl.DataFrame(
    {"session_id": ["a", "b", "gone"], "deleted_at": [None, None, datetime(2026, 1, 1)]}
)


def _soft_four_and_a_noop() -> list[dict[str, Any]]:
    rows = [
        _compaction("a", 2, 1000, after, summarizer_latency_ms=latency)
        for after, latency in ((200, 10.0), (400, 20.0), (600, 30.0), (800, 40.0))
    ]
    noop = _compaction("a", 2, 1000, 1000, effective=False, summarizer_input_tokens=999)
    return [*rows, noop]


def test_soft_percentiles_and_savings_cover_effective_compactions_only() -> None:
    frame = compression_by_tier(_frame(*_soft_four_and_a_noop()), SESSIONS)
    row = frame.row(0, named=True)
    assert frame.height == 1
    assert row["tier"] == 2
    assert row["tier_name"] == "SOFT"
    assert row["count"] == 4
    assert row["noops"] == 1
    assert row["ratio_p50"] == pytest.approx(0.5)
    assert row["ratio_p90"] == pytest.approx(0.74)
    assert row["ratio_p99"] == pytest.approx(0.794)
    assert row["tokens_saved"] == 2000
    assert row["summarizer_input_tokens"] == 400
    assert row["summarizer_output_tokens"] == 40
    assert row["summarizer_latency_p50_ms"] == pytest.approx(25.0)
    assert row["summarizer_latency_p90_ms"] == pytest.approx(37.0)


def test_a_tier_with_only_noops_counts_them_apart_with_no_ratios() -> None:
    noop = _compaction("a", 1, 500, 500, effective=False)
    row = compression_by_tier(_frame(noop), SESSIONS).row(0, named=True)
    assert row["tier_name"] == "WARN"
    assert row["count"] == 0
    assert row["noops"] == 1
    assert row["ratio_p50"] is None
    assert row["tokens_saved"] == 0


def test_triggers_are_split_and_tiers_named_in_capitals() -> None:
    rows = [
        _compaction("a", 3, 2000, 200),
        _compaction("a", 3, 1000, 500, trigger="manual"),
        _compaction("b", 4, 1000, 100),
    ]
    frame = compression_by_tier_and_trigger(_frame(*rows), SESSIONS)
    assert frame.select("tier_name", "trigger", "count", "tokens_saved").to_dicts() == [
        {"tier_name": "FULL", "trigger": "auto", "count": 1, "tokens_saved": 1800},
        {"tier_name": "FULL", "trigger": "manual", "count": 1, "tokens_saved": 500},
        {"tier_name": "EMERGENCY", "trigger": "auto", "count": 1, "tokens_saved": 900},
    ]


def test_per_session_rows_keep_sessions_apart_and_skip_deleted_ones() -> None:
    rows = [
        _compaction("a", 2, 1000, 300),
        _compaction("b", 2, 1000, 600),
        _compaction("b", 2, 1000, 800),
        _compaction("gone", 2, 1000, 100),
    ]
    frame = compression_by_session(_frame(*rows), SESSIONS)
    assert frame.select("session_id", "tier_name", "count", "ratio_p50").to_dicts() == [
        {"session_id": "a", "tier_name": "SOFT", "count": 1, "ratio_p50": pytest.approx(0.3)},
        {"session_id": "b", "tier_name": "SOFT", "count": 2, "ratio_p50": pytest.approx(0.7)},
    ]


def test_null_effective_counts_as_a_compaction() -> None:
    row = _compaction("a", 2, 1000, 250, effective=None)
    assert compression_by_tier(_frame(row), SESSIONS)["count"].to_list() == [1]


def test_empty_compactions_give_empty_frames_with_their_columns() -> None:
    empty = _frame()
    assert compression_by_tier(empty, SESSIONS).columns == ["tier", "tier_name", *STATS]
    assert compression_by_tier_and_trigger(empty, SESSIONS).columns == [
        "tier",
        "tier_name",
        "trigger",
        *STATS,
    ]
    by_session = compression_by_session(empty, SESSIONS.head(0))
    assert by_session.height == 0
    assert by_session.columns == ["session_id", "tier", "tier_name", *STATS]
