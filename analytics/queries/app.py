"""Narrow reads the app's fleet pages need, returning Polars frames.

``analytics.queries.frames`` returns whole job input frames; on a store with 10^5 compactions the
app's lists (sessions with their counts, the compactions of one session, the emergencies) need a few
columns and one aggregate each, so they are read here in one SQL statement apiece. Everything
goes through ``EventStore.query``; nothing here writes, and nothing here is a figure the jobs
compute (ratios, survival, post-mortems stay in ``analytics.jobs``).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from analytics.queries.frames import EFFECTIVE, LIVE
from analytics.queries.materialize import job_table_exists
from analytics.store import EventStore


def session_summaries(store: EventStore) -> pl.DataFrame:
    """One row per live session: session_id, agent, model, source, capture, context_window,
    started_at, turns, peak_tokens, compactions (effective), emergencies (effective), offloads."""
    return store.query(
        f"""WITH t AS (SELECT session_id, count(*) AS turns, max(tokens) AS peak_tokens
                       FROM turns WHERE {LIVE} GROUP BY session_id),
                 c AS (SELECT session_id,
                              count(*) FILTER (WHERE {EFFECTIVE} AND tier > 0)
                                AS compactions,
                              count(*) FILTER (WHERE {EFFECTIVE} AND tier = 4)
                                AS emergencies
                       FROM compactions WHERE {LIVE} GROUP BY session_id),
                 o AS (SELECT session_id, count(*) AS offloads FROM offloads
                       WHERE {LIVE} GROUP BY session_id)
            SELECT s.session_id, s.agent, s.model, s.source, s.capture, s.context_window,
                   s.started_at, coalesce(t.turns, 0) AS turns, t.peak_tokens,
                   coalesce(c.compactions, 0) AS compactions,
                   coalesce(c.emergencies, 0) AS emergencies,
                   coalesce(o.offloads, 0) AS offloads
            FROM sessions s LEFT JOIN t USING (session_id) LEFT JOIN c USING (session_id)
                 LEFT JOIN o USING (session_id)
            WHERE s.deleted_at IS NULL ORDER BY s.started_at DESC NULLS LAST, s.session_id"""
    )


def compaction_figures(store: EventStore) -> pl.DataFrame:
    """The ``compactions`` columns the compression and tier jobs read, without any text (the
    fleet figures read every compaction: summaries would be most of the bytes)."""
    return store.query(
        f"""SELECT id, session_id, seq, tier, trigger, effective, tokens_before, tokens_after,
              compression_ratio, summarizer_input_tokens, summarizer_output_tokens,
              summarizer_latency_ms, duration_ms, fallback, emergency, n_dropped, n_offloaded,
              cut
            FROM compactions WHERE {LIVE}"""
    )


def compaction_list(store: EventStore, session_id: str) -> pl.DataFrame:
    """The compactions of one session in seq order: id, seq, occurred_at, tier, tier_name,
    tokens_before, tokens_after, effective, emergency."""
    return store.query(
        """SELECT id, seq, occurred_at, tier, tier_name, tokens_before, tokens_after, effective,
              emergency
            FROM compactions WHERE session_id = ? ORDER BY seq""",
        [session_id],
    )


def emergency_list(store: EventStore, session_id: str | None = None) -> pl.DataFrame:
    """Effective Emergency compactions (of one session, or of every live session), newest
    first: session_id, compaction_id, seq, occurred_at, tokens_before, tokens_after, n_dropped,
    emergency."""
    where, params = (f"AND {LIVE}", []) if session_id is None else ("AND session_id = ?", [])
    if session_id is not None:
        params = [session_id]
    return store.query(
        f"""SELECT session_id, id AS compaction_id, seq, occurred_at, tokens_before,
              tokens_after, n_dropped, emergency
            FROM compactions WHERE tier = 4 AND {EFFECTIVE} {where}
            ORDER BY occurred_at DESC, session_id, seq LIMIT 1000""",
        params,
    )


def compaction_view(store: EventStore, session_id: str, compaction_id: str) -> pl.DataFrame:
    """The before and after views of one compaction with each message's text: side, position,
    history_index, sha256, role, bytes, status, content (null when not captured)."""
    return store.query(
        """SELECT v.side, v.position, v.history_index, v.sha256, v.role, v.bytes, v.status,
                  (SELECT any_value(b.content) FROM message_blobs b WHERE b.sha256 = v.sha256)
                    AS content
           FROM compaction_views v WHERE v.session_id = ? AND v.compaction_id = ?
           ORDER BY v.side, v.position""",
        [session_id, compaction_id],
    )


def retention_status_rows(store: EventStore) -> pl.DataFrame:
    """The columns of the materialised ``job_retention_detail`` that ``anchor_survival`` reads
    (anchor_type, status, last_compaction, reaches_last), for live sessions; no rows when the
    job never ran. Reading four columns instead of the item texts keeps the fleet page fast."""
    if not job_table_exists(store, "job_retention_detail"):
        schema = {"anchor_type": pl.String, "status": pl.String}
        return pl.DataFrame(
            schema={**schema, "last_compaction": pl.Boolean, "reaches_last": pl.Boolean}
        )
    return store.query(
        f"""SELECT anchor_type, status, last_compaction, reaches_last FROM job_retention_detail
            WHERE {LIVE}"""
    )


def session_metadata(store: EventStore, session_id: str) -> dict[str, Any]:
    """The metadata a session started with (empty when unknown)."""
    frame = store.query(
        "SELECT CAST(metadata AS VARCHAR) AS metadata FROM sessions WHERE session_id = ?",
        [session_id],
    )
    if frame.height == 0 or frame.item(0, 0) is None:
        return {}
    data = json.loads(str(frame.item(0, 0)))
    return data if isinstance(data, dict) else {}


def session_sources(store: EventStore) -> list[str]:
    """The transcript files live sessions were imported or replayed from (their metadata's
    ``source_path``), sorted: what a tuning run started from the app replays by default."""
    frame = store.query(
        """SELECT DISTINCT json_extract_string(metadata, '$.source_path') AS path FROM sessions
           WHERE deleted_at IS NULL
             AND json_extract_string(metadata, '$.source_path') IS NOT NULL
           ORDER BY path"""
    )
    return [str(p) for p in frame.get_column("path").to_list()]


def system_prompt(store: EventStore, session_id: str) -> pl.DataFrame:
    """The session's system prompt as (sha256, content): no row when it had none."""
    return store.query(
        """SELECT b.sha256, b.content FROM sessions s
           JOIN message_blobs b ON b.sha256 = s.system_prompt_sha256
           WHERE s.session_id = ? LIMIT 1""",
        [session_id],
    )


def event_count(store: EventStore) -> int:
    """How many events the store holds: changes exactly when an ingest added some."""
    return int(store.query("SELECT count(*) AS n FROM events").item())
