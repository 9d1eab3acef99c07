"""The decisions not taken (``analytics.jobs.quiet``) on hand-built turns: which turns are
listed, and the reason each gets, for every no-op path of the compactor."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from analytics.jobs.quiet import QUIET_COLUMNS, quiet_turns

WINDOW = 10_000


def _turn(
    turn: int,
    before: int,
    *,
    after: int | None = None,
    tier: int = 0,
    history: int = 20,
    session: str = "s",
) -> dict[str, Any]:
    return {
        "session_id": session,
        "seq": turn * 10,
        "turn": turn,
        "tokens": before if after is None else after,
        "tokens_before": before,
        "tier": tier,
        "history_messages": history,
        "context_window": WINDOW,
        "reserve_tokens": 0,
    }


def _sessions(**config: Any) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "session_id": "s",
                "warn": config.get("warn", 0.6),
                "soft": 0.7,
                "full": 0.8,
                "emergency": 0.95,
                "config": json.dumps(config),
                "deleted_at": None,
            }
        ],
        schema_overrides={"deleted_at": pl.Datetime(time_zone="UTC")},
    )


def _reasons(turns: list[dict[str, Any]], **config: Any) -> dict[int, str]:
    found = quiet_turns(pl.DataFrame(turns), _sessions(**config))
    assert found.columns == list(QUIET_COLUMNS)
    return dict(zip(found["turn"].to_list(), found["reason"].to_list(), strict=True))


def test_each_no_op_path_has_its_reason_and_quiet_far_turns_are_not_listed() -> None:
    turns = [
        _turn(1, 5_000),  # 50%: far below Warn
        _turn(2, 5_700),  # 57%: near Warn
        _turn(3, 6_300, tier=1),  # Warn due, nothing offloaded
        _turn(4, 6_400, after=5_000, tier=1),  # Warn offloaded: acted
        _turn(5, 7_500, tier=2, history=4),  # Soft due, the history is all tail (6)
        _turn(6, 8_200, tier=3, history=30),  # Full due, unchanged
    ]
    assert _reasons(turns) == {
        2: "below_threshold",
        3: "nothing_to_offload",
        5: "all_tail",
        6: "not_compacted",
    }


def test_the_sessions_own_thresholds_and_tail_are_used() -> None:
    turns = [_turn(1, 4_700), _turn(2, 7_500, tier=2, history=4)]
    found = quiet_turns(pl.DataFrame(turns), _sessions(warn=0.5, min_tail_messages=2))
    rows = {r["turn"]: r for r in found.iter_rows(named=True)}
    assert rows[1]["reason"] == "below_threshold" and rows[1]["next_threshold"] == "warn"
    assert rows[1]["words"] == "below Warn: 47.0% of the window, it fires at 50%"
    assert rows[2]["reason"] == "not_compacted"  # 4 messages > a tail of 2


def test_a_session_marked_deleted_lists_nothing() -> None:
    sessions = _sessions().with_columns(
        deleted_at=pl.lit("2026-01-01T00:00:00Z").str.to_datetime(time_zone="UTC")
    )
    assert quiet_turns(pl.DataFrame([_turn(1, 5_900)]), sessions).height == 0
