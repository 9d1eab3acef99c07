"""Compression (issue 8, job 2): how much each tier shrank the context, at what summariser cost.

Input is the store's ``compactions`` frame (and ``sessions``, only to ignore deleted ones).
Statistics cover **effective** compactions only: a no-op (``effective`` false) is never a
compaction; it is counted apart in the ``noops`` column. A null ``effective`` (rows recorded
before the flag existed) counts as effective. Percentiles interpolate linearly (DuckDB's
``quantile_cont``) and ignore nulls; ratios are tokens after/before.

This module does no I/O and does not judge whether a compaction was worth it (see tuning).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from analytics.jobs.common import conform, drop_deleted, is_effective, tier_name

_COMPACTIONS = {
    "id": pl.String(),
    "session_id": pl.String(),
    "tier": pl.Int64(),
    "trigger": pl.String(),
    "effective": pl.Boolean(),
    "tokens_before": pl.Int64(),
    "tokens_after": pl.Int64(),
    "compression_ratio": pl.Float64(),
    "summarizer_input_tokens": pl.Int64(),
    "summarizer_output_tokens": pl.Int64(),
    "summarizer_latency_ms": pl.Float64(),
}

STAT_COLUMNS: tuple[str, ...] = (
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
)
"""The statistics columns every compression frame carries after its key columns."""


def _quantile(column: str, q: float, effective: pl.Expr) -> pl.Expr:
    return pl.col(column).filter(effective).quantile(q, "linear")


def _summarise(
    compactions: pl.DataFrame, sessions: pl.DataFrame, keys: Sequence[str]
) -> pl.DataFrame:
    """The statistics of ``STAT_COLUMNS`` grouped by ``keys`` (plus tier_name after tier)."""
    frame = drop_deleted(conform(compactions, _COMPACTIONS), sessions)
    effective = is_effective()
    saved = pl.col("tokens_before") - pl.col("tokens_after")
    stats = frame.group_by(*keys).agg(
        count=effective.sum().cast(pl.Int64),
        noops=effective.not_().sum().cast(pl.Int64),
        ratio_p50=_quantile("compression_ratio", 0.5, effective),
        ratio_p90=_quantile("compression_ratio", 0.9, effective),
        ratio_p99=_quantile("compression_ratio", 0.99, effective),
        tokens_saved=saved.filter(effective).sum().cast(pl.Int64),
        summarizer_input_tokens=pl.col("summarizer_input_tokens").filter(effective).sum(),
        summarizer_output_tokens=pl.col("summarizer_output_tokens").filter(effective).sum(),
        summarizer_latency_p50_ms=_quantile("summarizer_latency_ms", 0.5, effective),
        summarizer_latency_p90_ms=_quantile("summarizer_latency_ms", 0.9, effective),
    )
    ordered = [*keys[: keys.index("tier") + 1], "tier_name", *keys[keys.index("tier") + 1 :]]
    return (
        stats.with_columns(tier_name=tier_name())
        .with_columns(pl.col("summarizer_input_tokens", "summarizer_output_tokens").cast(pl.Int64))
        .select(*ordered, *STAT_COLUMNS)
        .sort(*keys, nulls_last=True)
    )


def compression_by_tier(compactions: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """Fleet-wide, one row per tier (any trigger): tier, tier_name, then ``STAT_COLUMNS``."""
    return _summarise(compactions, sessions, ("tier",))


def compression_by_tier_and_trigger(
    compactions: pl.DataFrame, sessions: pl.DataFrame
) -> pl.DataFrame:
    """Fleet-wide, one row per tier and trigger: tier, tier_name, trigger, ``STAT_COLUMNS``."""
    return _summarise(compactions, sessions, ("tier", "trigger"))


def compression_by_session(compactions: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """One row per session and tier: session_id, tier, tier_name, then ``STAT_COLUMNS``."""
    return _summarise(compactions, sessions, ("session_id", "tier"))
