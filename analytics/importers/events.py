"""Imported transcripts and harness9 records as events, so imports look like live sessions.

``session_events`` turns one ``ImportedSession`` into a ``session_started``
(``source="import"``) and one ``message_appended`` per message, indexed as the importer ordered
them (a leading system message included), with a ``compaction_recorded`` where the harness
compacted its own context (``native_record``: origin ``native``, tier Full, the views as history
references and the harness's summary as a synthetic message, as a replay records ours).
``RecordEvents`` turns harness9 ``CompactionRecord``s into ``compaction_recorded`` events (with
empty before/after views: the records carry no messages) plus a ``tool_result_offloaded`` per
offloaded result, as a live session emits them.

Event ids are derived, not random: from the session id and ``seq`` for a transcript, from the
record id for a record. Importing the same input twice therefore yields the same events, and the
store, which keeps one event per id, keeps one copy; a transcript whose content changed is
stored under a new version id (``analytics.importers.identity`` decides), so its events never mix
with the old version's. Nothing here reads files or owns a store.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from analytics.importers import ImportedSession
from analytics.importers.history import missing_history_tokens
from analytics.importers.session import NativeCompaction, ViewRef
from compactor import CompactionRecord, CompactionTier
from compactor.events import (
    Capture,
    CompactionRecorded,
    Event,
    EventFactory,
    SessionStarted,
    ToolResultOffloaded,
    UsageReported,
    ViewEntry,
    ViewStatus,
    anchor_item_rows,
    hash_key,
    message_appended,
    redact_record,
    sha256_of,
    views_recorded,
)

_NAMESPACE = uuid.UUID("5d0c3f4e-8b1a-4c6f-9e2d-7a1b3c5d7e9f")
RECORDS_FORMAT = "harness9-records"


def derived_event_id(*parts: str | int) -> str:
    """A UUID that is the same every time for the same parts."""
    return str(uuid.uuid5(_NAMESPACE, "\0".join(map(str, parts))))


def _with_id(event: Event, *parts: str | int) -> Event:
    return event.model_copy(update={"event_id": derived_event_id(*parts)})


_WHOLE_FILE_KEYS = frozenset({"content_sha256", "source_sha256"})
"""``session_started`` metadata that hashes the whole file: it changes whenever the file grows,
so an extension's digest leaves it out."""


def events_digest(events: Iterable[Event], start: str = "") -> str:
    """A running sha256 of what ``events`` say, continuing from ``start``: each event's seq,
    type and payload (not its id or time, nor the whole-file hashes a ``session_started``
    carries). Two imports of a growing transcript whose first events have the same digest
    stored the same prefix: the second only adds the events after it."""
    digest = start
    for event in events:
        payload = event.payload.model_dump(mode="json")
        if isinstance(payload.get("metadata"), dict):
            meta = payload["metadata"]
            payload["metadata"] = {k: v for k, v in meta.items() if k not in _WHOLE_FILE_KEYS}
        text = json.dumps([digest, event.seq, event.type, payload], sort_keys=True, default=str)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return digest


def amended(event: Event, revision: int) -> Event:
    """``event`` (a ``message_appended``) again as ``revision`` of its message: same seq and
    index, its own id, so the store keeps it over the earlier revisions."""
    payload = event.payload.model_copy(update={"revision": revision})
    eid = derived_event_id("amended", event.session_id, event.seq, revision)
    return event.model_copy(update={"payload": payload, "event_id": eid})


def session_started(
    imported: ImportedSession,
    capture: Capture,
    extra: Mapping[str, object] | None = None,
    key: bytes | None = None,
) -> SessionStarted:
    """The ``session_started`` payload of an imported transcript (no window: it was not run);
    ``extra`` joins its metadata (the version's identity and fingerprint)."""
    first = imported.messages[0] if imported.messages else None
    metadata: dict[str, object] = {
        "source_path": imported.source_path,
        "format": imported.format,
        **(extra or {}),
    }
    if "source_sha256" in imported.metadata:
        metadata["source_sha256"] = imported.metadata["source_sha256"]
    cwd = imported.metadata.get("cwd")
    if capture == "full" and isinstance(cwd, str) and cwd:  # the audit resolves paths by it
        metadata["cwd"] = cwd
    if imported.started_at is not None:
        metadata["started_at"] = imported.started_at.isoformat()
    missing = missing_history_tokens(imported)
    if missing:
        metadata["history_missing_tokens"] = missing
    return SessionStarted(
        context_window=0,
        model=imported.model or "",
        agent=imported.agent or imported.format,
        parent_session_id=imported.parent_session_id,
        capture=capture,
        source="import",
        system_prompt_sha256=sha256_of(first, key) if first and first.role == "system" else None,
        metadata=metadata,
    )


def session_events(
    imported: ImportedSession,
    capture: Capture,
    *,
    session_id: str | None = None,
    extra: Mapping[str, object] | None = None,
) -> Iterator[Event]:
    """``session_started``, then one ``message_appended`` per message, seq 0, 1, 2, …, and
    each native compaction's ``compaction_recorded`` after the messages it saw.

    ``session_id`` is the id of the version stored (default: the imported id)."""
    sid = session_id or imported.session_id
    factory = EventFactory(sid)
    key = hash_key(capture)  # metadata: hashes that join nothing outside this session
    started = session_started(imported, capture, extra, key)
    yield _with_id(factory.make(started), "import", sid, 0)
    compactions = sorted(imported.compactions, key=lambda c: c.at)
    reports = _reports_after(imported)
    done = 0
    for index in range(len(imported.messages) + 1):
        while done < len(compactions) and compactions[done].at <= index:
            payload = _native_payload(imported, compactions[done], sid, capture, key)
            event = factory.make(payload)
            yield _with_id(event, "import", sid, event.seq)
            done += 1
        if index < len(imported.messages):
            msg = imported.messages[index]
            event = factory.make(message_appended(index, msg, capture, key=key))
            yield _with_id(event, "import", sid, event.seq)
            if index in reports:
                event = factory.make(reports[index])
                yield _with_id(event, "import", sid, event.seq)


def _reports_after(imported: ImportedSession) -> dict[int, UsageReported]:
    """The provider's usage of the first call after each native compaction, by the index of the
    message that call produced: the measured size of the context the compaction left (the
    ledger's growth check reads it). Other calls' usage stays with the replays."""
    out: dict[int, UsageReported] = {}
    calls = sorted(
        (u for u in imported.usage if u.input_tokens is not None), key=lambda u: u.message_index
    )
    for compaction in imported.compactions:
        first = next((u for u in calls if u.message_index >= compaction.at), None)
        if first is None or first.input_tokens is None:
            continue
        out[first.message_index] = UsageReported(
            estimated_input_tokens=compaction.tokens_after,
            prompt="view",
            input_tokens=first.input_tokens,
            output_tokens=first.output_tokens or 0,
            cache_read_tokens=first.cache_read_tokens or 0,
            cache_creation_tokens=first.cache_write_tokens or 0,
            history_messages=first.message_index + 1,
        )
    return out


def native_record(
    imported: ImportedSession, compaction: NativeCompaction, session_id: str
) -> CompactionRecord:
    """The record of a harness's own compaction: ``origin="native"``, tier Full (the harness
    summarised what it replaced), its id derived from the stored session and the harness's
    own id for the compaction, so a re-import gives the same record."""
    kept = len(compaction.before) - _summarised(compaction)
    before, after = compaction.tokens_before, compaction.tokens_after
    return CompactionRecord(
        id=derived_event_id("native", session_id, compaction.native_id),
        session_id=session_id,
        timestamp=compaction.timestamp or imported.started_at or datetime(1970, 1, 1, tzinfo=UTC),
        tier=CompactionTier.FULL,
        tokens_before=before,
        tokens_after=after,
        msgs_before=len(compaction.before),
        msgs_after=len(compaction.after),
        anchors=compaction.anchors,
        summarized=_summarised(compaction),
        preserved_tail=kept,
        summary_text=compaction.summary_text,
        compression_ratio=after / before if before > 0 else 0.0,
        trigger=compaction.trigger,
        context_window=compaction.context_window,
        estimator="bytes/4",
        origin="native",
        harness=compaction.harness,
        summary_encrypted=compaction.summary_encrypted,
        tokens_before_source=compaction.tokens_before_source,
        tokens_after_source=compaction.tokens_after_source,
    )


def _summarised(compaction: NativeCompaction) -> int:
    """Messages of the view before that the view after does not keep verbatim."""
    kept = {ref for ref in compaction.after if isinstance(ref, int)}
    return sum(1 for ref in compaction.before if not (isinstance(ref, int) and ref in kept))


def _native_payload(
    imported: ImportedSession,
    compaction: NativeCompaction,
    sid: str,
    capture: Capture,
    key: bytes | None,
) -> CompactionRecorded:
    kept = {ref for ref in compaction.after if isinstance(ref, int)}

    def entry(ref: ViewRef, side: str) -> ViewEntry:
        if not isinstance(ref, int):
            return None, ref, "synthetic" if side == "after" else "summarized"
        msg = imported.messages[ref]
        status: ViewStatus = "kept" if ref in kept else "summarized"
        if ref == 0 and msg.role == "system" and status == "kept":
            status = "system"
        return ref, msg, status

    record = native_record(imported, compaction, sid)
    before = [entry(ref, "before") for ref in compaction.before]
    after = [entry(ref, "after") for ref in compaction.after]
    return views_recorded(record, before, after, capture, key)


@dataclass
class _RecordSession:
    factory: EventFactory
    known: set[str] = field(default_factory=set)
    key: bytes | None = None
    """Metadata capture: the key of this session's hashes (offloaded results' included)."""


StoredSession = Callable[[str], tuple[int, set[str]] | None]
"""``(next seq, ids of records already stored)`` of a session, or None if it is not stored."""


class RecordEvents:
    """Events for harness9 records, grouped into sessions by the records' ``session_id``.

    ``stored`` says what the store already holds of a session, so that seq continues after it
    and records already there are not sent again.
    """

    def __init__(self, capture: Capture, stored: StoredSession) -> None:
        self.capture: Capture = capture
        self.stored = stored
        self._sessions: dict[str, _RecordSession] = {}
        self.skipped = 0

    def events(self, record: CompactionRecord, source_path: str, fallback_id: str) -> list[Event]:
        """Events for one record ([] if it is already stored or was already sent)."""
        sid = record.session_id or fallback_id
        out: list[Event] = []
        state = self._sessions.get(sid)
        if state is None:
            state = self._open(sid, record, source_path, out)
        if record.id in state.known:
            self.skipped += 1
            return out
        state.known.add(record.id)
        kept = record if self.capture == "full" else redact_record(record, state.key)
        if not record.session_id:
            kept = kept.model_copy(update={"session_id": sid})
        items = anchor_item_rows(kept) if self.capture == "full" else []
        payload = CompactionRecorded(record=kept, before=[], after=[], anchor_items=items)
        out.append(_with_id(state.factory.make(payload), "record", record.id))
        for k, entry in enumerate(kept.offloaded):
            offload = ToolResultOffloaded(record_id=record.id, **entry.model_dump())
            out.append(_with_id(state.factory.make(offload), "record", record.id, "offload", k))
        return out

    def _open(
        self, sid: str, record: CompactionRecord, source_path: str, out: list[Event]
    ) -> _RecordSession:
        found = self.stored(sid)
        if found is not None:
            state = _RecordSession(EventFactory(sid, start_seq=found[0]), set(found[1]))
        else:
            state = _RecordSession(EventFactory(sid))
            started = SessionStarted(
                context_window=record.context_window,
                agent="harness9",
                capture=self.capture,
                source="import",
                metadata={"source_path": source_path, "format": RECORDS_FORMAT},
            )
            out.append(_with_id(state.factory.make(started), "import", sid, 0))
        state.key = hash_key(self.capture)
        self._sessions[sid] = state
        return state
