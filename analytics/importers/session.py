"""What importers produce: ``ImportedSession``, its per-turn ``TurnUsage``, and ``ImportIssue``.

A session is one agent context: the messages the model saw, in order, as ``compactor.Message``s.
A *turn* is each point where the agent called the model, i.e. each assistant message; where the
source recorded the provider's token usage for that call, ``usage`` holds it keyed by the
assistant message's index. Nothing here reads files.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from compactor import Message

TranscriptFormat = Literal[
    "openai", "claude-code", "swe-agent", "mini-swe-agent", "aider", "harness9-records"
]
"""Format names as the CLI spells them (``--format``). tau-bench arrays are ``openai``."""

FORMATS: tuple[TranscriptFormat, ...] = (
    "openai",
    "claude-code",
    "swe-agent",
    "mini-swe-agent",
    "aider",
    "harness9-records",
)


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

    @property
    def turns(self) -> list[int]:
        """Indices of the assistant messages: each point where the agent called the model."""
        return [i for i, m in enumerate(self.messages) if m.role == "assistant"]

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
