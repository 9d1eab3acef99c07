"""What one commit hands the store: validated events column by column, quarantined lines, and
how far each spool file has been read.

Plain containers, cheap to append to and cheap to hand to Arrow; no validation happens here (the
projector validates) and nothing here touches the database (``store`` does).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pyarrow as pa


@dataclass
class EventBatch:
    """Validated spool lines, column by column (cheap to append, cheap to hand to Arrow)."""

    event_id: list[str] = field(default_factory=list)
    type: list[str] = field(default_factory=list)
    schema_version: list[int] = field(default_factory=list)
    session_id: list[str] = field(default_factory=list)
    seq: list[int] = field(default_factory=list)
    occurred_at: list[dt.datetime] = field(default_factory=list)
    payload: list[str] = field(default_factory=list)
    """Each event's payload as JSON text (the upcast form when it came from an older schema)."""
    source: list[str] = field(default_factory=list)
    line: list[int] = field(default_factory=list)
    sealed: pa.Table | None = field(default=None, repr=False)
    """``to_arrow()`` made ahead by ``seal`` (the projector's parse thread), while it is current."""
    _kinds: frozenset[str] = field(default=frozenset(), repr=False)

    def __len__(self) -> int:
        return len(self.event_id)

    def to_arrow(self) -> pa.Table:
        if self.sealed is not None and self.sealed.num_rows == len(self):
            return self.sealed
        return pa.table(
            {name: getattr(self, name) for name in _INCOMING_SCHEMA.names}, schema=_INCOMING_SCHEMA
        )

    def seal(self) -> None:
        """Build the Arrow table now (off the committing thread)."""
        self.sealed = self.to_arrow()
        self._kinds = frozenset(self.type)

    def kinds(self) -> frozenset[str]:
        """The event types in the batch (the store projects only what they need)."""
        if self.sealed is not None and self.sealed.num_rows == len(self):
            return self._kinds
        return frozenset(self.type)


@dataclass(frozen=True)
class QuarantinedLine:
    source: str
    line: int
    reason: str
    raw: str
    """The line as text, cut at 64 KiB."""
    byte_offset: int | None = None
    """Where the line starts in its file; with ``raw_sha256`` and ``source`` its key."""
    raw_sha256: str | None = None
    """sha256 of the whole line's bytes."""


@dataclass(frozen=True)
class SpoolPosition:
    """How far one spool file has been read, and a fingerprint of where: its inode and a hash
    of the bytes just before ``byte_offset``, so that a file truncated and rewritten past the
    offset is read again from the start instead of from inside new content."""

    byte_offset: int
    lines: int
    inode: int | None = None
    tail_sha256: str | None = None


_INCOMING_SCHEMA = pa.schema(
    [
        ("event_id", pa.string()),
        ("type", pa.string()),
        ("schema_version", pa.int32()),
        ("session_id", pa.string()),
        ("seq", pa.int64()),
        ("occurred_at", pa.timestamp("us", tz="UTC")),
        ("payload", pa.string()),
        ("source", pa.string()),
        ("line", pa.int64()),
    ]
)
