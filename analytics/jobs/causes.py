"""Why each emergency happened: one cause per post-mortem, from the record, the turns and the
session's own settings. Pure Polars over frames shaped like the store's tables; no replay.

The causes, tried in this order (the first that holds is the cause):

- ``manual``: the compaction was a manual ``/compact`` (trigger ``manual``) that ended in
  Emergency.
- ``fixed_prompt``: what every prompt of the session carries, whatever the config does, reaches
  the Emergency threshold by itself: the system prompt, the harness's hidden overhead and the
  reserve, plus the task (``fixed_tokens``: the system and task bytes with the smallest hidden
  part any provider report up to it showed, bounded by the smallest prompt reported, both less
  the history the transcript lacks; without usage, the estimate through the estimator the
  emergency was decided with; plus the reserve). ``window_needed``
  is the smallest window at which the fixed part stays under Warn and, with the newest turn,
  under Emergency.
- ``history_missing``: the transcript starts mid-session (``sessions.history_missing_tokens``)
  and the estimator carried that unseen history as overhead at this turn: with it the fixed
  part and the newest turn reach Emergency, which no compaction of the file's messages can
  change. ``window_needed`` as for a fixed prompt, with the history carried.
- ``large_turn``: the fixed part and what no compaction can take out of the newest turn
  (``newest_tokens``: the messages added since the previous turn that are not tool results or
  the task: a tool result can go to a file, the model's own reply and the user's words cannot)
  reach the Emergency threshold together. ``window_needed`` is where they stay under it.
- ``summarizer_failed``: the summariser failed on the way (an error code ``summarizer_failed:*``,
  ``summary_empty`` or ``summary_not_smaller`` on the record) and the fallback escalated.
- ``undercount``: the calibrated estimator moved up at the last usage report by more than
  ``UNDERCOUNT_FACTOR`` (``factor_before`` -> ``factor_after``, tokens per raw ``bytes/4``
  token on the previous prompt), and under the factor before, the emergency's turn would have
  stayed below the Emergency threshold: the context had been larger than the estimate said.
- ``burst``: the messages added since the previous turn, together (parallel tool results are
  one burst: ``burst_messages`` of them from ``burst_index`` on, ``burst_tokens`` in all, the
  role and tools of the largest), hold at least ``BURST_SHARE`` of the window, or at least
  ``PUSH_SHARE`` while the previous turn was below Full (no compaction could have run) and
  without them the turn would have stayed below Emergency.
- ``floor``: what no config's compaction takes out (``floor_tokens``: the fixed part and the
  newest exchange, the smallest tail any config keeps, its tool results counted as their
  offload preview) is over the Soft threshold: every compaction leaves the context there, so
  growth reaches Emergency whatever the thresholds. Tried right after
  ``large_turn`` when the floor is over Emergency itself (model replies larger than the
  window), else just before ``growth``. ``window_needed`` is where the floor stays under Soft.
- ``growth``: none of the above: the context grew turn by turn and the Soft/Full compactions
  before it (``growth_compactions``: their tier and ratios before and after) did not bring it
  down far enough.

``fixed_prompt``, ``history_missing``, ``large_turn`` and ``floor`` are unavoidable at this
window (``UNAVOIDABLE``): no config change is searched for them, ``window_needed`` says what
would avoid them.

Ratios are ``(tokens + reserve_tokens) / context_window`` on the estimate the tier was decided
on (``turns.tokens_before``). Missing inputs (no usage, no system prompt size, an estimator
without numbers) make a cause less likely to be found, never an error.
"""

from __future__ import annotations

import polars as pl

from analytics.jobs.common import BYTES_PER_TOKEN, conform
from analytics.jobs.tools import tool_names

CAUSES = (
    "manual",
    "fixed_prompt",
    "history_missing",
    "large_turn",
    "summarizer_failed",
    "undercount",
    "burst",
    "floor",
    "growth",
)
UNAVOIDABLE = ("fixed_prompt", "history_missing", "large_turn", "floor")
"""Causes no config avoids at the session's window (``window_needed`` says which would)."""
DEFAULT_PREVIEW_CHARS = 4_000
"""What an offload placeholder keeps of a result when the session's config does not say."""
BURST_SHARE = 0.25
PUSH_SHARE = 0.10
UNDERCOUNT_FACTOR = 1.25
SOFT_TIER, FULL_TIER = 2, 3
SUMMARY_FAILURES = ("summarizer_failed", "summary_empty", "summary_not_smaller")

CAUSE_SCHEMA: dict[str, pl.DataType] = {
    "compaction_id": pl.String(),
    "cause": pl.String(),
    "context_window": pl.Int64(),
    "ratio": pl.Float64(),
    "threshold": pl.Float64(),
    "fixed_tokens": pl.Int64(),
    "newest_tokens": pl.Int64(),
    "window_needed": pl.Int64(),
    "smallest_prompt_tokens": pl.Int64(),
    "history_missing_tokens": pl.Int64(),
    "floor_tokens": pl.Int64(),
    "error_code": pl.String(),
    "factor_before": pl.Float64(),
    "factor_after": pl.Float64(),
    "ratio_at_old_factor": pl.Float64(),
    "prev_ratio": pl.Float64(),
    "burst_index": pl.Int64(),
    "burst_role": pl.String(),
    "burst_tool": pl.String(),
    "burst_tokens": pl.Int64(),
    "burst_messages": pl.Int64(),
    "growth_compactions": pl.String(),
}
"""The job's columns, one row per emergency (``growth_compactions`` is JSON text)."""

_SESSION_SCHEMA = {
    "session_id": pl.String(),
    "warn": pl.Float64(),
    "full": pl.Float64(),
    "emergency": pl.Float64(),
    "soft": pl.Float64(),
    "reserve_tokens": pl.Int64(),
    "system_bytes": pl.Int64(),
    "history_missing_tokens": pl.Int64(),
    "config": pl.String(),
}
_TURN_SCHEMA = {
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "turn": pl.Int64(),
    "tokens": pl.Int64(),
    "tokens_before": pl.Int64(),
    "history_messages": pl.Int64(),
    "context_window": pl.Int64(),
    "reserve_tokens": pl.Int64(),
}
_RECORD_SCHEMA = {
    "id": pl.String(),
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "tier": pl.Int64(),
    "trigger": pl.String(),
    "estimator": pl.String(),
    "estimator_slope": pl.Float64(),
    "estimator_overhead": pl.Float64(),
    "error_codes": pl.List(pl.String()),
    "effective": pl.Boolean(),
    "tokens_before": pl.Int64(),
    "tokens_after": pl.Int64(),
    "context_window": pl.Int64(),
}
_MESSAGE_SCHEMA = {
    "session_id": pl.String(),
    "idx": pl.Int64(),
    "role": pl.String(),
    "bytes": pl.Int64(),
    "tool_call_id": pl.String(),
}
_USAGE_SCHEMA = {
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "turn": pl.Int64(),
    "history_messages": pl.Int64(),
    "input_tokens": pl.Int64(),
    "estimated_input_tokens": pl.Int64(),
    "raw_estimated_tokens": pl.Int64(),
}


def emergency_causes(
    emergencies: pl.DataFrame,
    compactions: pl.DataFrame,
    turns: pl.DataFrame,
    messages: pl.DataFrame,
    sessions: pl.DataFrame,
    usage: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per emergency (``CAUSE_SCHEMA``), in the order of ``emergencies``."""
    if emergencies.is_empty():
        return pl.DataFrame(schema=CAUSE_SCHEMA)
    compactions = conform(compactions, _RECORD_SCHEMA)
    base = _base(emergencies, compactions, turns, sessions).join(
        _tasks(messages), on="session_id", how="left"
    )
    base = base.join(_fixed(base, usage), on="compaction_id", how="left")
    base = base.join(_undercount(base, usage), on="compaction_id", how="left")
    base = base.join(_burst(base, messages), on="compaction_id", how="left")
    base = base.join(_floor(base, messages), on="compaction_id", how="left")
    base = base.join(_growth(base, compactions), on="compaction_id", how="left")
    window = pl.col("context_window")
    newest = pl.col("newest_tokens").fill_null(0)
    fixed_part = pl.col("fixed_tokens")
    with_history = fixed_part + pl.col("carried_history").fill_null(0)
    at_emergency = pl.col("emergency") * window
    fixed = fixed_part >= at_emergency
    history = (pl.col("carried_history") > 0) & (with_history + newest >= at_emergency)
    large_turn = fixed_part + newest >= at_emergency
    failed = pl.col("error_code").is_not_null()
    under = (pl.col("factor_after") >= pl.col("factor_before") * UNDERCOUNT_FACTOR) & (
        pl.col("ratio_at_old_factor") < pl.col("emergency")
    )
    burst_share = pl.col("burst_tokens") / window
    burst = (burst_share >= BURST_SHARE) | (
        (burst_share >= PUSH_SHARE)
        & (pl.col("prev_ratio").fill_null(0.0) < pl.col("full"))
        & (pl.col("ratio") - burst_share < pl.col("emergency"))
    )
    floor = pl.col("floor_tokens") >= pl.col("soft") * window
    floor_over = pl.col("floor_tokens") >= at_emergency
    cause = (
        pl.when(pl.col("trigger") == "manual")
        .then(pl.lit("manual"))
        .when(fixed.fill_null(False))
        .then(pl.lit("fixed_prompt"))
        .when(history.fill_null(False))
        .then(pl.lit("history_missing"))
        .when(large_turn.fill_null(False))
        .then(pl.lit("large_turn"))
        .when(floor_over.fill_null(False))
        .then(pl.lit("floor"))
        .when(failed)
        .then(pl.lit("summarizer_failed"))
        .when(under.fill_null(False))
        .then(pl.lit("undercount"))
        .when(burst.fill_null(False))
        .then(pl.lit("burst"))
        .when(floor.fill_null(False))
        .then(pl.lit("floor"))
        .otherwise(pl.lit("growth"))
    )
    carried = pl.when(cause == "history_missing").then(with_history).otherwise(fixed_part)
    needed = (
        pl.when(cause == "floor")
        .then(pl.col("floor_tokens") // pl.col("soft") + 1)
        .when(cause.is_in(UNAVOIDABLE))
        .then(
            pl.max_horizontal(
                carried // pl.col("warn") + 1, (carried + newest) // pl.col("emergency") + 1
            )
        )
        .otherwise(None)
    )
    out = base.with_columns(
        cause.alias("cause"),
        pl.col("emergency").alias("threshold"),
        needed.cast(pl.Int64).alias("window_needed"),
    )
    return conform(out, CAUSE_SCHEMA)


def _base(
    emergencies: pl.DataFrame,
    compactions: pl.DataFrame,
    turns: pl.DataFrame,
    sessions: pl.DataFrame,
) -> pl.DataFrame:
    """Each emergency with its record, its turn and the turn before, and its session's settings."""
    records = compactions.select(
        pl.col("id").alias("compaction_id"),
        "trigger",
        "estimator",
        pl.col("estimator_slope").alias("slope"),
        pl.col("estimator_overhead").alias("overhead"),
        pl.col("error_codes")
        .list.eval(
            pl.element().filter(pl.element().str.split(":").list.first().is_in(SUMMARY_FAILURES))
        )
        .list.first()
        .alias("error_code"),
    )
    turn_rows = conform(turns, _TURN_SCHEMA)
    prev = turn_rows.select(
        "session_id",
        (pl.col("turn") + 1).alias("turn"),
        pl.col("history_messages").alias("prev_history"),
        pl.col("seq").alias("prev_seq"),
        (
            (pl.col("tokens") + pl.col("reserve_tokens").fill_null(0)) / pl.col("context_window")
        ).alias("prev_ratio"),
    )
    settings = conform(sessions, _SESSION_SCHEMA).rename({"reserve_tokens": "session_reserve"})
    return (
        emergencies.select("session_id", "compaction_id", "seq", "turn")
        .join(records, on="compaction_id", how="left")
        .join(
            turn_rows.drop("seq", "tokens").rename({"history_messages": "em_history"}),
            on=["session_id", "turn"],
            how="left",
        )
        .join(prev, on=["session_id", "turn"], how="left")
        .join(settings, on="session_id", how="left")
        .with_columns(
            pl.col("slope").fill_null(1.0),  # an estimator without numbers: bytes / 4
            pl.col("overhead").fill_null(0.0),
            pl.coalesce("reserve_tokens", "session_reserve", pl.lit(0)).alias("reserve"),
        )
        .with_columns(
            ((pl.col("tokens_before") + pl.col("reserve")) / pl.col("context_window")).alias(
                "ratio"
            )
        )
    )


def _tasks(messages: pl.DataFrame) -> pl.DataFrame:
    """session_id, task_idx, task_bytes: the first user message that is not a tool result."""
    return (
        conform(messages, _MESSAGE_SCHEMA)
        .filter((pl.col("role") == "user") & pl.col("tool_call_id").is_null())
        .sort("idx")
        .group_by("session_id")
        .agg(
            pl.col("idx").first().alias("task_idx"),
            pl.col("bytes").first().cast(pl.Int64).alias("task_bytes"),
        )
    )


def _fixed(base: pl.DataFrame, usage: pl.DataFrame | None) -> pl.DataFrame:
    """compaction_id, fixed_tokens, smallest_prompt_tokens, carried_history: what every prompt
    carries up to the emergency's turn.

    Without usage it is the estimate of system and task bytes through the emergency's
    estimator. With usage it is measured: each report's prompt less the byte estimate of what
    it held (``raw_estimated_tokens``) is the harness's hidden part, and the smallest such gap
    up to the turn, with the system and task bytes, is the fixed part (a report from late in a
    session says the same as one from its start, and nothing more). It is bounded by the
    smallest prompt reported up to the turn (every prompt holds it; a harness that sent its
    repo map until it dropped it had it fixed until then). A transcript that starts
    mid-session has its missing history in every report: it is taken out of both.
    ``carried_history``: how much of that history the estimator held as overhead at the turn
    (it learns it as overhead until a smaller prompt shows it is not)."""
    raw = (pl.col("system_bytes").fill_null(0) + pl.col("task_bytes").fill_null(0)) // (
        BYTES_PER_TOKEN
    )
    estimated = (raw * pl.col("slope") + pl.col("overhead")).floor().cast(pl.Int64)
    missing = pl.col("history_missing_tokens").fill_null(0)
    if usage is not None and not usage.is_empty():
        reports = conform(usage, _USAGE_SCHEMA).filter(pl.col("input_tokens") > 0)
        gap = pl.col("input_tokens") - pl.coalesce("raw_estimated_tokens", "input_tokens")
        found = (
            base.select("compaction_id", "session_id", "em_history")
            .join(reports, on="session_id")
            .filter(pl.col("history_messages") <= pl.col("em_history"))
            .group_by("compaction_id")
            .agg(
                pl.col("input_tokens").min().alias("smallest_prompt_tokens"),
                gap.min().alias("hidden"),
            )
        )
        out = base.join(found, on="compaction_id", how="left")
    else:
        out = base.with_columns(
            pl.lit(None, pl.Int64).alias("smallest_prompt_tokens"),
            pl.lit(None, pl.Int64).alias("hidden"),
        )
    measured = raw + pl.col("hidden") - missing
    bound = pl.col("smallest_prompt_tokens") - missing
    fixed = pl.min_horizontal(pl.coalesce(measured, estimated), bound).clip(lower_bound=0)
    return out.select(
        "compaction_id",
        (fixed + pl.col("reserve")).cast(pl.Int64).alias("fixed_tokens"),
        "smallest_prompt_tokens",
        pl.min_horizontal(missing, (estimated - fixed).clip(lower_bound=0))
        .cast(pl.Int64)
        .alias("carried_history"),
    )


def _undercount(base: pl.DataFrame, usage: pl.DataFrame | None) -> pl.DataFrame:
    """compaction_id, factor_before, factor_after, ratio_at_old_factor, from the last usage
    report before the emergency's turn (the one the estimator learned from last)."""
    if usage is None or usage.is_empty():
        return base.select(
            "compaction_id",
            *(pl.lit(None, pl.Float64).alias(c) for c in ("factor_before", "factor_after")),
            pl.lit(None, pl.Float64).alias("ratio_at_old_factor"),
        )
    reports = conform(usage, _USAGE_SCHEMA).filter(pl.col("raw_estimated_tokens") > 0)
    last = (
        base.select("compaction_id", "session_id", "seq")
        .join(reports.rename({"seq": "u_seq"}), on="session_id")
        .filter(pl.col("u_seq") < pl.col("seq"))
        .sort("u_seq")
        .group_by("compaction_id")
        .last()
        .select("compaction_id", "estimated_input_tokens", "raw_estimated_tokens")
    )
    raw = pl.col("raw_estimated_tokens")
    before = pl.col("estimated_input_tokens") / raw
    after = (raw * pl.col("slope") + pl.col("overhead")) / raw
    em_raw = (pl.col("tokens_before") - pl.col("overhead")) / pl.col("slope")
    return (
        base.select("compaction_id", "slope", "overhead", "tokens_before", "reserve")
        .join(base.select("compaction_id", "context_window"), on="compaction_id")
        .join(last, on="compaction_id", how="left")
        .select(
            "compaction_id",
            before.alias("factor_before"),
            after.alias("factor_after"),
            ((em_raw * before + pl.col("reserve")) / pl.col("context_window")).alias(
                "ratio_at_old_factor"
            ),
        )
    )


def _added(base: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    """Each emergency's messages added since the previous turn, with their tokens through the
    emergency's estimator slope."""
    spans = base.select(
        "compaction_id",
        "session_id",
        pl.col("prev_history").fill_null(0).alias("lo"),
        pl.col("em_history").alias("hi"),
        "slope",
        "task_idx",
        *(["cap"] if "cap" in base.columns else []),
    )
    return (
        spans.join(conform(messages, _MESSAGE_SCHEMA), on="session_id")
        .filter((pl.col("idx") >= pl.col("lo")) & (pl.col("idx") < pl.col("hi")))
        .with_columns(_tokens().alias("tokens"))
    )


def _tokens() -> pl.Expr:
    return ((pl.col("bytes") // BYTES_PER_TOKEN) * pl.col("slope")).floor().cast(pl.Int64)


def _burst(base: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    """compaction_id, the burst: every message added since the previous turn together (from
    ``burst_index``, ``burst_messages`` of them, ``burst_tokens`` in all; the role and tool of
    the largest), and ``newest_tokens``: those that are not tool results (a tool result can go
    to a file; the model's own reply and the user's words cannot)."""
    added = _added(base, messages)
    together = added.group_by("compaction_id").agg(
        pl.col("idx").min().alias("burst_index"),
        pl.len().cast(pl.Int64).alias("burst_messages"),
        pl.col("tokens").sum().alias("burst_tokens"),
        pl.col("tokens")
        .filter(pl.col("tool_call_id").is_null() & pl.col("idx").ne_missing(pl.col("task_idx")))
        .sum()
        .alias("newest_tokens"),
    )
    largest = (
        added.sort(["compaction_id", "bytes", "idx"], descending=[False, True, False])
        .group_by("compaction_id", maintain_order=True)
        .first()
    )
    names = tool_names(messages, added)
    tools = (
        added.join(names, on=["session_id", "idx"], how="left")
        .filter(pl.col("tool_name").is_not_null())
        .group_by("compaction_id")
        .agg(pl.col("tool_name").unique(maintain_order=True).str.join(", ").alias("burst_tool"))
    )
    return (
        largest.select("compaction_id", pl.col("role").alias("burst_role"))
        .join(together, on="compaction_id", how="left")
        .join(tools, on="compaction_id", how="left")
    )


def _floor(base: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    """compaction_id, floor_tokens: what no config's compaction takes out of the emergency's
    view — the fixed part and the newest exchange (the messages added since the previous
    turn: the smallest tail any config keeps, one message with its tool pairs whole), its tool
    results counted as the offload preview the session's config would leave of them."""
    preview = pl.col("config").str.json_path_match("$.preview_chars").cast(pl.Int64)
    cap = (preview.fill_null(DEFAULT_PREVIEW_CHARS) // BYTES_PER_TOKEN).alias("cap")
    kept = (
        _added(base.with_columns(cap), messages)
        .filter(pl.col("idx").ne_missing(pl.col("task_idx")))  # in the fixed part already
        .with_columns(
            pl.when(pl.col("tool_call_id").is_not_null())
            .then(pl.min_horizontal(pl.col("tokens"), pl.col("cap")))
            .otherwise(pl.col("tokens"))
            .alias("kept")
        )
        .group_by("compaction_id")
        .agg(pl.col("kept").sum().alias("exchange_tokens"))
    )
    return (
        base.select("compaction_id", "fixed_tokens")
        .join(kept, on="compaction_id", how="left")
        .select(
            "compaction_id",
            (pl.col("fixed_tokens") + pl.col("exchange_tokens").fill_null(0)).alias("floor_tokens"),
        )
    )


def _growth(base: pl.DataFrame, compactions: pl.DataFrame) -> pl.DataFrame:
    """compaction_id and the Soft/Full compactions of the session before it, as JSON text."""
    window = pl.col("context_window")
    earlier = (
        base.select("compaction_id", "session_id", pl.col("seq").alias("e_seq"), "reserve")
        .join(
            compactions.filter(
                pl.col("tier").is_in([SOFT_TIER, FULL_TIER]) & pl.col("effective").fill_null(True)
            ).select(
                "session_id",
                "seq",
                "tier",
                "tokens_before",
                "tokens_after",
                "context_window",
            ),
            on="session_id",
        )
        .filter((pl.col("seq") < pl.col("e_seq")) & (window > 0))
        .sort("seq")
        .select(
            "compaction_id",
            pl.struct(
                pl.col("tier").cast(pl.Int64),
                ((pl.col("tokens_before") + pl.col("reserve")) / window)
                .round(4)
                .alias("ratio_before"),
                ((pl.col("tokens_after") + pl.col("reserve")) / window)
                .round(4)
                .alias("ratio_after"),
            )
            .struct.json_encode()
            .alias("item"),
        )
    )
    return (
        earlier.group_by("compaction_id")
        .agg(pl.col("item").str.join(","))
        .select("compaction_id", ("[" + pl.col("item") + "]").alias("growth_compactions"))
    )
