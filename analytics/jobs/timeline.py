"""Turn timeline (issue 8, job 1): the context size of every turn, per-session utilisation and
thresholds reached, and tokens billed against the uncompacted history.

Input frames are the store's ``turns`` (one row per ``view_prepared``) and ``sessions`` (for the
session's window, reserve and its own Warn/Full thresholds); sessions marked deleted are ignored.
Two measures per turn:

- ``ratio`` = (tokens + reserve_tokens) / context_window: what the compactor compares with its
  thresholds, so Warn and Full are judged on it;
- ``utilisation`` = tokens / context_window: the share of the window the view itself fills.

This module does no I/O and does not decide anything about compaction; it only measures.
"""

from __future__ import annotations

import polars as pl

from analytics.jobs.common import conform, drop_deleted, live_sessions, tier_name
from compactor import CompactorConfig

DEFAULT_WARN = CompactorConfig().warn
DEFAULT_FULL = CompactorConfig().full

_TURNS = {
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "turn": pl.Int64(),
    "tokens": pl.Int64(),
    "tier": pl.Int64(),
    "history_tokens": pl.Int64(),
    "context_window": pl.Int64(),
    "reserve_tokens": pl.Int64(),
}
_SESSIONS = {
    "session_id": pl.String(),
    "context_window": pl.Int64(),
    "reserve_tokens": pl.Int64(),
    "warn": pl.Float64(),
    "full": pl.Float64(),
}


def _session_settings(sessions: pl.DataFrame) -> pl.DataFrame:
    """One row per live session: its window, reserve and thresholds (defaults where null)."""
    return (
        conform(live_sessions(sessions), _SESSIONS)
        .unique("session_id", keep="first")
        .with_columns(
            pl.col("warn").fill_null(DEFAULT_WARN),
            pl.col("full").fill_null(DEFAULT_FULL),
        )
    )


def turn_timeline(turns: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """One row per turn of a live session, in (session_id, turn) order.

    Columns: session_id, seq, turn, tier, tier_name, tokens, history_tokens, context_window,
    reserve_tokens, ratio, utilisation. The window and reserve fall back to the session's when
    the turn lacks them (reserve 0 if both are null); ratio and utilisation are null when the
    window is unknown or not positive.
    """
    return _turn_rows(turns, sessions).sort("session_id", "turn", "seq")


def _turn_rows(turns: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """``turn_timeline`` in no particular order: what the aggregates read."""
    settings = _session_settings(sessions).select(
        "session_id",
        pl.col("context_window").alias("session_window"),
        pl.col("reserve_tokens").alias("session_reserve"),
    )
    frame = drop_deleted(conform(turns, _TURNS), sessions).join(
        settings, on="session_id", how="left"
    )
    window = pl.coalesce("context_window", "session_window")
    reserve = pl.coalesce("reserve_tokens", "session_reserve", pl.lit(0, dtype=pl.Int64))
    usable = pl.when(window > 0).then(window)
    return (
        frame.with_columns(context_window=window, reserve_tokens=reserve)
        .with_columns(
            ratio=(pl.col("tokens") + pl.col("reserve_tokens")) / usable,
            utilisation=pl.col("tokens") / usable,
            tier_name=tier_name(),
        )
        .select(
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
        )
    )


def _saved_share(billed: pl.Expr, uncompacted: pl.Expr) -> pl.Expr:
    """1 - billed/uncompacted; null when nothing uncompacted was measured."""
    return pl.when(uncompacted > 0).then(1 - billed / uncompacted)


SESSION_COLUMNS: tuple[str, ...] = (
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
)
"""The columns of ``session_timeline``, in order."""


def _turn_stats(per_turn: pl.DataFrame) -> pl.DataFrame:
    """Per session, the aggregates of its turns (each turn row carries warn and full)."""
    return per_turn.group_by("session_id").agg(
        turns=pl.len(),
        peak_ratio=pl.col("ratio").max(),
        mean_ratio=pl.col("ratio").mean(),
        peak_utilisation=pl.col("utilisation").max(),
        mean_utilisation=pl.col("utilisation").mean(),
        reached_warn=(pl.col("ratio") >= pl.col("warn")).any(),
        turns_at_or_above_full=(pl.col("ratio") >= pl.col("full")).sum().cast(pl.Int64),
        tokens_billed=pl.col("tokens").sum(),
        tokens_uncompacted=pl.col("history_tokens").sum(),
    )


def session_timeline(turns: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """One row per live session (those without turns included, with ``turns`` 0).

    Columns: session_id, turns, peak_ratio, mean_ratio, peak_utilisation, mean_utilisation,
    warn, full (the thresholds used), reached_warn (some turn's ratio >= warn),
    turns_at_or_above_full, lived_above_full (more than half its turns at or above full),
    tokens_billed (view tokens summed over turns), tokens_uncompacted (history_tokens summed),
    saved_share (1 - billed/uncompacted, null when uncompacted is 0).
    """
    settings = _session_settings(sessions).select("session_id", "warn", "full")
    timeline = _turn_rows(turns, sessions)
    known = pl.concat(
        [settings.select("session_id"), timeline.select("session_id").unique()]
    ).unique(maintain_order=True)
    thresholds = known.join(settings, on="session_id", how="left").with_columns(
        pl.col("warn").fill_null(DEFAULT_WARN), pl.col("full").fill_null(DEFAULT_FULL)
    )
    stats = _turn_stats(timeline.join(thresholds, on="session_id", how="left"))
    return (
        thresholds.join(stats, on="session_id", how="left")
        .with_columns(
            pl.col("turns", "turns_at_or_above_full", "tokens_billed", "tokens_uncompacted")
            .cast(pl.Int64)
            .fill_null(0),
            pl.col("reached_warn").fill_null(False),
        )
        .with_columns(
            lived_above_full=pl.col("turns_at_or_above_full") * 2 > pl.col("turns"),
            saved_share=_saved_share(pl.col("tokens_billed"), pl.col("tokens_uncompacted")),
        )
        .select(SESSION_COLUMNS)
        .sort("session_id")
    )


def billing_totals(turns: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """One row for the fleet of live sessions: billed (view tokens over all turns), uncompacted
    (history_tokens over all turns), saved_share (1 - billed/uncompacted, null when 0)."""
    timeline = _turn_rows(turns, sessions)
    return timeline.select(
        billed=pl.col("tokens").sum().cast(pl.Int64),
        uncompacted=pl.col("history_tokens").sum().cast(pl.Int64),
    ).with_columns(saved_share=_saved_share(pl.col("billed"), pl.col("uncompacted")))
