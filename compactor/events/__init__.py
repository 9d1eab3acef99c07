"""The documented event schema (SPEC 4), for producers and for readers such as analytics.

Envelope, payload types, per-type schema versions with their upcasters, ``parse_event``, and the
builders that turn compactor objects into payloads. Everything here is public; the submodules
are how it is organised, not separate surfaces.
"""

from compactor.events.builders import (
    anchor_item_rows,
    compaction_recorded,
    message_appended,
    offload_events,
    redact_record,
    sha256_of,
)
from compactor.events.schema import (
    EVENT_TYPES,
    REDACTED,
    SCHEMA_VERSIONS,
    UPCASTERS,
    AnchorItem,
    Capture,
    CompactionRecorded,
    Event,
    EventFactory,
    MessageAppended,
    Payload,
    Producer,
    SessionDeleted,
    SessionStarted,
    SyntheticMessage,
    ToolResultOffloaded,
    UsageReported,
    ViewItem,
    ViewPrepared,
    ViewStatus,
    current_producer,
    new_event_id,
    parse_event,
    upcast,
)

__all__ = [
    "EVENT_TYPES",
    "REDACTED",
    "SCHEMA_VERSIONS",
    "UPCASTERS",
    "AnchorItem",
    "Capture",
    "CompactionRecorded",
    "Event",
    "EventFactory",
    "MessageAppended",
    "Payload",
    "Producer",
    "SessionDeleted",
    "SessionStarted",
    "SyntheticMessage",
    "ToolResultOffloaded",
    "UsageReported",
    "ViewItem",
    "ViewPrepared",
    "ViewStatus",
    "anchor_item_rows",
    "compaction_recorded",
    "current_producer",
    "message_appended",
    "new_event_id",
    "offload_events",
    "parse_event",
    "redact_record",
    "sha256_of",
    "upcast",
]
