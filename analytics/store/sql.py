"""The store's SQL: table definitions and the projections, as text (no database access here).

Every projection statement reads the events of one commit from ``batch`` (a temporary table
the store fills per commit), and the projections are a function of the set of stored events,
whatever order and batches they arrive in: projecting batch by batch, in any order of spool
files, and projecting all events at once (a rebuild) give the same tables. ``batch`` only ever
holds events new to the store (the events table's primary key decides). Where several events
compete for one row (a resumed session's ``session_started``, a message index or a compaction
id seen twice, a blob's role), the event first by ``(seq, occurred_at, event_id)`` wins, and a
later batch replaces a stored row it beats. A deletion is kept as its own row
(``session_deletions``), so it applies whether the session's start lands before or after it. A
metadata session's hashes are keyed by its id (``private_sha``); rows stored before its start
arrived are keyed when it lands.
"""

from __future__ import annotations

import json

BASE_DDL = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS events (
    event_id VARCHAR PRIMARY KEY, type VARCHAR NOT NULL, schema_version INTEGER NOT NULL,
    session_id VARCHAR NOT NULL, seq BIGINT NOT NULL, occurred_at TIMESTAMPTZ NOT NULL,
    payload JSON NOT NULL, source VARCHAR, line BIGINT);
CREATE TABLE IF NOT EXISTS spool_offsets (
    source VARCHAR PRIMARY KEY, byte_offset BIGINT NOT NULL, lines BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL, inode UBIGINT, tail_sha256 VARCHAR);
CREATE TABLE IF NOT EXISTS quarantine (
    source VARCHAR NOT NULL, line BIGINT, reason VARCHAR, raw VARCHAR,
    quarantined_at TIMESTAMPTZ, byte_offset BIGINT NOT NULL, raw_sha256 VARCHAR NOT NULL,
    host VARCHAR NOT NULL, PRIMARY KEY (host, source, byte_offset, raw_sha256));
"""

PROJECTION_DDL = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id VARCHAR PRIMARY KEY, started_at TIMESTAMPTZ, context_window BIGINT,
    model VARCHAR, agent VARCHAR, parent_session_id VARCHAR, capture VARCHAR, source VARCHAR,
    config JSON, system_prompt_sha256 VARCHAR, metadata JSON, deleted_at TIMESTAMPTZ,
    seq BIGINT, event_id VARCHAR, history_missing_tokens BIGINT);
CREATE TABLE IF NOT EXISTS session_deletions (
    session_id VARCHAR, occurred_at TIMESTAMPTZ, event_id VARCHAR);
CREATE TABLE IF NOT EXISTS message_blobs (
    sha256 VARCHAR NOT NULL, role VARCHAR, bytes BIGINT, content VARCHAR);
CREATE TABLE IF NOT EXISTS messages (
    session_id VARCHAR, idx BIGINT, sha256 VARCHAR, role VARCHAR, bytes BIGINT,
    tool_call_id VARCHAR, tool_call_ids JSON, tool_names JSON, tool_calls JSON,
    is_error BOOLEAN, name VARCHAR, seq BIGINT, occurred_at TIMESTAMPTZ, event_id VARCHAR,
    revision BIGINT);
CREATE TABLE IF NOT EXISTS compactions (
    id VARCHAR PRIMARY KEY, session_id VARCHAR, seq BIGINT, occurred_at TIMESTAMPTZ,
    tier INTEGER, tier_name VARCHAR, tokens_before BIGINT, tokens_after BIGINT,
    msgs_before BIGINT, msgs_after BIGINT, summarized BIGINT, preserved_tail BIGINT,
    compression_ratio DOUBLE, duration_ms DOUBLE, error VARCHAR, trigger VARCHAR,
    effective BOOLEAN, context_window BIGINT, fallback VARCHAR, summary_text VARCHAR,
    n_offloaded BIGINT, n_dropped BIGINT, dropped_bytes BIGINT, repairs JSON,
    summarizer_model VARCHAR, summarizer_input_tokens BIGINT, summarizer_output_tokens BIGINT,
    summarizer_latency_ms DOUBLE, estimator VARCHAR, config_hash VARCHAR, event_id VARCHAR,
    cut BIGINT, emergency VARCHAR, error_codes JSON, origin VARCHAR, harness VARCHAR,
    summary_encrypted BOOLEAN, tokens_before_source VARCHAR, estimator_slope DOUBLE,
    estimator_overhead DOUBLE, tokens_after_source VARCHAR);
CREATE TABLE IF NOT EXISTS compaction_views (
    compaction_id VARCHAR, session_id VARCHAR, side VARCHAR, position BIGINT,
    history_index BIGINT, sha256 VARCHAR, role VARCHAR, bytes BIGINT, status VARCHAR);
CREATE TABLE IF NOT EXISTS anchor_items (
    compaction_id VARCHAR, session_id VARCHAR, seq BIGINT, anchor_type VARCHAR,
    position BIGINT, item VARCHAR);
CREATE TABLE IF NOT EXISTS offloads (
    record_id VARCHAR, session_id VARCHAR, tool_call_id VARCHAR, tool_name VARCHAR,
    file_path VARCHAR, bytes BIGINT, lines BIGINT, sha256 VARCHAR, occurred_at TIMESTAMPTZ,
    event_id VARCHAR);
CREATE TABLE IF NOT EXISTS usage (
    session_id VARCHAR, seq BIGINT, turn BIGINT, estimated_input_tokens BIGINT,
    input_tokens BIGINT, output_tokens BIGINT, cache_read_tokens BIGINT,
    cache_creation_tokens BIGINT, model VARCHAR, occurred_at TIMESTAMPTZ,
    event_id VARCHAR, raw_estimated_tokens BIGINT, prompt VARCHAR, history_messages BIGINT);
CREATE TABLE IF NOT EXISTS turns (
    session_id VARCHAR, seq BIGINT, turn BIGINT, tokens BIGINT, tokens_before BIGINT,
    tier INTEGER, messages BIGINT, history_messages BIGINT, history_tokens BIGINT,
    context_window BIGINT, reserve_tokens BIGINT, occurred_at TIMESTAMPTZ, event_id VARCHAR);
CREATE TABLE IF NOT EXISTS synthetic (
    compaction_id VARCHAR, session_id VARCHAR, sha256 VARCHAR, role VARCHAR, bytes BIGINT,
    source_index BIGINT, tool_call_id VARCHAR);
"""

PROJECTIONS = (
    "sessions",
    "session_deletions",
    "message_blobs",
    "messages",
    "compactions",
    "compaction_views",
    "anchor_items",
    "offloads",
    "usage",
    "turns",
    "synthetic",
)
TABLES = ("events", "quarantine", "meta", "spool_offsets", *PROJECTIONS)

_VIEW_ITEM = (
    '[{"index":"BIGINT","sha256":"VARCHAR","role":"VARCHAR","bytes":"BIGINT","status":"VARCHAR"}]'
)
_SYNTHETIC = '[{"sha256":"VARCHAR","role":"VARCHAR","bytes":"BIGINT","content":"VARCHAR"}]'
_SYNTHETIC_REF = json.dumps(
    {
        "sha256": "VARCHAR",
        "role": "VARCHAR",
        "bytes": "BIGINT",
        "source_index": "BIGINT",
        "tool_call_id": "VARCHAR",
    }
)
_ANCHOR_ITEMS = '[{"anchor_type":"VARCHAR","position":"BIGINT","item":"VARCHAR"}]'
_TURN = json.dumps(
    {
        "turn": "BIGINT",
        "tokens": "BIGINT",
        "tokens_before": "BIGINT",
        "tier": "INTEGER",
        "messages": "BIGINT",
        "history_messages": "BIGINT",
        "history_tokens": "BIGINT",
        "context_window": "BIGINT",
        "reserve_tokens": "BIGINT",
    }
)

# Each statement reads the new events of this commit from ``batch``.
_MESSAGE = json.dumps(
    {
        "index": "BIGINT",
        "sha256": "VARCHAR",
        "role": "VARCHAR",
        "bytes": "BIGINT",
        "tool_call_id": "VARCHAR",
        "tool_call_ids": "JSON",
        "tool_names": "JSON",
        "tool_calls": "JSON",
        "is_error": "BOOLEAN",
        "name": "VARCHAR",
        "content": "VARCHAR",
        "revision": "BIGINT",
    }
)

_USAGE = json.dumps(
    {
        "turn": "BIGINT",
        "estimated_input_tokens": "BIGINT",
        "input_tokens": "BIGINT",
        "output_tokens": "BIGINT",
        "cache_read_tokens": "BIGINT",
        "cache_creation_tokens": "BIGINT",
        "model": "VARCHAR",
        "raw_estimated_tokens": "BIGINT",
        "prompt": "VARCHAR",
        "history_messages": "BIGINT",
    }
)

STAGE_OPTIMISTIC = "CREATE OR REPLACE TEMP TABLE batch AS SELECT * FROM incoming"
"""The commit's events as the temporary table ``batch``, when none is stored yet (the caller
knows the ids are distinct; the events table's primary key raises if one is stored). A native
table because every projection scans it again: a registered Arrow table would be converted
again by each scan."""

STAGE_CAREFUL = """CREATE OR REPLACE TEMP TABLE batch AS
    SELECT * FROM (SELECT * FROM incoming ANTI JOIN events USING (event_id))
    QUALIFY row_number() OVER (PARTITION BY event_id ORDER BY source, line) = 1"""
"""The commit's events not stored yet; of an id repeated within the commit, its first line."""

PRIVATE = "session_id IN (SELECT session_id FROM batch_private)"
"""True for the events of sessions captured as ``metadata``."""


def private_sha(sha: str) -> str:
    """The hash a projection stores for ``sha``: as sent for full-capture sessions; for a
    metadata session keyed by its session id, so that its rows never equal (and never join) the
    content-addressed text another session stored, while equal messages within the session
    still share one hash."""
    return f"CASE WHEN {PRIVATE} THEN sha256(session_id || ':' || {sha}) ELSE {sha} END"


FIRST = "(seq, occurred_at, event_id)"
"""The rule that picks one event where several compete for a row: the first by this key."""

_DELETIONS: tuple[str, ...] = (
    """INSERT INTO session_deletions SELECT session_id, occurred_at, event_id
      FROM batch WHERE type = 'session_deleted'""",
    """UPDATE sessions SET deleted_at = d.at FROM (
        SELECT session_id, max(occurred_at) AS at FROM session_deletions
        WHERE session_id IN (SELECT session_id FROM batch WHERE type = 'session_deleted')
        GROUP BY session_id) d
      WHERE sessions.session_id = d.session_id""",
)
"""A session is deleted at its latest ``session_deleted``, whenever its start lands."""

_STARTS: tuple[str, ...] = (
    f"""CREATE OR REPLACE TEMP TABLE batch_starts AS SELECT * FROM batch
      WHERE type = 'session_started'
      QUALIFY row_number() OVER (PARTITION BY session_id ORDER BY {FIRST}) = 1""",
    # metadata sessions new to the store: rows stored before their start came are keyed below
    """CREATE OR REPLACE TEMP TABLE batch_late AS
      SELECT session_id FROM batch_starts ANTI JOIN sessions USING (session_id)
      WHERE (payload->>'capture') = 'metadata'""",
    """INSERT OR REPLACE INTO sessions SELECT b.session_id, b.occurred_at,
        TRY_CAST(payload->>'context_window' AS BIGINT), payload->>'model', payload->>'agent',
        payload->>'parent_session_id', payload->>'capture', payload->>'source',
        payload->'config',
        CASE WHEN (payload->>'capture') = 'metadata'
             THEN sha256(b.session_id || ':' || (payload->>'system_prompt_sha256'))
             ELSE payload->>'system_prompt_sha256' END,
        payload->'metadata',
        (SELECT max(d.occurred_at) FROM session_deletions d WHERE d.session_id = b.session_id),
        b.seq, b.event_id,
        TRY_CAST(payload->'metadata'->>'history_missing_tokens' AS BIGINT)
      FROM batch_starts b
      WHERE NOT EXISTS (
        SELECT 1 FROM sessions s WHERE s.session_id = b.session_id
        AND (s.seq, s.started_at, s.event_id) <= (b.seq, b.occurred_at, b.event_id))""",
    """CREATE OR REPLACE TEMP TABLE batch_late_shas AS
      SELECT sha256 FROM messages WHERE session_id IN (SELECT session_id FROM batch_late)
      UNION SELECT sha256 FROM synthetic WHERE session_id IN (SELECT session_id FROM batch_late)""",
    *(
        f"""UPDATE {table} SET sha256 = sha256(session_id || ':' || sha256)
      WHERE session_id IN (SELECT session_id FROM batch_late)"""
        for table in ("messages", "compaction_views", "synthetic", "offloads")
    ),
    # text a faulty metadata producer sent before its start came, unless others reference it
    """DELETE FROM message_blobs WHERE sha256 IN (SELECT sha256 FROM batch_late_shas)
      AND sha256 NOT IN (
        SELECT m.sha256 FROM messages m SEMI JOIN batch_late_shas l ON m.sha256 = l.sha256
        UNION ALL
        SELECT s.sha256 FROM synthetic s SEMI JOIN batch_late_shas l ON s.sha256 = l.sha256
        UNION ALL
        SELECT s.system_prompt_sha256 FROM sessions s
        SEMI JOIN batch_late_shas l ON s.system_prompt_sha256 = l.sha256)""",
    "DROP TABLE batch_starts; DROP TABLE batch_late; DROP TABLE batch_late_shas",
)
"""The winning ``session_started`` of each session (the first by ``FIRST``), replacing a stored
one it beats; a metadata session new to the store keys the rows stored before it came."""

_BLOBS = """CREATE OR REPLACE TEMP TABLE batch_blobs AS
  SELECT x.*, m.sha256 IS NOT NULL AS stored, m.role AS stored_role, m.bytes AS stored_bytes
  FROM (
    SELECT DISTINCT ON (sha) sha, role, bytes, content FROM (
      SELECT (p).sha256 AS sha, (p).role AS role, (p).bytes AS bytes, (p).content AS content
      FROM batch_messages WHERE NOT private
      UNION ALL
      SELECT s.sha256, s.role, s.bytes, s.content FROM (
          SELECT unnest(json_transform(payload->'synthetic', '{syn}')) AS s
          FROM batch WHERE type = 'compaction_recorded' AND NOT {private})
      UNION ALL
      SELECT payload->>'system_prompt_sha256', 'system',
             strlen(payload->>'system_prompt'), payload->>'system_prompt'
      FROM batch
      WHERE type = 'session_started' AND (payload->>'capture') IS DISTINCT FROM 'metadata')
    WHERE content IS NOT NULL AND sha IS NOT NULL
    ORDER BY sha, role, bytes) x
  LEFT JOIN message_blobs m ON m.sha256 = x.sha""".replace("{syn}", _SYNTHETIC).replace(
    "{private}", PRIVATE
)
"""One text per hash; of the rows competing for it, the first by (role, bytes)."""

_MESSAGE_ROWS = f"""CREATE OR REPLACE TEMP TABLE batch_message_rows AS
  SELECT b.*, m.rowid AS stored_row, m.seq AS stored_seq, m.occurred_at AS stored_at,
         m.event_id AS stored_event_id, coalesce(m.revision, 0) AS stored_revision FROM (
    SELECT *, coalesce((p).revision, 0) AS revision FROM batch_messages
    QUALIFY row_number() OVER (
        PARTITION BY session_id, (p).index ORDER BY revision DESC, {FIRST}) = 1) b
  LEFT JOIN messages m ON m.session_id = b.session_id AND m.idx = (b.p).index"""
"""One message per session and index: the latest revision (a follower amends a transcript's
last message that was still being written), then the first by ``FIRST``, against the stored
one."""

_BEATS_STORED = (
    "(stored_row IS NULL OR revision > stored_revision OR (revision = stored_revision "
    f"AND {FIRST} < (stored_seq, stored_at, stored_event_id)))"
)
# Records written before they carried the estimator as numbers (store schema 6 and earlier)
# name it only: ``bytes/4``, ``bytes/4*calibrated(F)`` or ``bytes/4*S+O``. Their slope and
# overhead are read back from that name here, once, as the store projects them; nothing
# downstream reads the name for numbers.
_OVERHEAD_FORM = r"'^bytes/4\*([0-9.]+)\+([0-9.]+)$'"
_CALIBRATED_FORM = r"'^bytes/4\*calibrated\(([0-9.]+)\)$'"
_NAME = "(r->>'estimator')"  # parenthesised: ``->>`` binds looser than ``=``
_LEGACY_SLOPE = (
    f"coalesce(TRY_CAST(regexp_extract({_NAME}, {_OVERHEAD_FORM}, 1) AS DOUBLE), "
    f"TRY_CAST(regexp_extract({_NAME}, {_CALIBRATED_FORM}, 1) AS DOUBLE), "
    f"CASE WHEN {_NAME} = 'bytes/4' THEN 1.0 END)"
)
_LEGACY_OVERHEAD = (
    f"coalesce(TRY_CAST(regexp_extract({_NAME}, {_OVERHEAD_FORM}, 2) AS DOUBLE), "
    f"CASE WHEN regexp_matches({_NAME}, {_CALIBRATED_FORM}) OR {_NAME} = 'bytes/4' "
    "THEN 0.0 END)"
)

PROJECT_SQL: tuple[str, ...] = (
    *_DELETIONS,
    *_STARTS,
    """CREATE OR REPLACE TEMP TABLE batch_private AS SELECT session_id FROM sessions
      WHERE capture = 'metadata' AND session_id IN (SELECT DISTINCT session_id FROM batch)""",
    # message_appended payloads parsed once, for message_blobs and messages
    f"""CREATE OR REPLACE TEMP TABLE batch_messages AS
      SELECT session_id, seq, occurred_at, event_id, json_transform(payload, '{_MESSAGE}') AS p,
             {PRIVATE} AS private
      FROM batch WHERE type = 'message_appended'""",
    # metadata sessions never add text (none is sent; a producer bug must not leak it either)
    _BLOBS,
    "INSERT INTO message_blobs SELECT sha, role, bytes, content FROM batch_blobs WHERE NOT stored",
    """UPDATE message_blobs SET role = b.role, bytes = b.bytes FROM (
        SELECT * FROM batch_blobs WHERE stored AND (role, bytes) < (stored_role, stored_bytes)) b
      WHERE message_blobs.sha256 = b.sha""",
    "DROP TABLE batch_blobs",
    _MESSAGE_ROWS,
    f"""DELETE FROM messages WHERE rowid IN (
        SELECT stored_row FROM batch_message_rows
        WHERE stored_row IS NOT NULL AND {_BEATS_STORED})""",
    f"""INSERT INTO messages SELECT session_id, (p).index,
        CASE WHEN private THEN sha256(session_id || ':' || (p).sha256) ELSE (p).sha256 END,
        (p).role, (p).bytes, (p).tool_call_id, (p).tool_call_ids, (p).tool_names,
        (p).tool_calls, (p).is_error, (p).name, seq, occurred_at, event_id, revision
      FROM batch_message_rows WHERE {_BEATS_STORED}""",
    "DROP TABLE batch_message_rows; DROP TABLE batch_messages",
    f"""INSERT OR REPLACE INTO compactions SELECT r->>'id', session_id, seq, occurred_at,
        TRY_CAST(r->>'tier' AS INTEGER),
        ['None', 'Warn', 'Soft', 'Full', 'Emergency'][TRY_CAST(r->>'tier' AS INTEGER) + 1],
        TRY_CAST(r->>'tokens_before' AS BIGINT), TRY_CAST(r->>'tokens_after' AS BIGINT),
        TRY_CAST(r->>'msgs_before' AS BIGINT), TRY_CAST(r->>'msgs_after' AS BIGINT),
        TRY_CAST(r->>'summarized' AS BIGINT), TRY_CAST(r->>'preserved_tail' AS BIGINT),
        TRY_CAST(r->>'compression_ratio' AS DOUBLE), TRY_CAST(r->>'duration' AS DOUBLE) / 1e6,
        NULLIF(r->>'error', ''), r->>'trigger', TRY_CAST(r->>'effective' AS BOOLEAN),
        TRY_CAST(r->>'context_window' AS BIGINT), NULLIF(r->>'fallback', ''), r->>'summary_text',
        json_array_length(r->'offloaded'), json_array_length(r->'dropped'),
        COALESCE(list_sum(TRY_CAST(json_extract(r, '$.dropped[*].bytes') AS BIGINT[])), 0),
        r->'repairs', r->'summarizer'->>'model',
        TRY_CAST(r->'summarizer'->>'input_tokens' AS BIGINT),
        TRY_CAST(r->'summarizer'->>'output_tokens' AS BIGINT),
        TRY_CAST(r->'summarizer'->>'latency_ms' AS DOUBLE), r->>'estimator', r->>'config_hash',
        event_id, TRY_CAST(r->>'cut' AS BIGINT), r->>'emergency', r->'error_codes',
        coalesce(r->>'origin', 'compactlens'), r->>'harness',
        coalesce(TRY_CAST(r->>'summary_encrypted' AS BOOLEAN), false),
        coalesce(r->>'tokens_before_source', 'estimated'),
        coalesce(TRY_CAST(r->>'estimator_slope' AS DOUBLE), {_LEGACY_SLOPE}),
        coalesce(TRY_CAST(r->>'estimator_overhead' AS DOUBLE), {_LEGACY_OVERHEAD}),
        coalesce(r->>'tokens_after_source', 'estimated')
      FROM (SELECT *, payload->'record' AS r FROM batch WHERE type = 'compaction_recorded'
            QUALIFY row_number() OVER (PARTITION BY r->>'id' ORDER BY {FIRST}) = 1) c
      WHERE NOT EXISTS (
        SELECT 1 FROM compactions s WHERE s.id = (c.r->>'id')
        AND (s.seq, s.occurred_at, s.event_id) <= (c.seq, c.occurred_at, c.event_id))""",
    """INSERT INTO compaction_views
      SELECT cid, session_id, side, pos, (v).index, {key}, (v).role, (v).bytes, (v).status
      FROM (
        SELECT cid, session_id, 'before' AS side,
               unnest(l) AS v, generate_subscripts(l, 1) - 1 AS pos
        FROM (SELECT payload->'record'->>'id' AS cid, session_id,
                     json_transform(payload->'before', '{vi}') AS l
              FROM batch WHERE type = 'compaction_recorded')
        UNION ALL
        SELECT cid, session_id, 'after', unnest(l), generate_subscripts(l, 1) - 1
        FROM (SELECT payload->'record'->>'id' AS cid, session_id,
                     json_transform(payload->'after', '{vi}') AS l
              FROM batch WHERE type = 'compaction_recorded'))""".replace(
        "{vi}", _VIEW_ITEM
    ).replace("{key}", private_sha("(v).sha256")),
    # anchor items are parsed once, by the compactor, and carried in the event
    """INSERT INTO anchor_items
      SELECT cid, session_id, seq, (a).anchor_type, (a).position, (a).item FROM (
        SELECT payload->'record'->>'id' AS cid, session_id, seq,
               unnest(json_transform(payload->'anchor_items', '{ai}')) AS a
        FROM batch WHERE type = 'compaction_recorded')""".replace("{ai}", _ANCHOR_ITEMS),
    """INSERT INTO synthetic
      SELECT cid, session_id, {key}, (s).role, (s).bytes, (s).source_index, (s).tool_call_id
      FROM (SELECT payload->'record'->>'id' AS cid, session_id,
                   unnest(json_transform(payload->'synthetic', '[{syn}]')) AS s
            FROM batch WHERE type = 'compaction_recorded')""".replace(
        "{syn}", _SYNTHETIC_REF
    ).replace("{key}", private_sha("(s).sha256")),
    """INSERT INTO offloads SELECT payload->>'record_id', session_id,
        payload->>'tool_call_id', payload->>'tool_name', payload->>'file_path',
        TRY_CAST(payload->>'bytes' AS BIGINT), TRY_CAST(payload->>'lines' AS BIGINT),
        {key}, occurred_at, event_id
      FROM batch WHERE type = 'tool_result_offloaded'""".replace(
        "{key}", private_sha("(payload->>'sha256')")
    ),
    "DROP TABLE batch_private",
    f"""INSERT INTO turns SELECT session_id, seq, (v).turn, (v).tokens, (v).tokens_before,
        (v).tier, (v).messages, (v).history_messages, (v).history_tokens, (v).context_window,
        (v).reserve_tokens, occurred_at, event_id
      FROM (SELECT *, json_transform(payload, '{_TURN}') AS v
            FROM batch WHERE type = 'view_prepared')""",
    # after the turns: a report from before usage events named their turn (schema 2, upcast
    # with no turn) reports on the session's last view prepared before it
    f"""INSERT INTO usage SELECT b.session_id, b.seq,
        COALESCE((u).turn, (SELECT max(t.turn) FROM turns t
                            WHERE t.session_id = b.session_id AND t.seq < b.seq)),
        (u).estimated_input_tokens, (u).input_tokens, (u).output_tokens, (u).cache_read_tokens,
        (u).cache_creation_tokens, (u).model, b.occurred_at, b.event_id,
        (u).raw_estimated_tokens, (u).prompt, (u).history_messages
      FROM (SELECT *, json_transform(payload, '{_USAGE}') AS u
            FROM batch WHERE type = 'usage_reported') b""",
)

_GROUPS = ((_DELETIONS, "session_deleted"), (_STARTS, "session_started"))


def project_sql(kinds: frozenset[str]) -> tuple[str, ...]:
    """``PROJECT_SQL`` without the statements for event types a batch does not hold."""
    unused = {stmt for group, kind in _GROUPS if kind not in kinds for stmt in group}
    return tuple(stmt for stmt in PROJECT_SQL if stmt not in unused)


EVENT_SOURCES = """UPDATE events SET source = i.source, line = i.line FROM (
    SELECT event_id, source, line FROM incoming
    QUALIFY row_number() OVER (PARTITION BY event_id ORDER BY source, line) = 1) i
  WHERE events.event_id = i.event_id AND (i.source, i.line) < (events.source, events.line)"""
"""An event stored from one spool line and read again from another keeps the first line by
(source, line), whichever was read first."""


__all__ = [
    "BASE_DDL",
    "EVENT_SOURCES",
    "FIRST",
    "PRIVATE",
    "PROJECTIONS",
    "PROJECTION_DDL",
    "PROJECT_SQL",
    "STAGE_CAREFUL",
    "STAGE_OPTIMISTIC",
    "TABLES",
    "private_sha",
    "project_sql",
]
