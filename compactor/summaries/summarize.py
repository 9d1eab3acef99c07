"""Summariser and chat-model protocols, the LLM summariser and its two prompt templates.

``LLMSummarizer`` renders the seed's first-time and incremental prompts (the incremental one
repeats the format rules, which the seed's did not) and asks a ``ChatModel`` for the text. It
does not judge the result: the compactor parses it and treats an all-N/A answer as a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from compactor.errors import SummarizerError
from compactor.messages import Message
from compactor.summaries.anchors import Anchor, format_anchors


class TokenUsage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0


class ChatCompletion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    usage: TokenUsage | None = None
    model: str = ""


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: messages in, one completion out. Adapters live in ``compactor.llm``."""

    def complete(self, messages: list[Message]) -> ChatCompletion: ...

    async def acomplete(self, messages: list[Message]) -> ChatCompletion: ...


class PreviousCompaction(BaseModel):
    """What the last compaction produced, fed to the incremental prompt."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    anchors: list[Anchor] = Field(default_factory=list)
    summary: str = ""

    def render(self) -> str:
        return f"{format_anchors(self.anchors)}\n## Summary\n{self.summary}".strip()


class SummaryResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    usage: TokenUsage | None = None
    model: str = ""


@runtime_checkable
class Summarizer(Protocol):
    """Turns a transcript (and the previous compaction) into text in the anchor template."""

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult: ...


FORMAT_RULES = """Rules:
- Each anchor section MUST be present (use "N/A" if nothing applies)
- Be concise: each item one line
- Keep file paths, commands, error messages and identifiers exactly as written
- [offloaded: ...] entries indicate large outputs saved to files; keep their paths"""

ANCHOR_TEMPLATE = """## Anchors

### User Intent
<one concise sentence>

### Execution Progress
- <key milestone>

### Key Decisions
- <decision: rationale>

### Tried Solutions
- <approach: outcome>

### Next Steps
- <pending task>

## Summary
<supplementary context not captured in anchors>"""

FIRST_TEMPLATE = """Produce a structured compaction of the following conversation \
in this exact format:

{template}

{rules}

Conversation:
{conversation}"""

INCREMENTAL_TEMPLATE = """Update the existing compaction by merging in new conversation content.
Keep every still-relevant item of the previous compaction; add what the new content changes.

<previous-compaction>
{previous}
</previous-compaction>

New conversation to merge:
{conversation}

Answer in this exact format:

{template}

{rules}"""


def render_transcript(msgs: Sequence[Message], *, max_chars_per_message: int = 8000) -> str:
    """The conversation as plain text for a prompt: one block per message, tool calls inline."""
    blocks: list[str] = []
    for m in msgs:
        content = m.content
        if len(content) > max_chars_per_message:
            half = max_chars_per_message // 2
            content = (
                f"{content[:half]}\n…[{len(content) - 2 * half} chars elided]…\n{content[-half:]}"
            )
        if m.is_tool_result:
            tag = f"[tool result {m.tool_call_id}{' ERROR' if m.is_error else ''}]"
        else:
            tag = f"[{m.role}]"
        lines = [f"{tag} {content}".rstrip()]
        for tc in m.tool_calls:
            lines.append(f"[tool call {tc.id}] {tc.name}({tc.arguments})")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_prompt(transcript: Sequence[Message], previous: PreviousCompaction | None) -> str:
    conversation = render_transcript(transcript)
    if previous is None:
        return FIRST_TEMPLATE.format(
            template=ANCHOR_TEMPLATE, rules=FORMAT_RULES, conversation=conversation
        )
    return INCREMENTAL_TEMPLATE.format(
        previous=previous.render(),
        conversation=conversation,
        template=ANCHOR_TEMPLATE,
        rules=FORMAT_RULES,
    )


class LLMSummarizer:
    """Summarises with a ``ChatModel`` using the first-time or incremental prompt."""

    def __init__(self, chat_model: ChatModel, *, model_name: str = "") -> None:
        self.chat_model = chat_model
        self.model_name = (
            model_name or getattr(chat_model, "model", "") or type(chat_model).__name__
        )

    def _result(self, completion: ChatCompletion) -> SummaryResult:
        if not completion.text.strip():
            raise SummarizerError(f"chat model {self.model_name!r} returned an empty completion")
        return SummaryResult(
            text=completion.text, usage=completion.usage, model=completion.model or self.model_name
        )

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        prompt = render_prompt(transcript, previous)
        return self._result(self.chat_model.complete([Message(role="user", content=prompt)]))

    async def asummarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        prompt = render_prompt(transcript, previous)
        msg = [Message(role="user", content=prompt)]
        acomplete = getattr(self.chat_model, "acomplete", None)
        if acomplete is None:
            return self._result(await asyncio.to_thread(self.chat_model.complete, msg))
        return self._result(await acomplete(msg))


def as_summarizer(obj: Summarizer | ChatModel) -> Summarizer:
    """A ``ChatModel`` passed where a ``Summarizer`` is expected is wrapped in ``LLMSummarizer``."""
    if isinstance(obj, Summarizer):
        return obj
    if isinstance(obj, ChatModel) or hasattr(obj, "complete"):
        return LLMSummarizer(obj)
    raise TypeError(
        f"{type(obj).__name__} is neither a Summarizer (summarize) nor a ChatModel (complete)"
    )
