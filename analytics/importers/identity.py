"""Which version of each imported or replayed session is stored, and what a new one becomes.

A session's *identity* is what it is a recording of: ``<imported id>`` for an import,
``<imported id>@<window>#<config hash>`` for a replay. Its *fingerprint* hashes what was
recorded (messages, usage, capture, parent). The first version of an identity is stored under
the identity itself; when the source changes, the new version is stored under
``<identity>~<8 hex>`` and the previous one gets a ``session_deleted`` event saying it was
superseded, so the live sessions of a source are always a clean import of its latest state while
the spool stays append-only. Sessions an earlier import of the same file produced and this one
no longer does are superseded the same way.

What is stored is read from the store when this process owns it, else from the spool files (the
source of truth; another process owns the database and will project them). This module reads
spool files and queries the store; it writes nothing itself (callers emit the events).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from analytics.importers.events import derived_event_id
from analytics.store import EventStore
from compactor.events import ENVELOPE_HEAD, Event, EventFactory, SessionDeleted

Action = Literal["new", "unchanged", "resumed", "replaced"]


def fingerprint(*parts: object) -> str:
    """The sha256 (hex) of the parts' JSON: what a version of a session recorded."""
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class StoredVersion:
    """One stored session that is a version of an identity."""

    session_id: str
    identity: str
    fingerprint: str | None
    family: str
    """``import``, or ``@<window>#<hash>`` for replays: which sessions of a file go together."""
    source_file: str | None
    deleted: bool = False
    messages: int = 0
    next_seq: int | None = None


@dataclass(frozen=True)
class Tail:
    """How far a follower has written a live version of a growing transcript.

    ``events`` were written under ``session_id``; the first ``settled`` of them can no longer
    change and hash to ``digest`` (``events_digest``); the rest is the last message, which its
    harness may still be writing (Claude Code writes an answer's blocks as separate lines),
    hashing to ``open_digest`` and stored at ``revision``. The next import of the grown file
    that starts with the settled events appends only what follows, and the open message again
    (a new revision) if it grew: the file costs the spool its size once, not once per pass."""

    session_id: str
    events: int
    settled: int
    digest: str
    open_digest: str
    revision: int = 0


@dataclass(frozen=True)
class Placement:
    """What a session of this run becomes: its session id and why."""

    session_id: str
    action: Action
    previous: StoredVersion | None = None


@dataclass
class Catalog:
    """The stored versions of every identity, plus what this run has placed so far."""

    versions: dict[str, StoredVersion]
    seq_of: Callable[[str], int]
    records_of: Callable[[str], set[str]]
    _by_identity: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for v in self.versions.values():
            self._by_identity.setdefault(v.identity, []).append(v.session_id)

    @classmethod
    def from_store(cls, store: EventStore) -> Catalog:
        frame = store.query(_STORE_SQL)
        versions = {
            str(sid): _version(str(sid), meta, source, bool(deleted), int(n))
            for sid, meta, source, deleted, n in frame.iter_rows()
        }

        def seq_of(sid: str) -> int:
            found = store.query("SELECT max(seq) FROM events WHERE session_id = ?", [sid]).item()
            return -1 if found is None else int(found)

        def records_of(sid: str) -> set[str]:
            ids = store.query("SELECT id FROM compactions WHERE session_id = ?", [sid])
            return {str(i) for i in ids.to_series()}

        return cls(versions, seq_of, records_of)

    @classmethod
    def from_spool(cls, spool_dir: Path) -> Catalog:
        scan = _SpoolScan()
        for path in sorted(spool_dir.glob("*.jsonl")) if spool_dir.is_dir() else []:
            scan.read(path)
        versions = {}
        for sid, (meta, source) in scan.started.items():
            messages = len(scan.messages.get(sid, ()))
            versions[sid] = _version(sid, meta, source, sid in scan.deleted, messages)
        return cls(
            versions,
            lambda sid: scan.max_seq.get(sid, -1),
            lambda sid: set(scan.records.get(sid, ())),
        )

    # ------------------------------------------------------------ deciding

    def current(self, identity: str) -> StoredVersion | None:
        live = [self.versions[s] for s in self._by_identity.get(identity, [])]
        live = [v for v in live if not v.deleted]
        return live[-1] if live else None

    def place(
        self,
        identity: str,
        print_: str,
        *,
        messages: int,
        family: str,
        source_file: str,
        resumable: bool,
        force: bool = False,
    ) -> Placement:
        """Where a session with this content goes: the same version (``unchanged``, or
        ``resumed`` when an interrupted import left it incomplete), a first version (``new``),
        or a new version superseding the current one (``replaced``)."""
        cur = self.current(identity)
        if cur is not None and cur.fingerprint == print_ and not force:
            if cur.messages >= messages:
                return Placement(cur.session_id, "unchanged", cur)
            if resumable:
                cur.messages = messages
                return Placement(cur.session_id, "resumed", cur)
        sid = identity
        n = 0
        while sid in self.versions:
            sid = f"{identity}~{fingerprint(identity, print_, n)[:8]}"
            n += 1
        version = StoredVersion(sid, identity, print_, family, source_file, messages=messages)
        self.versions[sid] = version
        self._by_identity.setdefault(identity, []).append(sid)
        return Placement(sid, "new" if cur is None else "replaced", cur)

    def orphans(self, source_file: str, family: str, kept: set[str]) -> list[StoredVersion]:
        """Live versions an earlier run made from ``source_file`` that this run did not keep."""
        return [
            v
            for v in self.versions.values()
            if not v.deleted
            and v.source_file == source_file
            and v.family == family
            and v.session_id not in kept
        ]

    def supersede(self, old: StoredVersion, reason: str) -> Event:
        """The ``session_deleted`` event retiring ``old`` (same id every time for the same
        reason, so repeating it is harmless)."""
        if old.next_seq is None:
            old.next_seq = self.seq_of(old.session_id) + 1
        event = EventFactory(old.session_id, start_seq=old.next_seq).make(
            SessionDeleted(reason=reason)
        )
        old.next_seq += 1
        old.deleted = True
        eid = derived_event_id("superseded", old.session_id, reason)
        return event.model_copy(update={"event_id": eid})

    def stored_records(self, sid: str) -> tuple[int, set[str]] | None:
        """``(next seq, record ids)`` of a stored session (for harness9 record imports)."""
        if sid not in self.versions:
            return None
        return self.seq_of(sid) + 1, self.records_of(sid)


_STORE_SQL = """
SELECT s.session_id, s.metadata, s.source, s.deleted_at IS NOT NULL, coalesce(m.n, 0)
FROM sessions s
LEFT JOIN (SELECT session_id, count(*) AS n FROM messages GROUP BY session_id) m
USING (session_id)
"""


def _version(
    sid: str, meta: Any, source: str | None, deleted: bool, messages: int
) -> StoredVersion:
    """A stored session as a version; sessions from before identities are their own."""
    data = json.loads(meta) if isinstance(meta, str) else (meta or {})
    if not isinstance(data, dict):
        data = {}
    family = data.get("family") or ("import" if source == "import" else "")
    return StoredVersion(
        session_id=sid,
        identity=str(data.get("identity") or sid),
        fingerprint=data.get("content_sha256"),
        family=str(family),
        source_file=data.get("source_file"),
        deleted=deleted,
        messages=messages,
    )


_RECORD_ID = re.compile(rb'"record":\{"id":"((?:[^"\\]|\\.)*)"')


@dataclass
class _SpoolScan:
    """What the spool holds per session, read cheaply: most lines by a regex on their head,
    only ``session_started`` and ``session_deleted`` lines parsed as JSON."""

    started: dict[str, tuple[Any, str | None]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    messages: dict[str, set[int]] = field(default_factory=dict)
    max_seq: dict[str, int] = field(default_factory=dict)
    records: dict[str, set[str]] = field(default_factory=dict)

    def read(self, path: Path) -> None:
        try:
            data = path.read_bytes()
        except OSError:
            return  # unreadable now; the projector reports it
        for raw in data.split(b"\n")[:-1]:  # a torn last line is not an event yet
            self._line(raw)

    def _line(self, raw: bytes) -> None:
        head = ENVELOPE_HEAD.match(raw)
        if head is None:
            self._parsed(raw)
            return
        kind, sid, seq = head.group(1).decode(), json.loads(head.group(2)), int(head.group(3))
        self.max_seq[sid] = max(self.max_seq.get(sid, -1), seq)
        if kind == "message_appended":
            self.messages.setdefault(sid, set()).add(seq)
        elif kind == "compaction_recorded" and (rid := _RECORD_ID.search(raw)):
            self.records.setdefault(sid, set()).add(_unescape(rid.group(1)))
        elif kind in ("session_started", "session_deleted"):
            self._parsed(raw)

    def _parsed(self, raw: bytes) -> None:
        try:
            obj = json.loads(raw)
            sid, seq, payload = str(obj["session_id"]), int(obj["seq"]), obj["payload"]
            kind = payload["type"]
        except (ValueError, KeyError, TypeError):
            return  # not an event: the projector quarantines it
        self.max_seq[sid] = max(self.max_seq.get(sid, -1), seq)
        if kind == "session_started":
            self.started.setdefault(sid, (payload.get("metadata"), payload.get("source")))
        elif kind == "session_deleted":
            self.deleted.add(sid)
        elif kind == "message_appended":
            self.messages.setdefault(sid, set()).add(seq)


def _unescape(raw: bytes) -> str:
    return str(json.loads(b'"' + raw + b'"'))
