"""CompactionRecord and OffloadEntry, and the JSONL record store (harness9-compatible lines).

In JSONL ``tier`` is an integer and ``duration`` integer nanoseconds, so records written by the
Go original import unchanged (Go's nil slices as ``null``, nanosecond timestamps, capitalised
anchor keys are all accepted). The store fsyncs, locks, sanitises the session id and reports
unreadable lines with file and line instead of skipping them silently.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from compactor.summaries.anchors import Anchor
from compactor.writing._appending import append_whole, lock_file
from compactor.writing._encoding import utf8
from compactor.writing._safepath import safe_name

log = logging.getLogger(__name__)

Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
"""An integer the Go original (int64) and the store (BIGINT) can both hold."""


class CompactionTier(IntEnum):
    NONE = 0
    WARN = 1
    SOFT = 2
    FULL = 3
    EMERGENCY = 4

    @property
    def label(self) -> str:
        return self.name.capitalize()


class OffloadEntry(BaseModel):
    """One tool result moved to a file; ``file_path`` is relative to the offloader's work_dir."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    tool_call_id: str
    tool_name: str = ""
    file_path: str
    bytes: Int64
    lines: Int64
    sha256: str = ""


class DroppedMessage(BaseModel):
    """A message removed (or cut) by truncation, with its size, for post-mortems."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    index: Int64
    role: str
    bytes: Int64
    tokens: Int64
    tool_call_id: str | None = None
    truncated: bool = False


class SummarizerStats(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    model: str = ""
    input_tokens: Int64 = 0
    output_tokens: Int64 = 0
    latency_ms: float = 0.0


_FRACTION = re.compile(r"(\.\d{6})\d+")


def _new_id() -> str:
    return str(uuid.uuid4())


def _now() -> datetime:
    return datetime.now(UTC)


class CompactionRecord(BaseModel):
    """Everything one compaction did. Field names are the seed's JSON names.

    A record is ours (``origin="compactlens"``, the default) or a compaction an agent harness did
    itself, read from its transcript by an importer (``origin="native"``, with ``harness``).
    The native fields are optional with defaults, so records and events written before them
    read as ours, unchanged (no schema version bump: the default *is* the upcast).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(default_factory=_new_id)
    session_id: str = ""
    timestamp: datetime = Field(default_factory=_now)
    tier: CompactionTier = CompactionTier.NONE
    tokens_before: Int64 = 0
    tokens_after: Int64 = 0
    msgs_before: Int64 = 0
    msgs_after: Int64 = 0
    anchors: list[Anchor] = Field(default_factory=list)
    offloaded: list[OffloadEntry] = Field(default_factory=list)
    summarized: Int64 = 0
    preserved_tail: Int64 = 0
    summary_text: str | None = ""
    """The summary; ``None`` only when the harness encrypted it (``summary_encrypted``)."""
    compression_ratio: float = 0.0
    duration: Int64 = 0
    """Nanoseconds, as Go's ``time.Duration``."""
    error: str = ""
    # Extensions (optional in input).
    trigger: Literal["auto", "manual", "cold_cache"] = "auto"
    """``auto``: a tier's threshold; ``manual``: a ``/compact``; ``cold_cache``: pulled forward
    to a turn whose prompt cache had expired (``CompactorConfig.cold_cache_compact``)."""
    effective: bool = True
    context_window: Int64 = 0
    fallback: str = ""
    repairs: list[str] = Field(default_factory=list)
    dropped: list[DroppedMessage] = Field(default_factory=list)
    summarizer: SummarizerStats | None = None
    estimator: str = ""
    """The estimator's name, for people (``bytes/4*1.020+9381``)."""
    estimator_slope: float | None = None
    estimator_overhead: float | None = None
    """The estimator as numbers, for programs: it counted ``bytes / 4 * slope + overhead``
    tokens (None: an estimator of the caller's own, known by its name alone)."""
    config_hash: str = ""
    error_codes: list[str] = Field(default_factory=list)
    """One fixed code per problem in ``error`` (``summarizer_failed:TimeoutError``...): what
    metadata capture keeps, since ``error`` may quote provider text."""
    cut: Int64 = 0
    """Messages kept in the view but cut in the middle (the task included)."""
    emergency: Literal["truncation", "offload"] | None = None
    """For an Emergency: ``truncation`` when something was dropped or cut, ``offload`` when
    offloading alone brought the view under the target."""
    origin: Literal["compactlens", "native"] = "compactlens"
    """``compactlens`` for our compactor's records; ``native`` for a harness's own compaction."""
    harness: str | None = None
    """For a native compaction: ``claude-code``, ``codex`` or ``openhands``."""
    summary_encrypted: bool = False
    """The harness kept its summary encrypted (Codex remote compaction): ``summary_text`` is
    ``None`` and the view after holds an opaque placeholder for it."""
    tokens_before_source: Literal["estimated", "harness"] = "estimated"
    """Where ``tokens_before`` comes from: ``estimated`` (our estimator over the view, always so
    for our own records) or ``harness`` (the harness's own figure, e.g. Claude Code's
    ``preTokens``, Codex's last ``token_count``)."""
    tokens_after_source: Literal["estimated", "harness"] = "estimated"
    """Where ``tokens_after`` comes from: ``estimated`` (our estimator over the view after) or
    ``harness`` (Claude Code's ``postTokens``: the conversation it left, without its system
    prompt and tools)."""

    @model_validator(mode="before")
    @classmethod
    def _null_summary(cls, data: Any) -> Any:
        # Go writes no null strings, but a null summary reads as "" unless it was encrypted.
        nulled = isinstance(data, dict) and data.get("summary_text", "") is None
        if nulled and not data.get("summary_encrypted"):
            return {**data, "summary_text": ""}
        return data

    @field_validator("anchors", "offloaded", "repairs", "dropped", "error_codes", mode="before")
    @classmethod
    def _null_is_empty(cls, v: Any) -> Any:
        return [] if v is None else v

    @field_validator("error", "session_id", mode="before")
    @classmethod
    def _null_is_blank(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("timestamp", mode="before")
    @classmethod
    def _go_timestamp(cls, v: Any) -> Any:
        # Go writes nanoseconds; Python keeps microseconds.
        return _FRACTION.sub(r"\1", v) if isinstance(v, str) else v

    @property
    def duration_ms(self) -> float:
        return self.duration / 1e6

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def to_json_line(self) -> str:
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


def compression_ratio(tokens_before: int, tokens_after: int) -> float:
    return tokens_after / tokens_before if tokens_before > 0 else 0.0


@runtime_checkable
class RecordStore(Protocol):
    def append(self, record: CompactionRecord) -> None: ...

    def list(self, session_id: str) -> list[CompactionRecord]: ...


@dataclass(frozen=True)
class RecordLineError:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass
class RecordReadResult:
    records: list[CompactionRecord] = field(default_factory=list)
    errors: list[RecordLineError] = field(default_factory=list)


class JsonlRecordStore:
    """One JSONL file per session under ``root``: ``<safe session id>.jsonl``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.last_errors: list[RecordLineError] = []

    def path_for(self, session_id: str) -> Path:
        return self.root / f"{safe_name(session_id or 'default')}.jsonl"

    def append(self, record: CompactionRecord) -> None:
        """Append one line under an exclusive lock and fsync it: the whole line or nothing (a
        write a full disk stops part-way is cut back). Raises on I/O failure."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = utf8(record.to_json_line() + "\n")
        fd = os.open(
            self.path_for(record.session_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
        )
        try:
            lock_file(fd, exclusive=True)
            append_whole(fd, line)  # a failed write leaves no fragment for the next to glue on
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self, session_id: str) -> RecordReadResult:
        """Every readable record in order, and one error per unreadable line (file:line: why)."""
        return read_record_file(self.path_for(session_id))

    def list(self, session_id: str) -> list[CompactionRecord]:
        """Readable records in order; bad lines are logged and kept in ``last_errors``."""
        result = self.read(session_id)
        self.last_errors = result.errors
        for err in result.errors:
            log.warning("unreadable compaction record: %s", err)
        return result.records

    def delete(self, session_id: str) -> bool:
        path = self.path_for(session_id)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            return True
        return False


def read_record_file(path: Path) -> RecordReadResult:
    result = RecordReadResult()
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return result
    with fh:
        lock_file(fh.fileno(), exclusive=False)
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
                result.records.append(CompactionRecord.model_validate(data))
            except (ValueError, ValidationError) as exc:
                reason = (
                    str(exc).splitlines()[0]
                    if isinstance(exc, json.JSONDecodeError)
                    else (f"not a compaction record: {_first_error(exc)}")
                )
                result.errors.append(RecordLineError(str(path), lineno, reason))
    return result


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        e = exc.errors()[0]
        loc = ".".join(str(p) for p in e["loc"])
        return f"{loc}: {e['msg']}"
    return str(exc)
