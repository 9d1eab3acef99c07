"""The compactor inside LangChain v1 agents: ``CompactionMiddleware``, an ``AgentMiddleware``.

``create_agent(model, tools, middleware=[CompactionMiddleware(context_window=…, spool=…)])``:
around every model call (``wrap_model_call`` / ``awrap_model_call``) the middleware appends the
new messages of the agent's state to the conversation's ``CompactionSession`` and calls the
model with the compacted view instead. The graph state keeps every message: only the request
changes. The model's reply joins the history, and its ``usage_metadata`` feeds
``observe_usage``, as soon as it returns.

Conversations are told apart by LangGraph's ``thread_id`` (one conversation when the agent runs
without a checkpointer). The system message first seen is the session's system prompt (counted,
and sent as the request's own ``system_message``, never twice). Messages map one to one (a
``HumanMessage`` to a user message, an ``AIMessage`` with its tool calls, a ``ToolMessage`` to a
tool result, with a short marker for an image block); what they carry beside text and tool calls
(content blocks, ids, ``response_metadata``, ``additional_kwargs``, artifacts) is kept aside and
comes back with the message. Tool schemas are not counted: budget them with
``CompactorConfig.reserve_tokens``.

LangChain is imported when a middleware is made, never at import time
(``pip install 'compactlens[langchain]'``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Unpack, cast

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
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage, AnyMessage, BaseMessage

    _Middleware = AgentMiddleware[AgentState[Any], Any, Any]
else:
    _Middleware = object  # the class a middleware is made as adds AgentMiddleware at run time

EXTRA = "langchain"
MARKER_CHARS = 120
"""A content block's marker quotes at most this much of its URL."""


class CompactionMiddleware(_Middleware):
    """A LangChain ``AgentMiddleware`` that compacts each model request (see the module
    docstring). Takes the ``CompactionOptions`` keywords (``context_window`` required).

    The instance is an ``AgentMiddleware`` too: the class it is made as derives from both (built
    on first use, since LangChain is imported only then).
    """

    def __new__(cls, **options: Unpack[CompactionOptions]) -> CompactionMiddleware:
        if cls is CompactionMiddleware:
            cls = _middleware_class()
        return super().__new__(cls)

    def __init__(self, **options: Unpack[CompactionOptions]) -> None:
        self.conversations: Conversations[BaseMessage, BaseMessage] = Conversations(
            _Codec(), options
        )

    @property
    def name(self) -> str:
        return "CompactionMiddleware"

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse]
    ) -> ModelResponse:
        conversation = self._conversation(request)
        conversation.sync(request.messages)
        response = handler(request.override(messages=_any(conversation.prepare())))
        _received(conversation, response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        conversation = self._conversation(request)
        conversation.sync(request.messages)
        response = await handler(request.override(messages=_any(await conversation.aprepare())))
        _received(conversation, response)
        return response

    def _conversation(self, request: ModelRequest[Any]) -> Conversation[BaseMessage, BaseMessage]:
        info = getattr(request.runtime, "execution_info", None)
        thread_id = getattr(info, "thread_id", None)
        system = request.system_message
        text = _text(system.content) if system is not None else None
        return self.conversations.get(
            thread_id if isinstance(thread_id, str) else None, system=text
        )

    @property
    def sessions(self) -> dict[str | None, CompactionSession]:
        """The sessions started so far, by LangGraph thread id (None without a checkpointer)."""
        return self.conversations.sessions()

    def close(self) -> None:
        self.conversations.close()


@functools.cache
def _middleware_class() -> type[CompactionMiddleware]:
    require("langchain.agents.middleware", EXTRA, "CompactionMiddleware")
    from langchain.agents.middleware import AgentMiddleware

    return type(
        "CompactionMiddleware",
        (CompactionMiddleware, AgentMiddleware),
        {"__module__": __name__, "__doc__": CompactionMiddleware.__doc__},
    )


def _any(messages: list[BaseMessage]) -> list[AnyMessage]:
    """The view as the request's message type (each is one of the union's classes: it came
    from the state or was made by ``_framework_message``)."""
    return cast("list[AnyMessage]", messages)


def _received(conversation: Conversation[BaseMessage, BaseMessage], response: Any) -> None:
    """The model's reply: its usage is reported for the view just sent, and it joins the history
    (when it has the id LangGraph will keep, so that it is not taken for new later)."""
    from langchain_core.messages import AIMessage

    result = getattr(response, "result", None)
    messages = result if isinstance(result, list) else [response]
    replies = [m for m in messages if isinstance(m, AIMessage)]
    if not replies:
        return
    conversation.observe(_usage(replies[0]))
    if all(m.id for m in replies):
        conversation.append(replies)


def _usage(reply: AIMessage) -> Usage | None:
    usage = reply.usage_metadata
    if usage is None:
        return None
    details = usage.get("input_token_details") or {}
    model = reply.response_metadata.get("model_name") or reply.response_metadata.get("model")
    return Usage(
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cache_read_tokens=details.get("cache_read", 0) or 0,
        cache_creation_tokens=details.get("cache_creation", 0) or 0,
        model=model if isinstance(model, str) else "",
    )


def _text(content: str | list[str | dict[Any, Any]]) -> str:
    """The text of a message's content (a marker for an image or other non-text block)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        else:
            parts.append(_marker(block))
    return "\n".join(parts)


def _marker(block: dict[Any, Any]) -> str:
    kind = block.get("type", "block")
    url = block.get("url") or block.get("image_url") or ""
    if isinstance(url, dict):
        url = url.get("url", "")
    data = block.get("base64") or block.get("data") or ""
    size = f", {len(data)} chars" if isinstance(data, str) and data else ""
    media = block.get("mime_type") or ""
    where = f" {str(url)[:MARKER_CHARS]}" if url else ""
    return f"[{kind}: {media}{size}{where}]"


class _Codec:
    """LangChain messages to compactor messages and back, one to one."""

    def key(self, item: BaseMessage) -> Hashable:
        return item.id or id(item)  # LangGraph gives every message in the state an id

    def decode(self, items: Sequence[BaseMessage]) -> list[tuple[Message, BaseMessage]]:
        return [(_message(item), item) for item in items]

    def encode(self, view: Sequence[Restored[BaseMessage]]) -> list[BaseMessage]:
        return [_framework_message(r) for r in view]


def _message(item: BaseMessage) -> Message:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    text = _text(item.content)
    if isinstance(item, ToolMessage):
        return Message(
            role="tool",
            content=text,
            tool_call_id=item.tool_call_id,
            name=item.name,
            is_error=item.status == "error",
        )
    if isinstance(item, AIMessage):
        calls = tuple(
            ToolCall(
                id=call.get("id") or "",
                name=call["name"],
                arguments=json.dumps(call["args"], ensure_ascii=False),
            )
            for call in item.tool_calls
        )
        return Message(role="assistant", content=text, tool_calls=calls)
    if isinstance(item, SystemMessage):
        return Message(role="system", content=text)
    if isinstance(item, HumanMessage):
        return Message(role="user", content=text)
    role = getattr(item, "role", "user")  # a ChatMessage names its role
    return Message(role=role if role in ("system", "assistant") else "user", content=text)


def _framework_message(restored: Restored[BaseMessage]) -> BaseMessage:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    msg, origin = restored.message, restored.origin
    if origin is not None:
        if restored.exact:
            return origin
        return origin.model_copy(update={"content": msg.content})  # an offloaded result
    if msg.tool_call_id is not None:
        return ToolMessage(content=msg.content, tool_call_id=msg.tool_call_id, name=msg.name)
    if msg.role == "assistant":
        calls = [
            {"name": c.name, "args": _args(c.arguments), "id": c.id, "type": "tool_call"}
            for c in msg.tool_calls
        ]
        return AIMessage(content=msg.content, tool_calls=calls)
    if msg.role == "system":
        return SystemMessage(content=msg.content)
    return HumanMessage(content=msg.content)


def _args(arguments: str) -> dict[str, Any]:
    try:
        parsed = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}
