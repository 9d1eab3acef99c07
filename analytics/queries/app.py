"""Narrow reads the app's fleet pages need, returning Polars frames.

``analytics.queries.frames`` returns whole job input frames; on a store with 10^5 compactions the
app's lists (sessions with their counts, the compactions of one session, the emergencies) need a few
columns and one aggregate each, so they are read here in one SQL statement apiece. Everything
goes through ``EventStore.query``; nothing here writes, and nothing here is a figure the jobs
compute (ratios, survival, post-mortems stay in ``analytics.jobs``). ``config_toml`` is the one
piece that is no read: a post-mortem's config as the file ``replay --config`` loads.
``turn_cost_rows`` and ``native_sessions`` serve the timeline's cost chart and the harness
compactions page: the costs job's figures per turn beside the provider's own cache reads, and
which sessions hold a harness's own compactions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import polars as pl
import tomli_w
from pydantic import ValidationError

from analytics.jobs.prices import BUILTIN_PROFILES
from analytics.queries.frames import EFFECTIVE, LIVE, priced_turns_frame, usage_frame
from analytics.queries.materialize import job_table_exists
from analytics.store import EventStore
from compactor import CompactorConfig


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
    emergency, and cause (the post-mortem job's; null before it ran)."""
    where, params = (f"AND {LIVE}", []) if session_id is None else ("AND session_id = ?", [])
    if session_id is not None:
        params = [session_id]
    cause = "NULL::VARCHAR AS cause"
    join = ""
    if job_table_exists(store, "job_emergencies"):
        cause = "j.cause"
        join = "LEFT JOIN job_emergencies j ON j.compaction_id = c.id"
    return store.query(
        f"""SELECT c.session_id, c.id AS compaction_id, c.seq, c.occurred_at, c.tokens_before,
              c.tokens_after, c.n_dropped, c.emergency, {cause}
            FROM (SELECT * FROM compactions WHERE tier = 4 AND {EFFECTIVE} {where}) c {join}
            ORDER BY c.occurred_at DESC, c.session_id, c.seq LIMIT 1000""",
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


def estimate_moves(store: EventStore, session_id: str, share: float = 0.1) -> pl.DataFrame:
    """The usage reports after which the session's estimate moved: the provider counted an
    input at least ``share`` of the window and a quarter of the estimate away from it, and the
    next turn's history estimate moved by at least half that gap the same way (a calibrated
    estimator learning a hidden prompt; a correction of a few percent is no jump). One row
    each, in order: reported_turn (the turn the report is of), turn (the next one, where the
    timeline jumps), estimated_tokens, raw_estimated_tokens (bytes/4), input_tokens (the
    provider's count), tokens (the view sent at ``turn``), history_before, history_after (the
    uncompacted history's estimate at the two turns)."""
    return store.query(
        """WITH t AS (SELECT seq, turn, tokens, coalesce(history_tokens, tokens) AS history
                      FROM turns WHERE session_id = ?),
                u AS (SELECT seq, estimated_input_tokens AS estimated,
                             raw_estimated_tokens AS raw, input_tokens AS reported
                      FROM usage WHERE session_id = ? AND input_tokens IS NOT NULL
                        AND estimated_input_tokens IS NOT NULL),
                w AS (SELECT max(context_window) AS window FROM sessions
                      WHERE session_id = ?),
                m AS (SELECT u.*,
                        (SELECT max_by(turn, seq) FROM t WHERE t.seq < u.seq) AS reported_turn,
                        (SELECT max_by(history, seq) FROM t WHERE t.seq < u.seq)
                          AS history_before,
                        (SELECT min_by(turn, seq) FROM t WHERE t.seq > u.seq) AS turn,
                        (SELECT min_by(tokens, seq) FROM t WHERE t.seq > u.seq) AS tokens,
                        (SELECT min_by(history, seq) FROM t WHERE t.seq > u.seq)
                          AS history_after
                      FROM u)
           SELECT reported_turn, turn, estimated AS estimated_tokens,
                  raw AS raw_estimated_tokens, reported AS input_tokens, tokens,
                  history_before, history_after
           FROM m, w
           WHERE turn IS NOT NULL AND abs(reported - estimated) >= ? * w.window
             AND abs(reported - estimated) >= 0.25 * estimated
             AND sign(history_after - history_before) = sign(reported - estimated)
             AND abs(history_after - history_before) >= 0.5 * abs(reported - estimated)
           ORDER BY m.seq""",
        [session_id, session_id, session_id, share],
    )


def anchor_coverage(store: EventStore, session_id: str | None = None) -> dict[str, Any]:
    """What anchor retention has to count (of one session, or of every live session): sessions,
    metadata_sessions (captured without content), compactions (effective), by tier (warn, soft,
    full, emergency), fell_back (Soft/Full whose summariser failed: trimmed without a
    summary), fell_back_error (the most frequent error of those), with_items (compactions
    with anchor items). Enough to say why a retention chart is empty."""
    scope, params = (LIVE, []) if session_id is None else ("session_id = ?", [session_id])
    row = store.query(
        f"""WITH c AS (SELECT id, tier, fallback, error FROM compactions
                       WHERE {scope} AND {EFFECTIVE} AND tier > 0),
                 s AS (SELECT capture FROM sessions WHERE {scope} AND deleted_at IS NULL)
            SELECT (SELECT count(*) FROM s) AS sessions,
                   (SELECT count(*) FROM s WHERE capture = 'metadata') AS metadata_sessions,
                   count(*) AS compactions,
                   count(*) FILTER (WHERE tier = 1) AS warn,
                   count(*) FILTER (WHERE tier = 2) AS soft,
                   count(*) FILTER (WHERE tier = 3) AS full,
                   count(*) FILTER (WHERE tier = 4) AS emergency,
                   count(*) FILTER (WHERE tier IN (2, 3) AND fallback LIKE '%budget_trim%')
                     AS fell_back,
                   mode(error) FILTER (WHERE tier IN (2, 3) AND fallback LIKE '%budget_trim%')
                     AS fell_back_error,
                   (SELECT count(DISTINCT compaction_id) FROM anchor_items
                    WHERE compaction_id IN (SELECT id FROM c)) AS with_items
            FROM c""",
        params * 2,
    )
    return row.row(0, named=True)


def config_toml(config: Mapping[str, Any]) -> str:
    """``config`` (a ``CompactorConfig`` dict, e.g. a post-mortem's ``smallest_change_config``)
    as the TOML file ``compactlens replay --config`` loads: validated first (``ValueError``
    naming the bad field), fields left unset (None) omitted, since TOML has no null."""
    try:
        checked = CompactorConfig.model_validate(dict(config))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "config"
        raise ValueError(
            f"not a CompactorConfig: {where}: {err['msg'].removeprefix('Value error, ')} (got "
            f"{err.get('input')!r}); re-run `compactlens postmortem` to recompute it"
        ) from None
    return tomli_w.dumps(checked.model_dump(mode="json", exclude_none=True))


def event_count(store: EventStore) -> int:
    """How many events the store holds: changes exactly when an ingest added some."""
    return int(store.query("SELECT count(*) AS n FROM events").item())


def turn_cost_rows(store: EventStore, session_id: str) -> pl.DataFrame:
    """One session's turns with the costs job's prediction and the provider's report: turn,
    cache_read_tokens, cache_write_tokens, uncached_tokens (predicted), cost, profile,
    currency (the profile's; null before the costs job ran) and reported_cache_read_tokens
    (the cache reads of the ``usage`` reports of that turn's model call, summed: a report
    belongs to the newest turn before it in seq order, as in ``estimate_moves``; null where
    the provider reported none)."""
    turns = priced_turns_frame(store, [session_id]).sort("seq")
    usage = usage_frame(store, [session_id]).filter(pl.col("cache_read_tokens").is_not_null())
    reported = (
        usage.sort("seq")
        .select("seq", "cache_read_tokens")
        .join_asof(turns.select("seq", turn_seq="seq"), left_on="seq", right_on="turn_seq")
        .group_by("turn_seq")
        .agg(reported_cache_read_tokens=pl.col("cache_read_tokens").sum())
    )
    currencies = {name: p.currency for name, p in BUILTIN_PROFILES.items()}
    return (
        turns.join(reported, left_on="seq", right_on="turn_seq", how="left")
        .select(
            "turn",
            "cache_read_tokens",
            "cache_write_tokens",
            "uncached_tokens",
            "cost",
            "profile",
            "reported_cache_read_tokens",
        )
        .with_columns(currency=pl.col("profile").replace_strict(currencies, default=None))
    )


def native_sessions(store: EventStore) -> pl.DataFrame:
    """Live sessions holding compactions their harness made itself (``origin = 'native'``),
    newest first: session_id, harness, compactions, agent, started_at."""
    return store.query(
        f"""SELECT c.session_id, any_value(c.harness) AS harness, count(*) AS compactions,
                  any_value(s.agent) AS agent, any_value(s.started_at) AS started_at
           FROM compactions c JOIN sessions s USING (session_id)
           WHERE c.origin = 'native' AND c.{LIVE}
           GROUP BY c.session_id ORDER BY started_at DESC NULLS LAST, c.session_id"""
    )
