"""Turn timeline job: hand-built sessions whose ratios, thresholds and billing are worked out by
hand and written as literals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl
import pytest

from analytics.jobs.timeline import billing_totals, session_timeline, turn_timeline

SESSION_COLUMNS = [
    "session_id",
    "turns",
    "peak_ratio",
    "mean_ratio",
    "peak_utilisation",
    "mean_utilisation",
    "warn",
    "full",
    "reached_warn",
    "turns_at_or_above_full",
    "lived_above_full",
    "tokens_billed",
    "tokens_uncompacted",
    "saved_share",
]


def _sessions(*rows: dict[str, Any]) -> pl.DataFrame:
    base = {
        "context_window": 1000,
        "reserve_tokens": 0,
        "warn": None,
        "full": None,
        "deleted_at": None,
    }
    schema: dict[str, pl.DataType] = {
        "session_id": pl.String(),
        "context_window": pl.Int64(),
        "reserve_tokens": pl.Int64(),
        "warn": pl.Float64(),
        "full": pl.Float64(),
        "deleted_at": pl.Datetime("us", "UTC"),
    }
    return pl.DataFrame([base | row for row in rows], schema=schema)


def _turns(session_id: str, tokens: list[int], history: list[int], **extra: Any) -> pl.DataFrame:
    n = len(tokens)
    return pl.DataFrame(
        {
            "session_id": [session_id] * n,
            "seq": [10 * (i + 1) for i in range(n)],
            "turn": list(range(1, n + 1)),
            "tokens": tokens,
            "tier": [0] * n,
            "history_tokens": history,
            "context_window": [extra.get("context_window", 1000)] * n,
            "reserve_tokens": [extra.get("reserve_tokens", 0)] * n,
        },
        schema_overrides={"context_window": pl.Int64, "reserve_tokens": pl.Int64},
    )


def _row(frame: pl.DataFrame, session_id: str) -> dict[str, Any]:
    rows = frame.filter(pl.col("session_id") == session_id).to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_session_at_half_then_065_then_09_peaks_at_09_and_reaches_warn() -> None:
    turns = _turns("s", [500, 650, 900], [500, 800, 1200])
    row = _row(session_timeline(turns, _sessions({"session_id": "s"})), "s")
    assert row["turns"] == 3
    assert row["peak_ratio"] == pytest.approx(0.9)
    assert row["mean_ratio"] == pytest.approx((0.5 + 0.65 + 0.9) / 3)
    assert row["reached_warn"] is True
    assert row["turns_at_or_above_full"] == 1
    assert row["lived_above_full"] is False
    assert row["tokens_billed"] == 2050
    assert row["tokens_uncompacted"] == 2500
    assert row["saved_share"] == pytest.approx(0.18)


def test_ratio_counts_the_reserve_but_utilisation_does_not() -> None:
    turns = _turns("s", [600], [600], reserve_tokens=100)
    row = _row(turn_timeline(turns, _sessions({"session_id": "s"})), "s")
    assert row["ratio"] == pytest.approx(0.7)
    assert row["utilisation"] == pytest.approx(0.6)


def test_turn_without_window_or_reserve_takes_the_sessions() -> None:
    turns = _turns("s", [600], [600]).with_columns(
        context_window=pl.lit(None, pl.Int64), reserve_tokens=pl.lit(None, pl.Int64)
    )
    sessions = _sessions({"session_id": "s", "context_window": 2000, "reserve_tokens": 200})
    row = _row(turn_timeline(turns, sessions), "s")
    assert row["context_window"] == 2000
    assert row["ratio"] == pytest.approx(0.4)


def test_unknown_window_gives_null_ratio() -> None:
    turns = _turns("s", [600], [600], context_window=0)
    row = _row(turn_timeline(turns, _sessions({"session_id": "s", "context_window": None})), "s")
    assert row["ratio"] is None
    assert row["utilisation"] is None


def test_warn_is_judged_by_the_sessions_own_threshold() -> None:
    turns = pl.concat([_turns("own", [700], [700]), _turns("default", [700], [700])])
    sessions = _sessions({"session_id": "own", "warn": 0.75}, {"session_id": "default"})
    frame = session_timeline(turns, sessions)
    assert _row(frame, "own")["reached_warn"] is False
    assert _row(frame, "own")["warn"] == 0.75
    assert _row(frame, "default")["reached_warn"] is True
    assert _row(frame, "default")["warn"] == 0.6


def test_more_than_half_the_turns_at_full_is_living_above_full() -> None:
    turns = pl.concat(
        [
            _turns("above", [850, 900, 500], [850, 900, 500]),
            _turns("half", [850, 800, 500, 100], [850, 800, 500, 100]),
        ]
    )
    sessions = _sessions({"session_id": "above"}, {"session_id": "half", "full": 0.8})
    frame = session_timeline(turns, sessions)
    assert _row(frame, "above")["turns_at_or_above_full"] == 2
    assert _row(frame, "above")["lived_above_full"] is True
    assert _row(frame, "half")["turns_at_or_above_full"] == 2
    assert _row(frame, "half")["lived_above_full"] is False


def test_session_with_zero_turns_is_listed_with_nothing_measured() -> None:
    frame = session_timeline(_turns("s", [500], [500]).head(0), _sessions({"session_id": "idle"}))
    row = _row(frame, "idle")
    assert row["turns"] == 0
    assert row["peak_ratio"] is None
    assert row["reached_warn"] is False
    assert row["lived_above_full"] is False
    assert row["tokens_billed"] == 0
    assert row["saved_share"] is None


def test_deleted_sessions_are_ignored() -> None:
    turns = pl.concat([_turns("kept", [100], [200]), _turns("gone", [900], [900])])
    sessions = _sessions(
        {"session_id": "kept"},
        {"session_id": "gone", "deleted_at": datetime(2026, 1, 1)},
    )
    assert session_timeline(turns, sessions)["session_id"].to_list() == ["kept"]
    assert turn_timeline(turns, sessions)["session_id"].to_list() == ["kept"]
    assert billing_totals(turns, sessions).to_dicts() == [
        {"billed": 100, "uncompacted": 200, "saved_share": 0.5}
    ]


def test_billing_totals_add_every_turn_of_the_fleet() -> None:
    turns = pl.concat(
        [_turns("a", [500, 650, 900], [500, 800, 1200]), _turns("b", [100, 200], [200, 300])]
    )
    row = billing_totals(turns, _sessions({"session_id": "a"}, {"session_id": "b"})).row(
        0, named=True
    )
    assert row["billed"] == 2350
    assert row["uncompacted"] == 3000
    assert row["saved_share"] == pytest.approx(1 - 2350 / 3000)


def test_empty_frames_give_empty_results_with_their_columns() -> None:
    turns = _turns("s", [1], [1]).head(0)
    sessions = _sessions({"session_id": "s"}).head(0)
    frame = session_timeline(turns, sessions)
    assert frame.height == 0
    assert frame.columns == SESSION_COLUMNS
    assert turn_timeline(turns, sessions).columns == [
        "session_id",
        "seq",
        "turn",
        "tier",
        "tier_name",
        "tokens",
        "history_tokens",
        "context_window",
        "reserve_tokens",
        "ratio",
        "utilisation",
    ]
    assert billing_totals(turns, sessions).to_dicts() == [
        {"billed": 0, "uncompacted": 0, "saved_share": None}
    ]
