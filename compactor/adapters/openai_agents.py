"""The compactor inside the OpenAI Agents SDK: ``CompactingSession`` wraps any ``Session``.

``Runner.run(agent, prompt, session=CompactingSession(SQLiteSession("u1"), context_window=…,
spool=…))``: items the runner saves go to the wrapped session unchanged (it keeps the whole
conversation) and to the conversation's ``CompactionSession``; ``get_items()`` returns the
compacted view. The runner reads the session once per run, so a run of many tool calls grows
past that view: pass ``RunConfig(call_model_input_filter=session.call_model_input_filter)`` and
every model call of the run gets the compacted view (``get_items()`` then returns the current view
without compacting again, so that each model call is one turn).

``get_items(limit=N)`` is the wrapped session's own last N items: the runner reads such tails to
check what it saved, and a compacted view would not match them. So the wrapper has no
``session_settings`` of its own; a ``SessionSettings(limit=…)`` in the ``RunConfig`` would make
each run start from a raw tail rather than the compacted view. ``pop_item()`` takes back an item
not yet compacted at no cost; taking back an older one restarts the compaction state from the
wrapped session's items (same session id, no events for them). ``clear_session()`` starts a new
compaction session, ``<session_id>-<n>``.

Items map to compactor messages so that a call and its result stay one exchange: consecutive
assistant-side items (an assistant message, reasoning, function calls) are one assistant message
with its tool calls, each ``*_call_output`` a tool result, a user or system item a user or system
message (a short marker for an image or file). Item ids, ``provider_data``, reasoning and
anything else they carry are kept aside and come back with their message. When the runner passes
its context (it does to sessions whose methods take ``wrapper``), the usage of its last request
feeds ``observe_usage``. Instructions and tool schemas are not counted: budget them with
``CompactorConfig.reserve_tokens``. Server-managed conversations (``previous_response_id``,
``conversation_id``) keep their history on the server, out of this session's reach.

The Agents SDK is imported when a session is made, never at import time
(``pip install 'compactlens[openai-agents]'``).
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Hashable, Sequence
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
    from agents import RunContextWrapper, Session, TResponseInputItem
    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData

EXTRA = "openai-agents"
MARKER_CHARS = 120
"""A file's marker quotes at most this much of its URL or id."""

_Item = dict[str, Any]
"""An input item as the wrapped session stores it (the SDK types them as TypedDicts)."""
_Origin = tuple[_Item, ...]
"""The items one compactor message came from."""


class CompactingSession:
    """A ``Session`` that returns the compacted conversation (see the module docstring).

    Takes the wrapped session and the ``CompactionOptions`` keywords (``context_window``
    required; ``session_id`` defaults to the wrapped session's).
    """

    def __init__(self, session: Session, **options: Unpack[CompactionOptions]) -> None:
        require("agents", EXTRA, "CompactingSession")
        self.inner = session
        self.session_id: str = session.session_id
        self.session_settings: SessionSettings | None = None
        """No ``limit``: compaction decides what the model sees (a limit would make the runner
        read the raw tail instead)."""
        options.setdefault("session_id", session.session_id)
        self._base_id = options["session_id"] or session.session_id
        self.conversations: Conversations[_Item, _Origin] = Conversations(_Codec(), options)
        self._conversation: Conversation[_Item, _Origin] | None = None
        self._pending: list[_Item] = []
        """Items saved since the last compaction: not yet in the compaction session."""
        self._generation = 1
        self._filtered = False
        self._usage_seen: tuple[int, int] = (0, 0)

    # ------------------------------------------------------------ the Session protocol

    async def get_items(
        self, limit: int | None = None, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The compacted conversation; with ``limit``, the wrapped session's last items."""
        if limit is not None:
            return await _call(self.inner.get_items, wrapper, limit=limit)  # type: ignore[no-any-return]
        conversation = await self._ready(wrapper)
        self._commit(conversation)
        if not conversation.session.history:
            return []
        items = conversation.peek() if self._filtered else await conversation.aprepare()
        return cast("list[TResponseInputItem]", copy.deepcopy(items))

    async def add_items(
        self, items: list[TResponseInputItem], wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        await self._ready(wrapper)  # before the store holds them: they are new, not stored
        await _call(self.inner.add_items, wrapper, items)
        self._pending += [cast("_Item", copy.deepcopy(item)) for item in items]
        self._observe(wrapper)

    async def pop_item(
        self, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        item = cast("TResponseInputItem | None", await _call(self.inner.pop_item, wrapper))
        if item is None:
            return None
        if self._pending and self._pending[-1] == item:
            self._pending.pop()
        elif self._conversation is not None:  # already compacted: start again from the store
            self.conversations.drop(None)
            self._conversation, self._pending = None, []
        return item

    async def clear_session(self, wrapper: RunContextWrapper[Any] | None = None) -> None:
        await _call(self.inner.clear_session, wrapper)
        if self._conversation is not None:
            self._conversation.close()
            self.conversations.drop(None)
            self._generation += 1
        self._conversation, self._pending = None, []

    # ------------------------------------------------------------ every model call of a run

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig(call_model_input_filter=…)``: the compacted view for this model call."""
        from agents.run_config import ModelInputData

        conversation = await self._ready(None)
        self._commit(conversation)
        self._filtered = True
        sent = cast("list[_Item]", data.model_data.input)
        unsaved = conversation.new_items(sent)
        if len(unsaved) == len(sent) and conversation.session.history:
            unsaved = []  # nothing sent is known: the runner's copy differs, trust the store
        view = await conversation.aprepare()
        items = [*copy.deepcopy(view), *unsaved]
        return ModelInputData(
            input=cast("list[TResponseInputItem]", items),
            instructions=data.model_data.instructions,
        )

    # ------------------------------------------------------------ bookkeeping

    async def _ready(self, wrapper: RunContextWrapper[Any] | None) -> Conversation[_Item, _Origin]:
        """The conversation, started on first use from what the wrapped session holds."""
        if self._conversation is not None:
            return self._conversation
        session_id = (
            self._base_id if self._generation == 1 else f"{self._base_id}-{self._generation}"
        )
        conversation = self.conversations.get(None, session_id=session_id)
        stored = await _call(self.inner.get_items, wrapper)
        if stored:
            items = [cast("_Item", copy.deepcopy(item)) for item in stored]
            conversation.append(items, recorded=conversation.resumable)
        self._conversation, self._pending = conversation, []
        return conversation

    def _commit(self, conversation: Conversation[_Item, _Origin]) -> None:
        if self._pending:
            conversation.append(self._pending)
            self._pending = []

    def _observe(self, wrapper: RunContextWrapper[Any] | None) -> None:
        """The usage of the runner's newest request, once, when it passes its context."""
        if wrapper is None or self._conversation is None:
            return
        entries = wrapper.usage.request_usage_entries
        seen = (id(wrapper.usage), len(entries))
        if not entries or seen == self._usage_seen:
            return
        self._usage_seen = seen
        last = entries[-1]
        cached = getattr(last.input_tokens_details, "cached_tokens", 0) or 0
        self._conversation.observe(
            Usage(
                input_tokens=last.input_tokens,
                output_tokens=last.output_tokens,
                cache_read_tokens=cached,
            )
        )

    @property
    def compaction_session(self) -> CompactionSession | None:
        """The current compaction session (None before the first use)."""
        return self._conversation.session if self._conversation is not None else None

    def close(self) -> None:
        """Record the items saved since the last model call, and flush the events."""
        if self._conversation is not None:
            self._commit(self._conversation)
        self.conversations.close()


async def _call(
    method: Callable[..., Any], wrapper: RunContextWrapper[Any] | None, *args: Any, **kwargs: Any
) -> Any:
    """Call a wrapped session's method, passing the runner's context if it takes one."""
    if wrapper is not None and "wrapper" in inspect.signature(method).parameters:
        kwargs["wrapper"] = wrapper
    result = method(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


# ---------------------------------------------------------------- items ⇄ messages

_USER_ROLES = ("user", "system", "developer")


class _Codec:
    """Agents SDK input items to compactor messages and back."""

    def key(self, item: _Item) -> Hashable:
        return json.dumps(item, sort_keys=True, default=str)  # stored items are copies

    def decode(self, items: Sequence[_Item]) -> list[tuple[Message, _Origin]]:
        out: list[tuple[Message, _Origin]] = []
        group: list[_Item] = []
        for item in items:
            if _is_assistant_side(item):
                group.append(item)
                continue
            if group:
                out.append((_assistant(group), tuple(group)))
                group = []
            out.append((_message(item), (item,)))
        if group:
            out.append((_assistant(group), tuple(group)))
        return out

    def encode(self, view: Sequence[Restored[_Origin]]) -> list[_Item]:
        out: list[_Item] = []
        for restored in view:
            msg, origin = restored.message, restored.origin
            if origin is not None and (restored.exact or msg.role == "assistant"):
                out += origin
            elif origin is not None:  # an offloaded result, a truncated task: same item, new text
                field = "output" if msg.tool_call_id is not None else "content"
                out.append({**origin[0], field: msg.content})
            else:
                out += _new_items(msg)
        return out


def _is_assistant_side(item: _Item) -> bool:
    kind = item.get("type")
    if kind in (None, "message"):
        return item.get("role") == "assistant"
    return not str(kind).endswith("_output")


def _assistant(group: Sequence[_Item]) -> Message:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in group:
        if item.get("type") in (None, "message"):
            texts.append(_text(item.get("content")))
        elif isinstance(item.get("call_id"), str):
            calls.append(
                ToolCall(id=item["call_id"], name=_call_name(item), arguments=_arguments(item))
            )
    return Message(
        role="assistant", content="\n".join(t for t in texts if t), tool_calls=tuple(calls)
    )


def _call_name(item: _Item) -> str:
    name = item.get("name")
    return name if isinstance(name, str) else str(item.get("type", ""))


def _arguments(item: _Item) -> str:
    arguments = item.get("arguments")
    if isinstance(arguments, str):
        return arguments
    rest = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status", "name")}
    return json.dumps(rest, ensure_ascii=False, default=str)


def _message(item: _Item) -> Message:
    call_id = item.get("call_id")
    if isinstance(call_id, str):
        return Message(role="tool", content=_text(item.get("output")), tool_call_id=call_id)
    role = item.get("role")
    text = _text(item.get("content"))
    return Message(role="system" if role in ("system", "developer") else "user", content=text)


def _text(content: Any) -> str:
    """The text of an item's content or output (a marker for an image or a file)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False, default=str)
    parts: list[str] = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict):
            text = part.get("text", part.get("refusal"))
            parts.append(text if isinstance(text, str) else _marker(part))
    return "\n".join(parts)


def _marker(part: dict[str, Any]) -> str:
    kind = part.get("type", "part")
    where = part.get("image_url") or part.get("file_url") or part.get("file_id") or ""
    name = part.get("filename") or ""
    data = part.get("file_data") or ""
    size = f", {len(data)} chars" if isinstance(data, str) and data else ""
    shown = " ".join(str(x)[:MARKER_CHARS] for x in (name, where) if x)
    return f"[{kind}{size}{' ' + shown if shown else ''}]"


def _new_items(msg: Message) -> list[_Item]:
    """Items for a message the compactor wrote (the compaction message, a repaired result)."""
    if msg.tool_call_id is not None:
        return [
            {"type": "function_call_output", "call_id": msg.tool_call_id, "output": msg.content}
        ]
    if msg.role == "assistant":
        items: list[_Item] = []
        if msg.content:
            text = {"type": "output_text", "text": msg.content, "annotations": []}
            items.append({"type": "message", "role": "assistant", "content": [text]})
        items += [
            {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
            for c in msg.tool_calls
        ]
        return items
    return [{"role": msg.role, "content": msg.content}]
