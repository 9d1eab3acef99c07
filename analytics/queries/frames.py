"""Named reads of the event store, returning Polars frames shaped for the analytics jobs.

Each function returns one frame with the columns the jobs expect (see ``analytics.jobs``):
the store's projection tables, with superseded or deleted sessions left out, thresholds taken
out of each session's config, and message text joined from the content-addressed blobs. All go
through ``EventStore.query``; nothing here writes, and nothing here computes a figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from analytics.jobs.costs import TURN_COST_COLUMNS
from analytics.store import EventStore
from analytics.store.results import TABLE_EXISTS_SQL
from compactor import CompactorConfig

EFFECTIVE = "coalesce(effective, true)"
"""SQL: a compaction that changed the view. A null ``effective`` (records written before the
flag existed) counts as effective, as in ``analytics.jobs.common.is_effective``."""


def live(column: str = "session_id") -> str:
    """The SQL condition that ``column`` names a live session (not deleted, not superseded)."""
    return f"{column} IN (SELECT session_id FROM sessions WHERE deleted_at IS NULL)"


LIVE = live()
"""``live()`` on the ``session_id`` column: the condition every read of a projection uses."""


def _scope(sessions: Sequence[str] | None, column: str = "session_id") -> tuple[str, list[str]]:
    """A WHERE clause limiting rows to live sessions, and to ``sessions`` when given."""
    if sessions is None:
        return f"WHERE {live(column)}", []
    marks = ", ".join("?" for _ in sessions) or "NULL"
    return f"WHERE {column} IN ({marks}) AND {live(column)}", list(sessions)


_DEFAULTS = CompactorConfig()
_THRESHOLDS = ",\n".join(
    f"coalesce(TRY_CAST(config->>'{name}' AS {kind}), {getattr(_DEFAULTS, name)}) AS {name}"
    for name, kind in (
        ("warn", "DOUBLE"),
        ("soft", "DOUBLE"),
        ("full", "DOUBLE"),
        ("emergency", "DOUBLE"),
        ("emergency_target", "DOUBLE"),
        ("reserve_tokens", "BIGINT"),
    )
)
"""Each session's thresholds from its config; the library's defaults where it has none."""


def sessions_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    where, params = _scope(sessions)
    return store.query(
        f"""SELECT session_id, started_at, context_window, model, agent, parent_session_id,
              capture, source,
              {_THRESHOLDS},
              CAST(config AS VARCHAR) AS config, deleted_at, history_missing_tokens,
              (SELECT max(b.bytes) FROM message_blobs b
               WHERE b.sha256 = sessions.system_prompt_sha256) AS system_bytes
            FROM sessions {where} ORDER BY session_id""",
        params,
    )


def turn_sessions(store: EventStore) -> pl.DataFrame:
    """One row per turn of a live session with its session id only: what counting turns needs."""
    where, params = _scope(None)
    return store.query(f"SELECT session_id FROM turns {where}", params)


def turns_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    where, params = _scope(sessions)
    return store.query(
        f"""SELECT session_id, seq, turn, tokens, tokens_before, tier, messages,
              history_messages, history_tokens, context_window, reserve_tokens, occurred_at
            FROM turns {where} ORDER BY session_id, seq""",
        params,
    )


def model_calls_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    """session_id, seq of every assistant message: where an imported transcript called the
    model (its turns: imports record no ``turns`` rows)."""
    where, params = _scope(sessions)
    return store.query(
        f"""SELECT session_id, seq FROM messages {where} AND role = 'assistant'
            ORDER BY session_id, seq""",
        params,
    )


TURN_COSTS_TABLE = "job_turn_costs"
"""The costs job's table (``analytics.queries.materialize``): one row per turn."""


def turn_costs_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    """The costs job's rows of live sessions (``analytics.jobs.costs.TURN_COST_COLUMNS``), in
    (session_id, seq) order; empty with those columns before the job has run."""
    if not store.query(TABLE_EXISTS_SQL, [TURN_COSTS_TABLE]).item():
        return pl.DataFrame(schema=TURN_COST_COLUMNS)
    where, params = _scope(sessions)
    columns = ", ".join(TURN_COST_COLUMNS)
    return store.query(
        f"SELECT {columns} FROM {TURN_COSTS_TABLE} {where} ORDER BY session_id, seq", params
    )


def priced_turns_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    """``turns_frame`` with each turn's predicted ``cache_read_tokens``, ``cache_write_tokens``,
    ``uncached_tokens``, ``cost``, ``uncompacted_cost``, ``summarizer_cost`` and ``profile``
    joined from the costs job (nulls where it has not run): what the CLI and the app read per
    turn, beside the provider-reported figures of ``usage_frame``."""
    turns = turns_frame(store, sessions)
    costs = turn_costs_frame(store, sessions).select(
        "session_id",
        "seq",
        "profile",
        "prompt_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "uncached_tokens",
        "cost",
        "uncompacted_cost",
        "summarizer_cost",
    )
    return turns.join(costs, on=["session_id", "seq"], how="left")


def compactions_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    where, params = _scope(sessions)
    return store.query(
        f"""SELECT id, session_id, seq, occurred_at, tier, tier_name, tokens_before,
              tokens_after, msgs_before, msgs_after, summarized, preserved_tail,
              compression_ratio, duration_ms, error,
              CAST(coalesce(error_codes, '[]') AS VARCHAR[]) AS error_codes, trigger,
              effective, context_window, fallback, summary_text, n_offloaded, n_dropped,
              dropped_bytes, cut, emergency, summarizer_model, summarizer_input_tokens,
              summarizer_output_tokens, summarizer_latency_ms, estimator, estimator_slope,
              estimator_overhead, config_hash, origin, harness, summary_encrypted,
              tokens_before_source, tokens_after_source
            FROM compactions {where} ORDER BY session_id, seq""",
        params,
    )


def anchor_items_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    where, params = _scope(sessions)
    return store.query(
        f"""SELECT compaction_id, session_id, seq, anchor_type, position, item
            FROM anchor_items {where} ORDER BY session_id, seq, anchor_type, position""",
        params,
    )


def views_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    where, params = _scope(sessions)
    return store.query(
        f"""SELECT compaction_id, session_id, side, position, history_index, sha256, role,
              bytes, status
            FROM compaction_views {where} ORDER BY session_id, compaction_id, side, position""",
        params,
    )


def messages_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    where, params = _scope(sessions, "m.session_id")
    return store.query(
        f"""SELECT m.session_id, m.idx, m.sha256, m.role, m.bytes, m.tool_call_id,
              CAST(coalesce(m.tool_call_ids, '[]') AS VARCHAR[]) AS tool_call_ids,
              CAST(coalesce(m.tool_names, '[]') AS VARCHAR[]) AS tool_names,
              CAST(m.tool_calls AS VARCHAR) AS tool_calls, m.is_error, m.name,
              b.content, m.occurred_at
            FROM messages m LEFT JOIN message_blobs b ON b.sha256 = m.sha256
            {where} ORDER BY m.session_id, m.idx""",
        params,
    )


def synthetic_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    where, params = _scope(sessions, "s.session_id")
    return store.query(
        f"""SELECT s.compaction_id, s.session_id, s.sha256, s.role, s.bytes, s.source_index,
              s.tool_call_id, b.content
            FROM synthetic s LEFT JOIN message_blobs b ON b.sha256 = s.sha256
            {where} ORDER BY s.session_id, s.compaction_id""",
        params,
    )


def offloads_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    where, params = _scope(sessions)
    return store.query(
        f"""SELECT record_id, session_id, tool_call_id, tool_name, file_path, bytes, lines,
              sha256, occurred_at
            FROM offloads {where} ORDER BY session_id, occurred_at""",
        params,
    )


def usage_frame(store: EventStore, sessions: Sequence[str] | None = None) -> pl.DataFrame:
    where, params = _scope(sessions)
    return store.query(
        f"""SELECT session_id, seq, turn, history_messages, estimated_input_tokens,
              raw_estimated_tokens, prompt, input_tokens, output_tokens, cache_read_tokens,
              cache_creation_tokens, model
            FROM usage {where} ORDER BY session_id, seq""",
        params,
    )


def session_watermarks(store: EventStore) -> pl.DataFrame:
    """The newest event seq of every live session: what a job's results must cover."""
    return store.query(
        f"""SELECT session_id, max(seq) AS watermark FROM events
            WHERE {live()} GROUP BY session_id ORDER BY session_id"""
    )
