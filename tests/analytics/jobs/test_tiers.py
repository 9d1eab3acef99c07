"""Tiers job: frequency, transitions, turns between compactions, escalations and emergency kinds
on a hand-built session whose answers are written as literals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from analytics.jobs.tiers import (
    compaction_turns,
    emergency_kinds,
    emergency_summary,
    escalations,
    tier_frequency,
    tier_transitions,
    turns_between_compactions,
)

_SCHEMA = {
    "id": pl.String,
    "session_id": pl.String,
    "seq": pl.Int64,
    "tier": pl.Int64,
    "effective": pl.Boolean,
    "fallback": pl.String,
    "emergency": pl.String,
    "n_dropped": pl.Int64,
    "n_offloaded": pl.Int64,
    "cut": pl.Int64,
}


def _compaction(cid: str, seq: int, tier: int, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": cid,
        "session_id": "s",
        "seq": seq,
        "tier": tier,
        "effective": True,
        "fallback": None,
        "emergency": None,
        "n_dropped": 0,
        "n_offloaded": 0,
        "cut": 0,
    }
    return base | extra


def _compactions(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=_SCHEMA)


# session s: WARN at seq 3, a SOFT no-op at 5, an escalated EMERGENCY truncation at 9, a legacy
# EMERGENCY (emergency null) that only offloaded at 20 (after the last turn)
COMPACTIONS = _compactions(
    _compaction("a", 3, 1),
    _compaction("b", 5, 2, effective=False),
    _compaction("c", 9, 4, fallback="budget_trim + escalated to emergency", emergency="truncation"),
    _compaction("d", 20, 4, n_offloaded=3),
)
TURNS = pl.DataFrame({"session_id": ["s"] * 4, "seq": [4, 6, 10, 12], "turn": [1, 2, 3, 4]})
SESSIONS = pl.DataFrame({"session_id": ["s"], "deleted_at": [None]})


def test_frequency_per_100_turns_counts_effective_compactions() -> None:
    frame = tier_frequency(COMPACTIONS, TURNS, SESSIONS)
    assert frame.to_dicts() == [
        {"tier": 1, "tier_name": "WARN", "compactions": 1, "turns": 4, "per_100_turns": 25.0},
        {
            "tier": 4,
            "tier_name": "EMERGENCY",
            "compactions": 2,
            "turns": 4,
            "per_100_turns": 50.0,
        },
    ]


def test_frequency_without_turns_is_null_not_infinite() -> None:
    frame = tier_frequency(COMPACTIONS, TURNS.head(0), SESSIONS)
    assert frame["per_100_turns"].to_list() == [None, None]


def test_transitions_skip_noops_and_never_cross_sessions() -> None:
    other = _compaction("e", 1, 3, session_id="t")
    compactions = pl.concat([COMPACTIONS, _compactions(other)])
    sessions = pl.DataFrame({"session_id": ["s", "t"], "deleted_at": [None, None]})
    assert tier_transitions(compactions, sessions).to_dicts() == [
        {"from_tier": "EMERGENCY", "to_tier": "EMERGENCY", "count": 1},
        {"from_tier": "WARN", "to_tier": "EMERGENCY", "count": 1},
    ]


def test_a_compaction_belongs_to_the_turn_that_follows_it() -> None:
    frame = compaction_turns(COMPACTIONS, TURNS, SESSIONS)
    assert frame.select("id", "turn").to_dicts() == [
        {"id": "a", "turn": 1},
        {"id": "c", "turn": 3},
        {"id": "d", "turn": None},
    ]


def test_turns_between_consecutive_compactions() -> None:
    frame = turns_between_compactions(COMPACTIONS, TURNS, SESSIONS)
    assert frame.select("compaction_id", "previous_compaction_id", "turns_between").to_dicts() == [
        {"compaction_id": "c", "previous_compaction_id": "a", "turns_between": 2},
        {"compaction_id": "d", "previous_compaction_id": "c", "turns_between": None},
    ]


def test_emergencies_are_told_apart_from_the_field_or_from_legacy_counts() -> None:
    legacy = _compactions(
        _compaction("x", 30, 4, n_dropped=2),
        _compaction("y", 31, 4),
        _compaction("z", 32, 4, emergency="truncation", effective=False),
    )
    frame = emergency_kinds(pl.concat([COMPACTIONS, legacy]), SESSIONS)
    assert frame.select("compaction_id", "kind", "escalated").to_dicts() == [
        {"compaction_id": "c", "kind": "truncation", "escalated": True},
        {"compaction_id": "d", "kind": "offload", "escalated": False},
        {"compaction_id": "x", "kind": "truncation", "escalated": False},
        {"compaction_id": "y", "kind": None, "escalated": False},
    ]


def test_escalations_list_the_fallbacks_that_escalated() -> None:
    frame = escalations(COMPACTIONS, SESSIONS)
    assert frame.select("compaction_id", "tier_name").to_dicts() == [
        {"compaction_id": "c", "tier_name": "EMERGENCY"}
    ]


def test_emergency_summary_headline() -> None:
    assert emergency_summary(COMPACTIONS, TURNS, SESSIONS).to_dicts() == [
        {
            "emergencies": 2,
            "truncations": 1,
            "offload_only": 1,
            "escalations": 1,
            "turns": 4,
            "per_100_turns": 50.0,
        }
    ]


def test_deleted_sessions_are_ignored() -> None:
    deleted = pl.DataFrame({"session_id": ["s"], "deleted_at": [datetime(2026, 1, 1)]})
    assert tier_frequency(COMPACTIONS, TURNS, deleted).height == 0
    assert emergency_summary(COMPACTIONS, TURNS, deleted)["emergencies"].to_list() == [0]


def test_empty_frames_give_empty_results_with_their_columns() -> None:
    empty = _compactions()
    no_turns = TURNS.head(0)
    assert tier_frequency(empty, no_turns, SESSIONS).columns == [
        "tier",
        "tier_name",
        "compactions",
        "turns",
        "per_100_turns",
    ]
    assert tier_transitions(empty, SESSIONS).columns == ["from_tier", "to_tier", "count"]
    between = turns_between_compactions(empty, no_turns, SESSIONS)
    assert between.height == 0
    assert between.columns == [
        "session_id",
        "compaction_id",
        "previous_compaction_id",
        "tier_name",
        "turn",
        "previous_turn",
        "turns_between",
    ]
    assert emergency_kinds(empty, SESSIONS).height == 0
    assert emergency_summary(empty, no_turns, SESSIONS).row(0) == (0, 0, 0, 0, 0, None)
