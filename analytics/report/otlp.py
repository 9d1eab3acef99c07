"""``compactlens export otlp``: the store's effective compactions as OpenTelemetry spans.

The store's ``session_started`` and ``compaction_recorded`` events of live sessions are read
back in session and seq order, a session at a time, and handed to ``compactor.OtlpSink``, the
sink an agent uses live: one code path makes the spans whether they are sent as they happen or
exported afterwards. No-op records are not spans; no content is sent unless ``summaries`` (and
then only the summaries of sessions captured in full). Every span is accounted for: delivered
(the endpoint acknowledged it) or not, and a compaction whose time OTLP cannot carry is skipped
with its session named. It reads the store, never writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from analytics.queries.frames import LIVE
from analytics.store import EventStore
from compactor import OtlpSink
from compactor.events import Event, parse_event

SESSIONS_PER_READ = 200
"""Sessions whose events are read per query: bounds the memory of one read."""


@dataclass(frozen=True)
class OtlpExport:
    """What an export did: spans made and how many the endpoint acknowledged (``delivered``) or
    not (``undelivered``: ``spans - delivered``), the sessions they came from, compactions not
    made spans because OTLP cannot carry their time (``skipped``, per session in
    ``skipped_sessions``: how many and the first time), other failures, and the exporter's last
    error."""

    spans: int
    delivered: int
    sessions: int
    undelivered: int
    errors: int
    skipped: int = 0
    skipped_sessions: dict[str, tuple[int, datetime]] = field(default_factory=dict)
    last_error: str = ""


def compaction_events(store: EventStore) -> Iterator[Event]:
    """The ``session_started`` and ``compaction_recorded`` events of live sessions that have
    an effective compaction, in session and seq order."""
    sessions = store.query(
        f"""SELECT DISTINCT session_id FROM compactions
            WHERE {LIVE} AND coalesce(effective, true) AND tier > 0 ORDER BY session_id"""
    )["session_id"].to_list()
    for start in range(0, len(sessions), SESSIONS_PER_READ):
        chunk = sessions[start : start + SESSIONS_PER_READ]
        rows = store.query(
            """SELECT event_id, type, schema_version, session_id, seq, occurred_at,
                      CAST(payload AS VARCHAR) AS payload
               FROM events
               WHERE type IN ('session_started', 'compaction_recorded')
                 AND session_id IN (SELECT unnest(?))
               ORDER BY session_id, seq""",
            [chunk],
        )
        for row in rows.iter_rows(named=True):
            yield parse_event(_line(row))


def _line(row: dict[str, Any]) -> str:
    """The envelope as the spool line it came from (``parse_event`` upcasts old versions)."""
    return json.dumps(
        {
            "event_id": row["event_id"],
            "type": row["type"],
            "schema_version": row["schema_version"],
            "session_id": row["session_id"],
            "seq": row["seq"],
            "occurred_at": row["occurred_at"].isoformat(),
            "producer": {},  # the store keeps no producer; spans do not carry one
            "payload": json.loads(row["payload"]),
        }
    )


def export_otlp(store: EventStore, sink: OtlpSink) -> OtlpExport:
    """Feed ``sink`` every effective compaction of the store, then flush and close it (a sink
    made with ``batch=False`` exports as it is fed and stops trying after a failed export; the
    rest are counted undelivered)."""
    sessions: set[str] = set()
    try:
        for event in compaction_events(store):
            before = sink.spans
            sink.emit(event)
            if sink.spans > before:
                sessions.add(event.session_id)
    finally:
        sink.flush()
        sink.close()
    return OtlpExport(
        spans=sink.spans,
        delivered=sink.delivered,
        sessions=len(sessions),
        undelivered=sink.spans - sink.delivered,
        errors=sink.errors - sink.undelivered,
        skipped=sink.skipped,
        skipped_sessions=dict(sink.skipped_sessions),
        last_error=sink.last_error,
    )
