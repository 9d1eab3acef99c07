"""Tiers (issue 8, job 3): how often each tier fires, how sessions move between tiers, how many
turns pass between compactions, escalations, and what kind of emergency happened.

Inputs are the store's ``compactions``, ``turns`` and ``sessions`` frames; deleted sessions are
ignored and only **effective** compactions count (a null ``effective`` counts as effective). A
compaction belongs to the turn whose ``view_prepared`` follows it in ``seq`` order within its
session (the compaction happens inside that turn's prepare()); one after the last turn has no
turn. Emergencies (tier 4) are either a *truncation* (something dropped or cut) or an *offload*
(offloaded only), read from ``emergency``, or for older rows (``emergency`` null) from the
counts: n_dropped or cut > 0 → truncation, else n_offloaded > 0 → offload.

This module does no I/O and does not explain *why* an emergency happened (see postmortem).
"""

from __future__ import annotations

import polars as pl

from analytics.jobs.common import (
    conform,
    drop_deleted,
    in_session_order,
    is_effective,
    tier_name,
)
from compactor import CompactionTier

EMERGENCY_TIER = int(CompactionTier.EMERGENCY)

_COMPACTIONS = {
    "id": pl.String(),
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "tier": pl.Int64(),
    "effective": pl.Boolean(),
    "fallback": pl.String(),
    "emergency": pl.String(),
    "n_dropped": pl.Int64(),
    "n_offloaded": pl.Int64(),
    "cut": pl.Int64(),
}
_TURNS = {"session_id": pl.String(), "seq": pl.Int64(), "turn": pl.Int64()}


def effective_compactions(compactions: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """The effective compactions of live sessions, in (session_id, seq) order, with the columns
    this module reads (id, session_id, seq, tier, effective, fallback, emergency, n_dropped,
    n_offloaded, cut) plus tier_name."""
    return in_session_order(_effective(compactions, sessions))


def _effective(compactions: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """``effective_compactions`` in input order: for counts, or to filter before ordering."""
    frame = drop_deleted(conform(compactions, _COMPACTIONS), sessions)
    return frame.filter(is_effective()).with_columns(tier_name=tier_name())


def _previous(column: str) -> pl.Expr:
    """The value of the row before in the same session, in a frame in session and seq order."""
    same = pl.col("session_id") == pl.col("session_id").shift(1)
    return pl.when(same).then(pl.col(column).shift(1))


def _turn_count(turns: pl.DataFrame, sessions: pl.DataFrame) -> int:
    return drop_deleted(conform(turns, _TURNS), sessions).height


def tier_frequency(
    compactions: pl.DataFrame, turns: pl.DataFrame, sessions: pl.DataFrame
) -> pl.DataFrame:
    """Fleet-wide, one row per tier that fired: tier, tier_name, compactions, turns (all turns
    of live sessions), per_100_turns (compactions × 100 / turns; null when there are no turns)."""
    total = _turn_count(turns, sessions)
    counts = _effective(compactions, sessions).group_by("tier", "tier_name").len()
    return (
        counts.rename({"len": "compactions"})
        .with_columns(
            pl.col("compactions").cast(pl.Int64),
            turns=pl.lit(total, dtype=pl.Int64),
        )
        .with_columns(
            per_100_turns=pl.when(pl.col("turns") > 0).then(
                pl.col("compactions") * 100 / pl.col("turns")
            )
        )
        .sort("tier")
    )


def tier_transitions(compactions: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """Counts of tier pairs between consecutive effective compactions of a session: from_tier,
    to_tier (tier names), count; most frequent first."""
    frame = effective_compactions(compactions, sessions).with_columns(
        from_tier=_previous("tier_name")
    )
    return (
        frame.filter(pl.col("from_tier").is_not_null())
        .group_by("from_tier", pl.col("tier_name").alias("to_tier"))
        .agg(count=pl.len().cast(pl.Int64))
        .sort(["count", "from_tier", "to_tier"], descending=[True, False, False])
    )


def compaction_turns(
    compactions: pl.DataFrame, turns: pl.DataFrame, sessions: pl.DataFrame
) -> pl.DataFrame:
    """The effective compactions (columns of ``effective_compactions``) with the ``turn`` they
    belong to: the first turn of the session whose seq is greater (null after the last turn)."""
    frame = effective_compactions(compactions, sessions)
    marks = (
        drop_deleted(conform(turns, _TURNS), sessions)
        .filter(pl.col("seq").is_not_null())
        .sort("seq")
    )
    return (
        frame.filter(pl.col("seq").is_not_null())
        .sort("seq")
        .join_asof(
            marks,
            on="seq",
            by="session_id",
            strategy="forward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .sort("session_id", "seq")
    )


def turns_between_compactions(
    compactions: pl.DataFrame, turns: pl.DataFrame, sessions: pl.DataFrame
) -> pl.DataFrame:
    """One row per effective compaction that has an earlier one in its session: session_id,
    compaction_id, previous_compaction_id, tier_name, turn, previous_turn, turns_between
    (turn - previous_turn; 0 when both fell in the same turn, null when a turn is unknown)."""
    frame = compaction_turns(compactions, turns, sessions).with_columns(
        previous_compaction_id=_previous("id"), previous_turn=_previous("turn")
    )
    return (
        frame.filter(pl.col("previous_compaction_id").is_not_null())
        .with_columns(turns_between=pl.col("turn") - pl.col("previous_turn"))
        .select(
            "session_id",
            pl.col("id").alias("compaction_id"),
            "previous_compaction_id",
            "tier_name",
            "turn",
            "previous_turn",
            "turns_between",
        )
    )


def emergency_kinds(compactions: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """One row per effective emergency compaction: session_id, compaction_id, seq, kind
    ("truncation" | "offload" | null when neither can be told), escalated (the fallback says
    "escalated"), n_dropped, n_offloaded, cut."""
    frame = in_session_order(
        _effective(compactions, sessions).filter(pl.col("tier") == EMERGENCY_TIER)
    )
    dropped = (pl.col("n_dropped").fill_null(0) > 0) | (pl.col("cut").fill_null(0) > 0)
    offloaded = pl.col("n_offloaded").fill_null(0) > 0
    inferred = (
        pl.when(dropped)
        .then(pl.lit("truncation"))
        .when(offloaded)
        .then(pl.lit("offload"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    return frame.select(
        "session_id",
        pl.col("id").alias("compaction_id"),
        "seq",
        kind=pl.coalesce("emergency", inferred),
        escalated=pl.col("fallback").str.contains("escalated", literal=True).fill_null(False),
        n_dropped="n_dropped",
        n_offloaded="n_offloaded",
        cut="cut",
    )


def escalations(compactions: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """The effective compactions whose fallback says they escalated: session_id, compaction_id,
    seq, tier_name, fallback."""
    frame = _effective(compactions, sessions).filter(
        pl.col("fallback").str.contains("escalated", literal=True).fill_null(False)
    )
    return in_session_order(frame).select(
        "session_id", pl.col("id").alias("compaction_id"), "seq", "tier_name", "fallback"
    )


def emergency_summary(
    compactions: pl.DataFrame, turns: pl.DataFrame, sessions: pl.DataFrame
) -> pl.DataFrame:
    """One row: emergencies, truncations, offload_only, escalations (effective compactions of
    any tier that escalated), turns, per_100_turns (emergencies × 100 / turns, null when 0)."""
    kinds = emergency_kinds(compactions, sessions)
    total = _turn_count(turns, sessions)
    emergencies = kinds.height
    return pl.DataFrame(
        {
            "emergencies": [emergencies],
            "truncations": [kinds.filter(pl.col("kind") == "truncation").height],
            "offload_only": [kinds.filter(pl.col("kind") == "offload").height],
            "escalations": [escalations(compactions, sessions).height],
            "turns": [total],
            "per_100_turns": [emergencies * 100 / total if total else None],
        },
        schema={
            "emergencies": pl.Int64,
            "truncations": pl.Int64,
            "offload_only": pl.Int64,
            "escalations": pl.Int64,
            "turns": pl.Int64,
            "per_100_turns": pl.Float64,
        },
    )
