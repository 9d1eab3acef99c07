"""Why each emergency happened: one cause per post-mortem, from the record, the turns and the
session's own settings. Pure Polars over frames shaped like the store's tables; no replay.

The causes, tried in this order (the first that holds is the cause):

- ``manual``: the compaction was a manual ``/compact`` (trigger ``manual``) that ended in
  Emergency.
- ``fixed_prompt``: what every prompt of the session carries, whatever the config does, reaches
  the Emergency threshold: the system prompt, the harness's hidden overhead (learned by the
  calibrated estimator) and the reserve, plus the task (``fixed_tokens``: the larger of the
  estimate of that, system and task bytes through the estimator the emergency was decided with,
  and the smallest prompt the provider reported up to it, plus the reserve), together with
  what no compaction can take out of the newest turn (``newest_tokens``: the messages added
  since the previous turn that are not tool results or the task: a tool result can go to a
  file, the model's own reply and the user's words cannot). ``window_needed`` is the smallest
  window at which the fixed part stays under Warn and, with the newest turn, under Emergency.
- ``summarizer_failed``: the summariser failed on the way (an error code ``summarizer_failed:*``,
  ``summary_empty`` or ``summary_not_smaller`` on the record) and the fallback escalated.
- ``undercount``: the calibrated estimator moved up at the last usage report by more than
  ``UNDERCOUNT_FACTOR`` (``factor_before`` -> ``factor_after``, tokens per raw ``bytes/4``
  token on the previous prompt), and under the factor before, the emergency's turn would have
  stayed below the Emergency threshold: the context had been larger than the estimate said.
- ``burst``: one message added since the previous turn (``burst_index``, its role, tool and
  tokens) holds at least ``BURST_SHARE`` of the window, or at least ``PUSH_SHARE`` while the
  previous turn was below Full (no compaction could have run) and without that message the
  turn would have stayed below Emergency.
- ``growth``: none of the above: the context grew turn by turn and the Soft/Full compactions
  before it (``growth_compactions``: their tier and ratios before and after) did not bring it
  down far enough.

Ratios are ``(tokens + reserve_tokens) / context_window`` on the estimate the tier was decided
on (``turns.tokens_before``). Missing inputs (no usage, no system prompt size, an estimator name
that says nothing) make a cause less likely to be found, never an error.
"""

from __future__ import annotations

import polars as pl

from analytics.jobs.common import BYTES_PER_TOKEN, conform, estimator_params
from analytics.jobs.tools import tool_names

CAUSES = ("manual", "fixed_prompt", "summarizer_failed", "undercount", "burst", "growth")
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
    "error_code": pl.String(),
    "factor_before": pl.Float64(),
    "factor_after": pl.Float64(),
    "ratio_at_old_factor": pl.Float64(),
    "prev_ratio": pl.Float64(),
    "burst_index": pl.Int64(),
    "burst_role": pl.String(),
    "burst_tool": pl.String(),
    "burst_tokens": pl.Int64(),
    "growth_compactions": pl.String(),
}
"""The job's columns, one row per emergency (``growth_compactions`` is JSON text)."""

_SESSION_SCHEMA = {
    "session_id": pl.String(),
    "warn": pl.Float64(),
    "full": pl.Float64(),
    "emergency": pl.Float64(),
    "reserve_tokens": pl.Int64(),
    "system_bytes": pl.Int64(),
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
    base = base.join(_growth(base, compactions), on="compaction_id", how="left")
    window = pl.col("context_window")
    carried = pl.col("fixed_tokens") + pl.col("newest_tokens").fill_null(0)
    fixed = carried >= pl.col("emergency") * window
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
    cause = (
        pl.when(pl.col("trigger") == "manual")
        .then(pl.lit("manual"))
        .when(fixed.fill_null(False))
        .then(pl.lit("fixed_prompt"))
        .when(failed)
        .then(pl.lit("summarizer_failed"))
        .when(under.fill_null(False))
        .then(pl.lit("undercount"))
        .when(burst.fill_null(False))
        .then(pl.lit("burst"))
        .otherwise(pl.lit("growth"))
    )
    out = base.with_columns(
        cause.alias("cause"),
        pl.col("emergency").alias("threshold"),
        pl.max_horizontal(
            pl.col("fixed_tokens") // pl.col("warn") + 1, carried // pl.col("emergency") + 1
        )
        .cast(pl.Int64)
        .alias("window_needed"),
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
        pl.col("error_codes")
        .list.eval(
            pl.element().filter(pl.element().str.split(":").list.first().is_in(SUMMARY_FAILURES))
        )
        .list.first()
        .alias("error_code"),
    )
    slope, overhead = estimator_params()
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
            slope.alias("slope"),
            overhead.alias("overhead"),
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
    """compaction_id, fixed_tokens, smallest_prompt_tokens: what every prompt carries. Every
    prompt holds the fixed part, so the smallest prompt the provider reported up to the
    emergency's turn (a usage event's ``history_messages`` is the history length it was sent
    with) bounds it from above: a prompt that shrank later (a harness that drops its repo map)
    counts."""
    out = base
    if usage is not None and not usage.is_empty():
        smallest = (
            base.select("compaction_id", "session_id", "em_history")
            .join(
                conform(usage, _USAGE_SCHEMA).filter(pl.col("input_tokens").is_not_null()),
                on="session_id",
            )
            .filter(pl.col("history_messages") <= pl.col("em_history"))
            .group_by("compaction_id")
            .agg(pl.col("input_tokens").min().alias("smallest_prompt_tokens"))
        )
        out = out.join(smallest, on="compaction_id", how="left")
    else:
        out = out.with_columns(pl.lit(None, pl.Int64).alias("smallest_prompt_tokens"))
    raw = (pl.col("system_bytes").fill_null(0) + pl.col("task_bytes").fill_null(0)) // (
        BYTES_PER_TOKEN
    )
    estimated = (raw * pl.col("slope") + pl.col("overhead")).floor().cast(pl.Int64)
    return out.select(
        "compaction_id",
        (pl.max_horizontal(estimated, pl.col("smallest_prompt_tokens")) + pl.col("reserve"))
        .cast(pl.Int64)
        .alias("fixed_tokens"),
        "smallest_prompt_tokens",
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


def _burst(base: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    """compaction_id, the largest message added since the previous turn (index, role, tool,
    tokens through the emergency's estimator slope), and ``newest_tokens``: the messages added
    since then that are not tool results (a tool result can go to a file; the model's own reply
    and the user's words cannot)."""
    spans = base.select(
        "compaction_id",
        "session_id",
        pl.col("prev_history").fill_null(0).alias("lo"),
        pl.col("em_history").alias("hi"),
        "slope",
        "task_idx",
    )
    added = (
        spans.join(conform(messages, _MESSAGE_SCHEMA), on="session_id")
        .filter((pl.col("idx") >= pl.col("lo")) & (pl.col("idx") < pl.col("hi")))
        .with_columns(
            ((pl.col("bytes") // BYTES_PER_TOKEN) * pl.col("slope"))
            .floor()
            .cast(pl.Int64)
            .alias("tokens")
        )
    )
    newest = added.group_by("compaction_id").agg(
        pl.col("tokens")
        .filter(pl.col("tool_call_id").is_null() & pl.col("idx").ne_missing(pl.col("task_idx")))
        .sum()
        .alias("newest_tokens")
    )
    largest = (
        added.sort(["compaction_id", "bytes", "idx"], descending=[False, True, False])
        .group_by("compaction_id", maintain_order=True)
        .first()
    )
    names = tool_names(messages, largest)
    return (
        largest.join(names, on=["session_id", "idx"], how="left")
        .select(
            "compaction_id",
            pl.col("idx").alias("burst_index"),
            pl.col("role").alias("burst_role"),
            pl.col("tool_name").alias("burst_tool"),
            pl.col("tokens").alias("burst_tokens"),
        )
        .join(newest, on="compaction_id", how="left")
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
