"""What importers produce: ``ImportedSession``, its per-turn ``TurnUsage``, the harness's own
compactions (``NativeCompaction``), and ``ImportIssue``.

A session is one agent context: the messages the model saw, in order, as ``compactor.Message``s.
When the harness compacted its own context (Claude Code, Codex, OpenHands), ``messages`` is
still the *original* history, everything the agent and the user said, never the harness's
summaries; each compaction is a ``NativeCompaction`` saying where it happened and which views it
went between. A *turn* is each point where the agent called the model, i.e. each assistant
message; where the source recorded the provider's token usage for that call, ``usage`` holds it
keyed by the assistant message's index. Nothing here reads files.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from compactor import Anchor, Message

TranscriptFormat = Literal[
    "openai",
    "claude-code",
    "swe-agent",
    "mini-swe-agent",
    "aider",
    "harness9-records",
    "codex",
    "openhands-v0",
    "openhands-sdk",
]
"""Format names as the CLI spells them (``--format``). tau-bench arrays are ``openai``;
``codex`` is a Codex rollout JSONL, ``openhands-v0`` an OpenHands V0 event list (trajectory
export), ``openhands-sdk`` an OpenHands SDK conversation folder."""

FORMATS: tuple[TranscriptFormat, ...] = get_args(TranscriptFormat)

Harness = Literal["claude-code", "codex", "openhands"]
ViewRef = int | Message
"""One message of a harness's view: a history index (a message kept verbatim), or a message
the harness made (its summary, a placeholder for an encrypted one)."""


class ImportIssue(BaseModel):
    """One problem found while importing: the file, the line where there is one, and why.

    ``unrecognised`` marks a file that is simply not a transcript (no importer recognises its
    content, or it is not a regular file): found by walking a folder it is skipped, named on the
    command line it is rejected.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    line: int | None = None
    reason: str
    unrecognised: bool = False

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.reason}"


class TurnUsage(BaseModel):
    """Provider-reported usage of the model call that produced ``messages[message_index]``.

    ``input_tokens`` is the whole prompt size as the provider counted it (for Anthropic:
    ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``; for OpenAI-style
    usage: ``prompt_tokens``; for aider: the ``Tokens: N sent`` figure). The cache fields are the
    parts of it read from or written to the provider's prompt cache, where reported.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    message_index: int = Field(ge=0)
    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    cache_read_tokens: int | None = Field(default=None, ge=0)
    cache_write_tokens: int | None = Field(default=None, ge=0)
    at: datetime | None = None
    """When the call was made, as the transcript dates it (its answer's first line), if it
    does: the gaps between calls say when the provider's prompt cache had expired."""
    prompt: Literal["history", "view"] = "history"
    """``history``: the prompt held the whole history up to this call. ``view``: the harness
    had compacted its context before this call, so the prompt was its compacted view, smaller
    than ``messages[:message_index]`` (replays calibrate on ``history`` usage only)."""


class NativeCompaction(BaseModel):
    """A compaction the harness did itself, as its transcript recorded it.

    It happened when ``messages[:at]`` was the history. ``before`` is the harness's view just
    before it (history indices, and the previous summary as a message), ``after`` the view it
    left (the indices kept verbatim, the summary where the harness put it). ``tokens_before``
    is the harness's own figure where it recorded one (``tokens_before_source="harness"``),
    else our estimate of ``before``; ``tokens_after`` is always our estimate of ``after`` (the
    harness's system prompt and tool schemas are in neither). ``line`` is where the transcript
    records the compaction: the JSONL line, or the event's position in an event list or folder.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    harness: Harness
    native_id: str
    line: int | None = None
    at: int = Field(ge=0)
    timestamp: datetime | None = None
    trigger: Literal["auto", "manual"] = "auto"
    tokens_before: int = Field(ge=0)
    tokens_before_source: Literal["estimated", "harness"] = "estimated"
    tokens_after_source: Literal["estimated", "harness"] = "estimated"
    tokens_after: int = Field(ge=0)
    summary_text: str | None
    summary_encrypted: bool = False
    before: list[ViewRef]
    after: list[ViewRef]
    anchors: list[Anchor]
    context_window: int = Field(default=0, ge=0)

    @property
    def replaced(self) -> list[int]:
        """History indices of ``before`` that ``after`` does not keep: what it summarised."""
        kept = {ref for ref in self.after if isinstance(ref, int)}
        return [ref for ref in self.before if isinstance(ref, int) and ref not in kept]


class ImportedSession(BaseModel):
    """One imported agent context (a main session, or a sub-agent's own chain).

    ``metadata`` holds format-specific facts, JSON-serialisable (each importer's docstring lists
    its keys); ``source_sha256`` of the whole file is always there.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    source_path: str
    format: TranscriptFormat
    messages: list[Message]
    usage: list[TurnUsage] = Field(default_factory=list)
    parent_session_id: str | None = None
    agent: str | None = None
    model: str | None = None
    started_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    compactions: list[NativeCompaction] = Field(default_factory=list)
    """The harness's own compactions, in order (empty for transcripts without any)."""

    @property
    def turns(self) -> list[int]:
        """Indices of the assistant messages: each point where the agent called the model."""
        return [i for i, m in enumerate(self.messages) if m.role == "assistant"]

    def call_times(self) -> dict[int, datetime]:
        """The time of each assistant message's call, by message index, as a replay's clock
        reads it: the transcript's date of that call, else the latest one before it (never going
        back), else the first one; empty when the transcript dates no call. A replay's events
        and the tuning lab's cache costs take the gaps between calls from here alike."""
        dated = sorted((u.message_index, u.at) for u in self.usage if u.at is not None)
        if not dated:
            return {}
        known = dict(dated)
        latest = min(at for _, at in dated)
        out: dict[int, datetime] = {}
        for i in self.turns:
            at = known.get(i)
            if at is not None and at > latest:
                latest = at
            out[i] = latest
        return out

    def uncalibrated(self) -> ImportedSession:
        """This session as an uncalibrated replay sees it: no usage figure (nothing calibrates
        and nothing is recorded), only the dates of its calls (``call_times``: a replay's clock
        and the tuning lab's cache costs still see the gaps)."""
        dated = [TurnUsage(message_index=u.message_index, at=u.at) for u in self.usage if u.at]
        return self.model_copy(update={"usage": dated})

    @property
    def has_usage(self) -> bool:
        """Whether any call's prompt size is reported (what calibration needs)."""
        return any(u.input_tokens is not None for u in self.usage)

    def usage_at(self, message_index: int) -> TurnUsage | None:
        """The provider-reported usage of the call that produced this message, if recorded."""
        for item in self.usage:
            if item.message_index == message_index:
                return item
        return None

    @property
    def tool_call_count(self) -> int:
        return sum(len(m.tool_calls) for m in self.messages)

    @property
    def tool_result_count(self) -> int:
        return sum(1 for m in self.messages if m.is_tool_result)
