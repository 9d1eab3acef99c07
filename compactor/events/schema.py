"""Events: the envelope, the payload union, upcasters, and builders from compactor objects.

Every event is a frozen pydantic model with ``extra="forbid"``; the envelope's ``type`` equals
its payload's. Old events are never rewritten: a schema change bumps ``SCHEMA_VERSION`` and adds
an upcaster, applied on read by ``parse_event``. With ``capture="metadata"`` no builder here
writes message content, summaries, anchor text or previews, only sizes, hashes, roles and names.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, model_validator

from compactor.messages import Message, ToolCall
from compactor.outcome import CompactionOutcome
from compactor.records import CompactionRecord, Int64
from compactor.tokens import message_bytes

SCHEMA_VERSION = 1
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


class CompactionRecorded(BaseModel):
    model_config = _FROZEN
    type: Literal["compaction_recorded"] = "compaction_recorded"
    record: CompactionRecord
    before: list[ViewItem]
    after: list[ViewItem]
    synthetic: list[SyntheticMessage] = Field(default_factory=list)


class ToolResultOffloaded(BaseModel):
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
    model_config = _FROZEN
    type: Literal["usage_reported"] = "usage_reported"
    estimated_input_tokens: Int64
    input_tokens: Int64
    output_tokens: Int64 = 0
    cache_read_tokens: Int64 = 0
    cache_creation_tokens: Int64 = 0
    model: str = ""
    turn: Int64 | None = None


class SessionDeleted(BaseModel):
    model_config = _FROZEN
    type: Literal["session_deleted"] = "session_deleted"
    reason: str = ""


Payload = Annotated[
    SessionStarted
    | MessageAppended
    | CompactionRecorded
    | ToolResultOffloaded
    | UsageReported
    | SessionDeleted,
    Field(discriminator="type"),
]
EVENT_TYPES = (
    "session_started",
    "message_appended",
    "compaction_recorded",
    "tool_result_offloaded",
    "usage_reported",
    "session_deleted",
)


class Event(BaseModel):
    """The envelope. ``event_id`` is set once, at emit; ``seq`` is monotonic per session."""

    model_config = _FROZEN
    event_id: str
    type: str
    schema_version: int = Field(SCHEMA_VERSION, ge=1, le=2**31 - 1)
    session_id: str
    seq: Int64
    occurred_at: datetime
    producer: Producer
    payload: SerializeAsAny[Payload]

    @model_validator(mode="after")
    def _type_matches(self) -> Event:
        if self.type != self.payload.type:
            raise ValueError(f"envelope type {self.type!r} != payload type {self.payload.type!r}")
        return self

    def to_json_line(self) -> str:
        return self.model_dump_json()


Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[int, Upcaster] = {}
"""``UPCASTERS[n]`` turns a raw version-n event dict into version n+1."""


def upcast(raw: dict[str, Any]) -> dict[str, Any]:
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"schema_version {version!r} is not a known event schema version")
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"event schema_version {version} is newer than this library ({SCHEMA_VERSION}); "
            "upgrade compactlens to read it"
        )
    while version < SCHEMA_VERSION:
        if version not in UPCASTERS:
            raise ValueError(f"no upcaster from event schema_version {version}")
        raw = UPCASTERS[version](raw)
        version += 1
        raw["schema_version"] = version
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

    def __init__(self, session_id: str, *, start_seq: int = 0) -> None:
        self.session_id = session_id
        self.seq = start_seq

    def make(self, payload: BaseModel) -> Event:
        event = Event(
            event_id=new_event_id(),
            type=payload.type,  # type: ignore[attr-defined]
            session_id=self.session_id,
            seq=self.seq,
            occurred_at=datetime.now(UTC),
            producer=current_producer(),
            payload=payload,
        )
        self.seq += 1
        return event


_ID_RANDOM = random.Random(os.urandom(32))
_UUID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48)) & ((1 << 128) - 1)
_UUID_V4 = (0x4000 << 64) | (0x8000 << 48)  # version 4, RFC 4122 variant
os.register_at_fork(after_in_child=lambda: _ID_RANDOM.seed(os.urandom(32)))


def new_event_id() -> str:
    """A random (version 4) UUID. ``uuid.uuid4()`` reads os.urandom each time, which costs more
    than the rest of an event here, so a private generator seeded from it is used (private:
    a host program calling ``random.seed`` must not make two processes emit the same ids)."""
    n = (_ID_RANDOM.getrandbits(128) & _UUID_CLEAR) | _UUID_V4
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# ---------------------------------------------------------------- builders


def sha256_of(msg: Message) -> str:
    """Content address of a message: role, content, tool calls and ids."""
    h = hashlib.sha256()
    h.update(msg.role.encode())
    h.update(b"\0")
    h.update(msg.content.encode("utf-8", "surrogatepass"))
    for tc in msg.tool_calls:
        h.update(f"\0{tc.id}\0{tc.name}\0".encode())
        h.update(tc.arguments.encode("utf-8", "surrogatepass"))
    h.update(f"\0{msg.tool_call_id or ''}\0{int(msg.is_error)}".encode())
    return h.hexdigest()


def message_appended(
    index: int, msg: Message, capture: Capture, *, n_bytes: int | None = None
) -> MessageAppended:
    """The payload for one appended message (``n_bytes``: its size, if already counted)."""
    full = capture == "full"
    return MessageAppended(
        index=index,
        role=msg.role,
        bytes=message_bytes(msg) if n_bytes is None else n_bytes,
        sha256=sha256_of(msg),
        tool_call_id=msg.tool_call_id,
        tool_call_ids=[tc.id for tc in msg.tool_calls],
        tool_names=[tc.name for tc in msg.tool_calls],
        is_error=msg.is_error,
        name=msg.name,
        content=msg.content if full else None,
        tool_calls=list(msg.tool_calls) if full else None,
    )


def redact_error(error: str) -> str:
    """An error without quoted content: each part keeps what failed and the cause's type only."""
    parts = []
    for part in error.split("; "):
        part = part.split(" (got ", 1)[0]
        parts.append(":".join(part.split(":")[:2]).strip())
    return "; ".join(parts)


def redact_record(record: CompactionRecord) -> CompactionRecord:
    """The record without summary or anchor text (for ``capture="metadata"``)."""
    anchors = [a.model_copy(update={"content": "[redacted]"}) for a in record.anchors]
    error = redact_error(record.error)
    return record.model_copy(update={"summary_text": "", "anchors": anchors, "error": error})


def compaction_recorded(
    outcome: CompactionOutcome,
    index_of: Sequence[int | None],
    capture: Capture,
) -> CompactionRecorded:
    """The event payload for one compaction. ``index_of[p]`` is the history index of input p."""
    statuses = outcome.status_of_inputs()
    before = [
        ViewItem(
            index=index_of[p],
            sha256=sha256_of(m),
            role=m.role,
            bytes=message_bytes(m),
            status="system" if m.role == "system" and p == 0 else statuses[p],
        )
        for p, m in enumerate(outcome.inputs)
    ]
    after: list[ViewItem] = []
    synthetic: list[SyntheticMessage] = []
    for m, src in zip(outcome.view, outcome.sources, strict=True):
        digest = sha256_of(m)
        if src is None:
            status: ViewStatus = "synthetic"
        elif m.role == "system" and src == 0:
            status = "system"
        else:
            status = "kept" if statuses[src] == "kept" else statuses[src]
        index = index_of[src] if src is not None else None
        after.append(
            ViewItem(index=index, sha256=digest, role=m.role, bytes=message_bytes(m), status=status)
        )
        if status in ("synthetic", "offloaded", "changed"):
            synthetic.append(
                SyntheticMessage(
                    sha256=digest,
                    role=m.role,
                    bytes=message_bytes(m),
                    source_index=index,
                    tool_call_id=m.tool_call_id,
                    content=m.content if capture == "full" else None,
                )
            )
    record = outcome.record if capture == "full" else redact_record(outcome.record)
    return CompactionRecorded(record=record, before=before, after=after, synthetic=synthetic)


def offload_events(record: CompactionRecord) -> list[ToolResultOffloaded]:
    return [
        ToolResultOffloaded(
            record_id=record.id,
            tool_call_id=e.tool_call_id,
            tool_name=e.tool_name,
            file_path=e.file_path,
            bytes=e.bytes,
            lines=e.lines,
            sha256=e.sha256,
        )
        for e in record.offloaded
    ]
