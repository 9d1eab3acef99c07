"""The event schema: the envelope, the payload union, per-type versions and upcasters.

Every event is a frozen pydantic model with ``extra="forbid"``; the envelope's ``type`` equals
its payload's. Each type has its own ``schema_version`` (``SCHEMA_VERSIONS``). Old events are
never rewritten: a change to a payload bumps its type's version and adds an upcaster from the
old version, applied on read by ``parse_event``. Building payloads from compactor objects is
``builders``' job, not this module's.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from compactor.messages import ToolCall
from compactor.records import CompactionRecord, Int64
from compactor.summaries.anchors import anchor_items
from compactor.writing._encoding import model_json_line

Capture = Literal["full", "metadata"]
ViewStatus = Literal["system", "kept", "offloaded", "changed", "summarized", "dropped", "synthetic"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Producer(BaseModel):
    model_config = _FROZEN

    library: str = "compactlens"
    version: str = ""
    host: str = ""
    pid: Int64 = 0


class SessionStarted(BaseModel):
    model_config = _FROZEN
    type: Literal["session_started"] = "session_started"
    context_window: Int64
    config: dict[str, Any] = Field(default_factory=dict)
    model: str = ""
    agent: str = ""
    parent_session_id: str | None = None
    capture: Capture = "full"
    source: str = "live"
    """``live`` for an agent, ``replay`` or ``import`` for analytics."""
    system_prompt_sha256: str | None = None
    system_prompt: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class MessageAppended(BaseModel):
    model_config = _FROZEN
    type: Literal["message_appended"] = "message_appended"
    index: Int64
    role: str
    bytes: Int64
    sha256: str
    tool_call_id: str | None = None
    tool_call_ids: list[str] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)
    is_error: bool = False
    name: str | None = None
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    revision: Int64 = Field(0, ge=0)
    """0 as first appended. A transcript's last message can still grow while its harness
    writes it (Claude Code writes an answer's blocks as separate lines): a follower that read it
    early appends it again, whole, with the same index and seq and a larger revision, and the
    store keeps the largest. Written only when not 0: a message's line is as long as before."""

    @model_serializer(mode="wrap")
    def _without_revision_0(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("revision") == 0:
            del data["revision"]
        return data


class ViewItem(BaseModel):
    """One message of a view: its history index (None if synthetic) and what became of it."""

    model_config = _FROZEN
    index: Int64 | None
    sha256: str
    role: str
    bytes: Int64
    status: ViewStatus


class SyntheticMessage(BaseModel):
    """A message a compaction created (compaction message, placeholder, cut or repaired copy)."""

    model_config = _FROZEN
    sha256: str
    role: str
    bytes: Int64
    source_index: Int64 | None = None
    tool_call_id: str | None = None
    content: str | None = None


class AnchorItem(BaseModel):
    """One item (line) of one anchor of a compaction, parsed once, here, for every reader."""

    model_config = _FROZEN
    anchor_type: str
    position: Int64
    item: str


class CompactionRecorded(BaseModel):
    """One compaction: the record, the views before and after it as history references, the
    messages it made, and the record's anchor items.

    Version 2 added ``anchor_items`` (version 1 events are upcast by parsing the anchors). A
    harness's own compaction imported from its transcript has the same shape, its record marked
    ``origin="native"`` with ``harness``, ``summary_encrypted`` and ``tokens_before_source``
    (optional record fields with defaults, so version 2 events without them read as ours).
    """

    model_config = _FROZEN
    type: Literal["compaction_recorded"] = "compaction_recorded"
    record: CompactionRecord
    before: list[ViewItem]
    after: list[ViewItem]
    synthetic: list[SyntheticMessage] = Field(default_factory=list)
    anchor_items: list[AnchorItem] = Field(default_factory=list)


class ToolResultOffloaded(BaseModel):
    """One result written to an offload file: by a compaction (``record_id`` is its record's
    id) or as it was appended, by tool-time offload (``record_id`` is empty)."""

    model_config = _FROZEN
    type: Literal["tool_result_offloaded"] = "tool_result_offloaded"
    record_id: str
    tool_call_id: str
    tool_name: str = ""
    file_path: str
    bytes: Int64
    lines: Int64
    sha256: str = ""


class UsageReported(BaseModel):
    """Provider usage of one call beside the compactor's estimate of the same prompt.

    ``estimated_input_tokens`` is what the compactor's estimator said (calibration and reserved
    tokens included) before this report; ``raw_estimated_tokens`` the uncalibrated byte
    estimate that calibration fits. ``prompt`` says which prompt both describe: the ``view``
    sent (live agents), or the uncompacted ``history`` (replays of a transcript's usage).
    ``turn`` is the ``turn`` of the ``view_prepared`` event it reports on (the last
    ``prepare``), ``history_messages`` the history's length when the report came in.
    Version 2 added ``raw_estimated_tokens`` and ``prompt``; version 3 ``history_messages``
    (before it, ``turn`` held the history length: upcast to ``history_messages``, with
    ``turn`` left for the store to take from the session's last ``view_prepared``).
    """

    model_config = _FROZEN
    type: Literal["usage_reported"] = "usage_reported"
    estimated_input_tokens: Int64
    raw_estimated_tokens: Int64 | None = None
    prompt: Literal["view", "history"] = "view"
    input_tokens: Int64
    output_tokens: Int64 = 0
    cache_read_tokens: Int64 = 0
    cache_creation_tokens: Int64 = 0
    model: str = ""
    turn: Int64 | None = None
    history_messages: Int64 | None = None


class SessionDeleted(BaseModel):
    model_config = _FROZEN
    type: Literal["session_deleted"] = "session_deleted"
    reason: str = ""


class ViewPrepared(BaseModel):
    """One ``prepare()``: the size of the view sent this turn, so that timelines exist between
    compactions. ``tokens`` is the estimate of the view actually sent (after any compaction)."""

    model_config = _FROZEN
    type: Literal["view_prepared"] = "view_prepared"
    turn: Int64
    tokens: Int64
    tokens_before: Int64
    tier: Int64
    messages: Int64
    history_messages: Int64
    history_tokens: Int64
    """Estimated tokens of the uncompacted prompt (system and the whole history) this turn."""
    context_window: Int64
    reserve_tokens: Int64 = 0


Payload = Annotated[
    SessionStarted
    | MessageAppended
    | CompactionRecorded
    | ToolResultOffloaded
    | UsageReported
    | SessionDeleted
    | ViewPrepared,
    Field(discriminator="type"),
]
SCHEMA_VERSIONS: dict[str, int] = {
    "session_started": 1,
    "message_appended": 2,
    "compaction_recorded": 2,
    "tool_result_offloaded": 1,
    "usage_reported": 3,
    "session_deleted": 1,
    "view_prepared": 1,
}
"""The current schema version of each event type."""
EVENT_TYPES = tuple(SCHEMA_VERSIONS)


class Event(BaseModel):
    """The envelope. ``event_id`` is set once, at emit; ``seq`` is monotonic per session."""

    model_config = _FROZEN
    event_id: str
    type: str
    schema_version: int = Field(1, ge=1, le=2**31 - 1)
    session_id: str
    seq: Int64
    occurred_at: datetime
    producer: Producer
    payload: SerializeAsAny[Payload]

    @model_validator(mode="after")
    def _type_matches(self) -> Event:
        if self.type != self.payload.type:
            raise ValueError(f"envelope type {self.type!r} != payload type {self.payload.type!r}")
        if self.schema_version != SCHEMA_VERSIONS[self.type]:
            raise ValueError(
                f"{self.type} schema_version {self.schema_version} is not the current "
                f"{SCHEMA_VERSIONS[self.type]} (older versions are upcast by parse_event)"
            )
        return self

    def to_json_line(self) -> str:
        """One JSON line; text UTF-8 cannot hold (lone surrogates) is scrubbed, not raised on."""
        return model_json_line(self)


ENVELOPE_HEAD = re.compile(
    rb'^\{"event_id":"[^"]*","type":"([a-z_]+)","schema_version":\d+,'
    rb'"session_id":("(?:[^"\\]|\\.)*"),"seq":(\d+),',
    re.MULTILINE,
)
"""The start of a line ``to_json_line`` wrote: type, session_id (as its JSON string, quotes
included: ``json.loads`` it) and seq, in the order pydantic writes them. A scan of a spool needs
no JSON parse, and text inside a payload (metadata quoting "seq") cannot match."""

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}
"""``UPCASTERS[(type, n)]`` turns the payload of a version-n event of ``type`` into n+1."""


def upcast(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` (an event dict) brought to its type's current schema version."""
    kind = raw.get("type")
    if kind not in SCHEMA_VERSIONS:
        raise ValueError(f"unknown event type {kind!r}; known: {', '.join(SCHEMA_VERSIONS)}")
    current = SCHEMA_VERSIONS[str(kind)]
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"schema_version {version!r} is not a known event schema version")
    if version > current:
        raise ValueError(
            f"{kind} event schema_version {version} is newer than this library ({current}); "
            "upgrade compactlens to read it"
        )
    while version < current:
        step = UPCASTERS.get((str(kind), version))
        if step is None:
            raise ValueError(f"no upcaster for {kind} from schema_version {version}")
        payload = raw.get("payload")
        if not isinstance(payload, dict):
            raise ValueError(f"{kind} event payload is {type(payload).__name__}, not an object")
        raw = {**raw, "payload": step(payload), "schema_version": version + 1}
        version += 1
    return raw


def parse_event(line: str | bytes) -> Event:
    """Parse one spool line, upcasting old schema versions. Raises ValueError when invalid."""
    raw = json.loads(line)
    if not isinstance(raw, dict):
        raise ValueError(f"an event is a JSON object, got {type(raw).__name__}")
    return Event.model_validate(upcast(raw))


_PRODUCER: Producer | None = None


def current_producer() -> Producer:
    """This process's producer (re-read after a fork, when the pid changed)."""
    global _PRODUCER
    if _PRODUCER is None or _PRODUCER.pid != os.getpid():
        try:
            version = metadata.version("compactlens")
        except metadata.PackageNotFoundError:
            version = "0+unknown"
        _PRODUCER = Producer(version=version, host=socket.gethostname(), pid=os.getpid())
    return _PRODUCER


class EventFactory:
    """Builds envelopes for one session with a gap-free ``seq``."""

    def __init__(
        self,
        session_id: str,
        *,
        start_seq: int = 0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.session_id = session_id
        self.seq = start_seq
        self.clock = clock
        """When each event occurred (``occurred_at``); None: now. A replay passes the
        transcript's times, so gaps between its turns are the original session's."""

    def make(self, payload: BaseModel) -> Event:
        now = datetime.now(UTC)
        event = Event(
            event_id=new_event_id(now),
            type=payload.type,  # type: ignore[attr-defined]
            session_id=self.session_id,
            seq=self.seq,
            occurred_at=now if self.clock is None else self.clock(),
            producer=current_producer(),
            payload=payload,
            schema_version=SCHEMA_VERSIONS[payload.type],  # type: ignore[attr-defined]
        )
        self.seq += 1
        return event


def new_event_id(at: datetime | None = None) -> str:
    """A time-ordered (version 7, RFC 9562) UUID: 48 bits of Unix milliseconds (of ``at``, else
    now), then 74 bits from the operating system's randomness. Ids of later milliseconds sort
    later (within one millisecond, in random order), so the store's primary-key index grows
    at one end instead of everywhere (``bench/projector_throughput.py`` measures ingests)."""
    ms = (time.time_ns() // 1_000_000 if at is None else int(at.timestamp() * 1000)) & _MS_MASK
    rand = int.from_bytes(os.urandom(10), "big")
    value = (
        ms << 80
        | 0x7 << 76  # version
        | (rand >> 62 & 0xFFF) << 64
        | 0b10 << 62  # variant
        | rand & ((1 << 62) - 1)
    )
    return str(uuid.UUID(int=value))


_MS_MASK = (1 << 48) - 1


# ---------------------------------------------------------------- upcasters


def _compaction_recorded_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """v1 → v2: the anchor items, parsed from the record's anchors as v2 builders do."""
    record = payload.get("record")
    anchors = record.get("anchors") if isinstance(record, dict) else None
    items: list[dict[str, Any]] = []
    for anchor in anchors if isinstance(anchors, list) else []:
        if not isinstance(anchor, dict):
            continue
        content = str(anchor.get("content", anchor.get("Content", "")) or "")
        kind = str(anchor.get("type", anchor.get("Type", "")) or "")
        if content != REDACTED:
            items += [
                {"anchor_type": kind, "position": i, "item": item}
                for i, item in enumerate(anchor_items(content))
            ]
    return {**payload, "anchor_items": items}


def _usage_reported_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """v1 → v2: v1 had one estimate, uncalibrated, of the prompt the agent last prepared."""
    return {**payload, "raw_estimated_tokens": payload.get("estimated_input_tokens")}


def _usage_reported_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """v2 → v3: v2's ``turn`` was the history length, not the turn reported on; which turn
    that was is known only beside the session's ``view_prepared`` events (the store takes it
    from the last one before the report)."""
    return {**payload, "history_messages": payload.get("turn"), "turn": None}


def _message_appended_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """v1 → v2: messages were never amended before revisions."""
    return {**payload, "revision": 0}


REDACTED = "[redacted]"
"""What metadata capture writes in place of anchor text."""

UPCASTERS[("compaction_recorded", 1)] = _compaction_recorded_v1
UPCASTERS[("message_appended", 1)] = _message_appended_v1
UPCASTERS[("usage_reported", 1)] = _usage_reported_v1
UPCASTERS[("usage_reported", 2)] = _usage_reported_v2
