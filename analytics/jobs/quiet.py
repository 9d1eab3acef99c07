"""The decisions not taken (issue 31 item 5): for each turn near a threshold at which nothing
was compacted, why nothing fired.

Every ``prepare()`` is a ``view_prepared`` event (the store's ``turns``): the view's tokens
before (``tokens_before``) and after (``tokens``) that turn's compaction, and the tier the
compactor assessed (``tier``). A turn changed nothing when ``tokens`` is not below
``tokens_before``. Of those, a turn is listed when a tier was due (the compactor ran that tier
and it was a no-op) or when the ratio it was judged on, (tokens_before + reserve) / window, was
within ``margin`` below the next threshold. The reason follows the compactor's own no-op paths
(``ProgressiveCompactor._pipeline``):

- ``below_threshold``: no tier was due; the ratio was under the next threshold (how far under);
- ``no_window``: a tier was forced with no context window to compact to;
- ``all_tail``: a tier was due, but the history held no more than the newest messages the
  compactor always keeps (``min_tail_messages``), so there was nothing older to compact;
- ``nothing_to_offload``: Warn was due, and no tool result older than the tail was over the
  offload threshold (Warn only offloads; it summarises nothing);
- ``offload_held``: Warn was due and had results to offload, but the offload would not have
  paid for itself against the prompt cache before Soft (``CompactorConfig.cache_priced_offload``):
  the session's latest compaction event before the turn is the held Warn record, whose
  ``fallback`` gives the bill;
- ``not_compacted``: a summarising tier was due and the view came back unchanged (its record,
  if the session kept one, says more).

Pure Polars, no I/O.
"""

from __future__ import annotations

import polars as pl

from analytics.jobs.common import conform, drop_deleted, live_sessions, tier_name
from compactor import CompactorConfig

DEFAULTS = CompactorConfig()
MARGIN = 0.05
"""A turn this close below the next threshold (in window shares) counts as near it."""

THRESHOLDS = (("warn", 1), ("soft", 2), ("full", 3), ("emergency", 4))
"""Each threshold's column in ``sessions`` and the tier it starts."""

QUIET_COLUMNS = (
    "session_id",
    "turn",
    "seq",
    "ratio",
    "tier",
    "next_threshold",
    "next_at",
    "reason",
    "words",
)
"""The columns of :func:`quiet_turns`, in order."""

_TURNS = {
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "turn": pl.Int64(),
    "tokens": pl.Int64(),
    "tokens_before": pl.Int64(),
    "tier": pl.Int64(),
    "history_messages": pl.Int64(),
    "context_window": pl.Int64(),
    "reserve_tokens": pl.Int64(),
}
_SESSIONS = {
    "session_id": pl.String(),
    "warn": pl.Float64(),
    "soft": pl.Float64(),
    "full": pl.Float64(),
    "emergency": pl.Float64(),
    "config": pl.String(),
}
_COMPACTIONS = {
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "tier": pl.Int64(),
    "effective": pl.Boolean(),
    "fallback": pl.String(),
}
HELD_PREFIX = "offload held:"
"""How a held Warn record's ``fallback`` starts (``compactor.pipeline._cache_bill``)."""


def quiet_turns(
    turns: pl.DataFrame,
    sessions: pl.DataFrame,
    margin: float = MARGIN,
    compactions: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """:data:`QUIET_COLUMNS` for each listed turn (see the module doc), in (session, turn)
    order: ``ratio`` the share the compactor judged, ``tier`` the tier due (0: none), the next
    threshold above the ratio and where it starts, the reason code and its words.
    ``compactions`` (the store's, optional) tells held Warn offloads from empty ones."""
    settings = conform(live_sessions(sessions), _SESSIONS).unique("session_id", keep="first")
    settings = settings.with_columns(
        *(pl.col(name).fill_null(getattr(DEFAULTS, name)) for name, _tier in THRESHOLDS),
        min_tail=pl.col("config")
        .str.json_path_match("$.min_tail_messages")
        .cast(pl.Int64, strict=False)
        .fill_null(DEFAULTS.min_tail_messages),
    )
    frame = (
        drop_deleted(conform(turns, _TURNS), sessions)
        .join(settings, on="session_id", how="inner")
        .filter(pl.col("tokens_before").is_not_null() & pl.col("tokens").is_not_null())
        .filter(pl.col("tokens") >= pl.col("tokens_before"))  # the turn changed nothing
    )
    window = pl.col("context_window")
    ratio = pl.when(window > 0).then(
        (pl.col("tokens_before") + pl.col("reserve_tokens").fill_null(0)) / window
    )
    frame = frame.with_columns(ratio=ratio, tier=pl.col("tier").fill_null(0))
    above = [pl.when(pl.col("ratio") < pl.col(n)).then(pl.col(n)) for n, _t in THRESHOLDS]
    names = [pl.when(pl.col("ratio") < pl.col(n)).then(pl.lit(n)) for n, _t in THRESHOLDS]
    frame = frame.with_columns(
        next_at=pl.min_horizontal(above),
        next_threshold=pl.coalesce(names),
    )
    frame = _with_held(frame, compactions)
    due = pl.col("tier") > 0
    near = pl.col("next_at").is_not_null() & (pl.col("next_at") - pl.col("ratio") <= margin)
    listed = frame.filter(due | (pl.col("ratio").is_not_null() & near))
    reason = (
        pl.when(~due)
        .then(pl.lit("below_threshold"))
        .when(~(window > 0).fill_null(False))
        .then(pl.lit("no_window"))
        .when(pl.col("history_messages").fill_null(0) <= pl.col("min_tail"))
        .then(pl.lit("all_tail"))
        .when((pl.col("tier") == 1) & pl.col("held").is_not_null())
        .then(pl.lit("offload_held"))
        .when(pl.col("tier") == 1)
        .then(pl.lit("nothing_to_offload"))
        .otherwise(pl.lit("not_compacted"))
    )
    return (
        listed.with_columns(reason=reason)
        .with_columns(words=_words())
        .select(QUIET_COLUMNS)
        .sort("session_id", "turn", "seq")
    )


def _with_held(frame: pl.DataFrame, compactions: pl.DataFrame | None) -> pl.DataFrame:
    """``frame`` with ``held``: the bill of the held Warn offload in force at each turn (the
    session's latest compaction event before it, when that is one), else null."""
    if compactions is None or compactions.is_empty() or frame.is_empty():
        return frame.with_columns(held=pl.lit(None, pl.String()))
    latest = (
        conform(compactions, _COMPACTIONS)
        .filter(pl.col("seq").is_not_null())
        .select(
            "session_id",
            "seq",
            held=pl.when(
                (pl.col("tier") == 1)
                & ~pl.col("effective").fill_null(True)
                & pl.col("fallback").str.starts_with(HELD_PREFIX)
            ).then(pl.col("fallback")),
        )
        .sort("seq")
    )
    return (
        frame.sort("seq")
        .join_asof(
            latest, on="seq", by="session_id", strategy="backward", check_sortedness=False
        )  # both sorted by seq just above
        .sort("session_id", "seq")
    )


def _pct(expr: pl.Expr, decimals: int = 1) -> pl.Expr:
    return (expr * 100).round(decimals).cast(pl.String) + pl.lit("%")


def _words() -> pl.Expr:
    """The reason in words, with the figures that make it checkable."""
    at = _pct(pl.col("ratio"))
    tier = tier_name().str.to_titlecase().fill_null("?")
    return (
        pl.when(pl.col("reason") == "below_threshold")
        .then(
            pl.lit("below ")
            + pl.col("next_threshold").str.to_titlecase()
            + pl.lit(": ")
            + at
            + pl.lit(" of the window, it fires at ")
            + _pct(pl.col("next_at"), 0).str.replace(r"\.0%$", "%")
        )
        .when(pl.col("reason") == "no_window")
        .then(tier + pl.lit(" was due, but the compactor has no context window to compact to"))
        .when(pl.col("reason") == "all_tail")
        .then(
            tier
            + pl.lit(" was due at ")
            + at
            + pl.lit(", but the history is only the newest messages it always keeps")
        )
        .when(pl.col("reason") == "offload_held")
        .then(pl.lit("Warn was due at ") + at + pl.lit("; ") + pl.col("held"))
        .when(pl.col("reason") == "nothing_to_offload")
        .then(
            pl.lit("Warn was due at ")
            + at
            + pl.lit(": no older tool result over the offload threshold was left to offload")
        )
        .otherwise(
            tier + pl.lit(" was due at ") + at + pl.lit(", and the view came back unchanged")
        )
    )
