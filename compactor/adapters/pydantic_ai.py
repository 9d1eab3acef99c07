"""The compactor inside pydantic-ai: ``CompactionProcessor``, a history processor.

``Agent(model, capabilities=[ProcessHistory(CompactionProcessor(context_window=…, spool=…))])``:
before every model request pydantic-ai hands the processor the conversation's messages; it
appends the new ones to that conversation's ``CompactionSession`` and returns the compacted view,
which ``ProcessHistory`` sends and also makes the run's history (pydantic-ai's rule for history
processors). ``CompactionProcessor(...).capability()`` compacts the request only, so the run's
history stays whole, and records each response (and its usage) as soon as it arrives.

Conversations are told apart by pydantic-ai's ``conversation_id`` (on every message). A
``ModelResponse`` is one assistant message (its text and tool calls); a ``ModelRequest`` is one
system message for its system prompt parts, one tool message per tool return, and one user
message for the rest (text, with a short marker for an image or other file). Whatever else the
messages carry (images, thinking, native tool parts, instructions, timestamps, provider details,
run ids) is kept aside and comes back with its message. Instructions and tool schemas, sent
beside the messages, are not counted: budget them with ``CompactorConfig.reserve_tokens``.

pydantic-ai is imported when a processor is made, never at import time
(``pip install 'compactlens[pydantic-ai]'``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from compactor.adapters._common import (
    CompactionOptions,
    Conversation,
    Conversations,
    Restored,
    Usage,
    require,
)
from compactor.messages import Message, ToolCall
from compactor.session import CompactionSession

if TYPE_CHECKING:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
    )

    _Origin = tuple[ModelMessage, tuple[int, ...]]
    """The pydantic-ai message a compactor message came from, and which of its parts."""

EXTRA = "pydantic-ai"
MARKER_CHARS = 120
"""A file's marker in a user message quotes at most this much of its URL or name."""


class CompactionProcessor:
    """A pydantic-ai history processor that compacts each request (see the module docstring).

    Takes the ``CompactionOptions`` keywords (``context_window`` required). One
    ``CompactionSession`` per conversation; ``close()`` flushes their events.
    """

    def __init__(self, **options: Unpack[CompactionOptions]) -> None:
        require("pydantic_ai", EXTRA, "CompactionProcessor")
        self.conversations: Conversations[ModelMessage, _Origin] = Conversations(_Codec(), options)

    async def __call__(self, messages: list[Any]) -> list[Any]:
        # annotated with Any: pydantic-ai resolves this signature at run time to decide whether
        # to pass a RunContext, and its types are not importable here at module level
        history: list[ModelMessage] = messages
        conversation = self._conversation(history)
        new = conversation.sync(history)
        conversation.observe(_first_usage(new))
        return await conversation.aprepare()

    def _conversation(self, messages: Sequence[ModelMessage]) -> Conversation[Any, Any]:
        key = next((m.conversation_id for m in reversed(messages) if m.conversation_id), None)
        return self.conversations.get(key)

    def received(self, messages: Sequence[ModelMessage], response: ModelResponse) -> None:
        """The response to the view just sent: its usage is reported and it joins the history
        at once (the capability calls this; a processor alone sees it on the next request)."""
        conversation = self._conversation(messages)
        conversation.observe(_first_usage([response]))
        conversation.append([response])

    def capability(self) -> AbstractCapability[Any]:
        """This processor as a capability that leaves the run's history whole."""
        return _capability_class()(self)

    @property
    def sessions(self) -> dict[str | None, CompactionSession]:
        """The sessions started so far, by pydantic-ai conversation id."""
        return self.conversations.sessions()

    def close(self) -> None:
        self.conversations.close()


@functools.cache
def _capability_class() -> Callable[[CompactionProcessor], AbstractCapability[Any]]:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext

    @dataclasses.dataclass
    class CompactionCapability(AbstractCapability[Any]):
        """Sends each model request the compacted view; the run's history stays whole."""

        processor: CompactionProcessor

        async def before_model_request(
            self, ctx: RunContext[Any], request_context: ModelRequestContext
        ) -> ModelRequestContext:
            request_context.messages = await self.processor(list(request_context.messages))
            return request_context

        async def after_model_request(
            self,
            ctx: RunContext[Any],
            *,
            request_context: ModelRequestContext,
            response: ModelResponse,
        ) -> ModelResponse:
            self.processor.received(request_context.messages, response)
            return response

        @classmethod
        def get_serialization_name(cls) -> str | None:
            return None  # holds a processor: not serialisable as a spec

    return CompactionCapability


def _first_usage(items: Sequence[ModelMessage]) -> Usage | None:
    """The usage of the first response among ``items`` (the answer to the last view sent)."""
    from pydantic_ai.messages import ModelResponse

    for item in items:
        if isinstance(item, ModelResponse):
            usage = item.usage
            return Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_creation_tokens=usage.cache_write_tokens,
                model=item.model_name or "",
            )
    return None


class _Codec:
    """pydantic-ai messages to compactor messages and back."""

    def key(self, item: ModelMessage) -> Hashable:
        return id(item)  # the same objects come back run after run

    def decode(self, items: Sequence[ModelMessage]) -> list[tuple[Message, _Origin]]:
        from pydantic_ai.messages import ModelResponse

        out: list[tuple[Message, _Origin]] = []
        for item in items:
            if isinstance(item, ModelResponse):
                out.append((_assistant(item), (item, tuple(range(len(item.parts))))))
            else:
                out += _request_messages(item)
        return out

    def encode(self, view: Sequence[Restored[_Origin]]) -> list[ModelMessage]:
        names = {call.id: call.name for r in view for call in r.message.tool_calls}
        out: list[ModelMessage] = []
        segment = _Segment()
        for restored in view:
            if restored.message.role == "assistant":
                segment.flush_into(out)
                out.append(_response(restored))
                continue
            origin, parts = _request_parts(restored, names)
            if origin is not None and segment.origin is not None and segment.origin is not origin:
                segment.flush_into(out)
            if segment.origin is None:  # parts the compactor wrote join a neighbour's request
                segment.origin = origin
            segment.parts += parts
        segment.flush_into(out)
        return out


def _assistant(response: ModelResponse) -> Message:
    from pydantic_ai.messages import TextPart, ToolCallPart

    texts = [p.content for p in response.parts if isinstance(p, TextPart)]
    calls = tuple(
        ToolCall(id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_json_str())
        for p in response.parts
        if isinstance(p, ToolCallPart)
    )
    return Message(role="assistant", content="\n".join(texts), tool_calls=calls)


def _request_messages(request: ModelRequest) -> list[tuple[Message, _Origin]]:
    """System prompt parts, then each tool return, then the rest as one user message."""
    from pydantic_ai.messages import BaseToolReturnPart, RetryPromptPart, SystemPromptPart

    system: list[int] = []
    rest: list[int] = []
    results: list[tuple[Message, _Origin]] = []
    for i, part in enumerate(request.parts):
        if isinstance(part, SystemPromptPart):
            system.append(i)
        elif isinstance(part, BaseToolReturnPart):
            msg = Message(
                role="tool",
                content=part.model_response_str(),
                tool_call_id=part.tool_call_id,
                name=part.tool_name,
                is_error=part.outcome != "success",
            )
            results.append((msg, (request, (i,))))
        elif isinstance(part, RetryPromptPart) and part.tool_name:  # legacy retry of a call
            msg = Message(
                role="tool",
                content=part.model_response(),
                tool_call_id=part.tool_call_id,
                name=part.tool_name,
                is_error=True,
            )
            results.append((msg, (request, (i,))))
        else:
            rest.append(i)
    out: list[tuple[Message, _Origin]] = []
    if system:
        text = "\n\n".join(_part_text(request.parts[i]) for i in system)
        out.append((Message(role="system", content=text), (request, tuple(system))))
    out += results
    if rest or not out:
        text = "\n".join(t for i in rest if (t := _part_text(request.parts[i])))
        out.append((Message(role="user", content=text), (request, tuple(rest))))
    return out


def _part_text(part: ModelRequestPart) -> str:
    """The text a request part puts before the model (a marker for a file)."""
    from pydantic_ai.messages import (
        CachePoint,
        RetryFeedbackPart,
        SystemPromptPart,
        TextContent,
        UserPromptPart,
    )

    if isinstance(part, SystemPromptPart):
        return part.content
    if isinstance(part, RetryFeedbackPart):
        return part.model_response()
    if not isinstance(part, UserPromptPart):
        return ""  # instruction and tool-availability records: metadata, kept aside
    if isinstance(part.content, str):
        return part.content
    texts: list[str] = []
    for item in part.content:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, TextContent):
            texts.append(item.content)
        elif not isinstance(item, CachePoint):
            texts.append(_file_marker(item))
    return "\n".join(texts)


def _file_marker(item: object) -> str:
    kind = getattr(item, "kind", type(item).__name__)
    media_type = getattr(item, "media_type", "")
    where = str(getattr(item, "url", "") or getattr(item, "file_id", ""))[:MARKER_CHARS]
    data = getattr(item, "data", None)
    size = f", {len(data)} bytes" if isinstance(data, bytes) else ""
    return f"[{kind}: {media_type}{size}{' ' + where if where else ''}]"


def _response(restored: Restored[_Origin]) -> ModelResponse:
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

    msg, origin = restored.message, restored.origin
    if origin is not None and isinstance(origin[0], ModelResponse):
        if restored.exact:
            return origin[0]
        kept = [p for p in origin[0].parts if not isinstance(p, TextPart)]
        text = [TextPart(msg.content)] if msg.content else []
        return dataclasses.replace(origin[0], parts=[*text, *kept])
    parts: list[TextPart | ToolCallPart] = [TextPart(msg.content)] if msg.content else []
    parts += [ToolCallPart(c.name, c.arguments, tool_call_id=c.id) for c in msg.tool_calls]
    return ModelResponse(parts=parts)


def _request_parts(
    restored: Restored[_Origin], names: dict[str, str]
) -> tuple[ModelRequest | None, list[ModelRequestPart]]:
    """The request parts one view message stands for, and the request they came from."""
    from pydantic_ai.messages import (
        BaseToolReturnPart,
        ModelRequest,
        RetryPromptPart,
        SystemPromptPart,
        ToolReturnPart,
        UserPromptPart,
    )

    msg, origin = restored.message, restored.origin
    request = origin[0] if origin is not None and isinstance(origin[0], ModelRequest) else None
    if request is not None and origin is not None:
        parts = [request.parts[i] for i in origin[1]]
        if restored.exact:
            return request, parts
        if msg.tool_call_id is not None and parts:
            part = parts[0]  # an offloaded tool result: its placeholder, same call
            if isinstance(part, BaseToolReturnPart | RetryPromptPart):
                return request, [_with_content(part, msg.content)]
    new: ModelRequestPart
    if msg.tool_call_id is not None:
        name = msg.name or names.get(msg.tool_call_id, "")
        new = ToolReturnPart(name, msg.content, tool_call_id=msg.tool_call_id)
    elif msg.role == "system":
        new = SystemPromptPart(msg.content)
    else:
        new = UserPromptPart(msg.content)
    return request, [new]


def _with_content(part: Any, content: str) -> Any:
    # the union of tool-return part classes defeats the dataclasses plugin: narrowed by caller
    return dataclasses.replace(part, content=content)


@dataclasses.dataclass
class _Segment:
    """Consecutive request parts being put back into one ``ModelRequest``: the request they
    came from (None for parts the compactor wrote) and the parts."""

    origin: ModelRequest | None = None
    parts: list[ModelRequestPart] = dataclasses.field(default_factory=list)

    def flush_into(self, out: list[ModelMessage]) -> None:
        from pydantic_ai.messages import ModelRequest

        if self.parts:
            origin = self.origin
            if origin is not None and _same_parts(self.parts, origin.parts):
                out.append(origin)
            elif origin is not None:
                out.append(dataclasses.replace(origin, parts=list(self.parts)))
            else:
                out.append(ModelRequest(parts=list(self.parts)))
        self.origin, self.parts = None, []


def _same_parts(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
