"""What the framework adapters share: options, one CompactionSession per conversation, and the
parts of framework messages that a compactor ``Message`` cannot hold.

Each adapter supplies a ``Codec``: how framework items become compactor ``Message``s (each with
an opaque *origin*: the framework objects it came from), and how a compacted view becomes
framework items again. A message the view keeps as it was is given back as its origin, so a tool
call, a tool result, an image part or provider metadata survives whole; a message the compactor
changed (an offloaded tool result) is rebuilt from its origin with the new text; a message the
compactor wrote (the compaction message) is new. This module imports no framework and decides
nothing about compaction: the ``CompactionSession`` does.
"""

from __future__ import annotations

import importlib
import os
import threading
import uuid
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Generic, Protocol, Required, TypedDict, TypeVar

from compactor.config import CompactorConfig
from compactor.errors import CompactorError
from compactor.events import Capture
from compactor.messages import Message
from compactor.pipeline.offload import CompactionOffloader
from compactor.pipeline.pairs import repair_orphaned_tool_pairs
from compactor.pipeline.progressive import ProgressiveCompactor
from compactor.session import CompactionSession
from compactor.summaries.extractive import ExtractiveSummarizer
from compactor.summaries.summarize import ChatModel, Summarizer
from compactor.writing._recording import next_seq_of
from compactor.writing.sinks import EventSink, SpoolSink

ItemT = TypeVar("ItemT")
"""A framework's message item (a pydantic-ai ``ModelMessage``, a LangChain message, an Agents
SDK input item)."""
OriginT = TypeVar("OriginT")
"""Where a compactor ``Message`` came from, in the framework's terms (opaque here)."""


class MissingFrameworkError(CompactorError, ImportError):
    """An adapter was used without its framework installed; the message names the extra."""


def require(module: str, extra: str, adapter: str) -> ModuleType:
    """Import a framework module for ``adapter``, or raise one line naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingFrameworkError(
            f"{adapter} needs {module!r}, which could not be imported ({exc}): "
            f"pip install 'compactlens[{extra}]'"
        ) from exc


class CompactionOptions(TypedDict, total=False):
    """The keyword arguments every adapter takes.

    Keys:
        context_window: the model's context window in tokens (required).
        spool: where the events go: a spool directory (a ``SpoolSink`` the adapter owns and
            closes), any ``EventSink``, or None for no events.
        session_id: the session id of the first conversation the adapter sees; another
            conversation through the same adapter is ``<session_id>:<its key>``. Default: the
            framework's own conversation key where it has one, else a fresh UUID.
        summarizer: a ``Summarizer`` or ``ChatModel`` (default: the offline
            ``ExtractiveSummarizer``).
        compactor: a ``ProgressiveCompactor`` to copy per conversation (its summariser, config,
            offloader, estimator, record store); its window must equal ``context_window``.
        config: the ``CompactorConfig`` (default thresholds when None); ignored with
            ``compactor``.
        work_dir: where offloaded tool results are written
            (``<work_dir>/.compactlens/tool_results/<session>/``); None: nothing is offloaded to
            files. Ignored with ``compactor``.
        capture: ``"full"`` or ``"metadata"`` (no content in events).
        model, agent: written on each session's ``session_started`` event.
    """

    context_window: Required[int]
    spool: str | os.PathLike[str] | EventSink | None
    session_id: str | None
    summarizer: Summarizer | ChatModel | None
    compactor: ProgressiveCompactor | None
    config: CompactorConfig | None
    work_dir: str | os.PathLike[str] | None
    capture: Capture
    model: str
    agent: str


@dataclass(frozen=True)
class Usage:
    """What the framework reported for the last model request."""

    input_tokens: int
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    model: str = ""


@dataclass(frozen=True)
class Restored(Generic[OriginT]):
    """One message of a compacted view and where it came from: ``exact`` when the view holds it
    as it arrived, ``origin`` None when the compactor wrote it."""

    message: Message
    origin: OriginT | None
    exact: bool


class Codec(Protocol[ItemT, OriginT]):
    """How one framework's items map to compactor ``Message``s and back."""

    def key(self, item: ItemT) -> Hashable:
        """A cheap identity for an item, to tell the items already seen from the new ones."""
        ...

    def decode(self, items: Sequence[ItemT]) -> list[tuple[Message, OriginT]]:
        """The compactor messages of consecutive new items, each with its origin."""
        ...

    def encode(self, view: Sequence[Restored[OriginT]]) -> list[ItemT]:
        """A compacted view as framework items."""
        ...


class Conversation(Generic[ItemT, OriginT]):
    """One conversation: its ``CompactionSession`` and what its items carried that ``Message``
    cannot, kept aside by message and restored on the way back.

    A framework hands over the whole conversation each time (or only the new items, for the
    Agents SDK session); ``sync`` appends the items after the last one it has seen or produced.
    One request at a time per conversation, as the frameworks call it.
    """

    def __init__(
        self, codec: Codec[ItemT, OriginT], start: _SessionFactory, *, resumable: bool = False
    ) -> None:
        self.codec = codec
        self._start = start
        self.resumable = resumable
        """Its session id is already in the sink: what it holds when first seen was recorded by
        an earlier process (resumed without events)."""
        self._session: CompactionSession | None = None
        self._by_identity: dict[int, tuple[Message, OriginT]] = {}
        self._by_value: dict[Message, OriginT] = {}
        self._by_result: dict[str, OriginT] = {}
        self._by_call: dict[str, tuple[Message, OriginT]] = {}
        self._seen: dict[Hashable, ItemT] = {}
        """Items appended to the history, by key (held, so that identity keys stay unique)."""
        self._produced: dict[Hashable, ItemT] = {}
        """The items of the last view handed back (a framework may keep them as its history)."""
        self.awaiting_usage = False
        """A view was prepared and no usage has been reported for it yet."""

    @property
    def session(self) -> CompactionSession:
        if self._session is None:
            self._session = self._start(())
        return self._session

    # ------------------------------------------------------------ the way in

    def new_items(self, items: Sequence[ItemT]) -> Sequence[ItemT]:
        """The items after the last one this conversation has seen or handed back (by key, else
        by equality, for a history rebuilt from storage); all of them if none is known."""
        key = self.codec.key
        for j in range(len(items) - 1, -1, -1):
            k = key(items[j])
            if k in self._seen or k in self._produced:
                return items[j + 1 :]
        known = [*self._seen.values(), *self._produced.values()]
        for j in range(len(items) - 1, -1, -1):
            if items[j] in known:
                return items[j + 1 :]
        return items

    def sync(self, items: Sequence[ItemT]) -> Sequence[ItemT]:
        """Append what ``items`` (the whole conversation) holds that is new; return it."""
        if self._session is None and self.resumable and len(items) > 1:
            self.append(items[:-1], recorded=True)
            items = items[-1:]
        new = self.new_items(items)
        self.append(new)
        return new

    def append(self, items: Sequence[ItemT], *, recorded: bool = False) -> None:
        """Append new items to the history. ``recorded``: an earlier process recorded them (a
        conversation first seen here whose session the sink already holds): no events."""
        decoded = self.codec.decode(items)
        for msg, origin in decoded:
            self._keep(msg, origin)
        for item in items:
            self._seen[self.codec.key(item)] = item
        messages = [msg for msg, _origin in decoded]
        if self._session is None:
            self._session = self._start(messages if recorded else ())
            if recorded:
                return
        self._session.extend(messages)

    def _keep(self, msg: Message, origin: OriginT) -> None:
        self._by_identity[id(msg)] = (msg, origin)
        self._by_value[msg] = origin
        if msg.tool_call_id is not None:
            self._by_result[msg.tool_call_id] = origin
        for call in msg.tool_calls:
            self._by_call[call.id] = (msg, origin)

    # ------------------------------------------------------------ the way out

    def prepare(self) -> list[ItemT]:
        view, _record = self.session.prepare()
        return self._handed_back(view)

    async def aprepare(self) -> list[ItemT]:
        view, _record = await self.session.aprepare()
        return self._handed_back(view)

    def _handed_back(self, view: list[Message]) -> list[ItemT]:
        items = self.codec.encode(self.restore(view))
        self._produced = {self.codec.key(item): item for item in items}
        self.awaiting_usage = True
        return items

    def peek(self) -> list[ItemT]:
        """The current view as framework items, without compacting (no event, no turn)."""
        view = repair_orphaned_tool_pairs(self.session.view())
        return self.codec.encode(self.restore(view))

    def restore(self, view: Sequence[Message]) -> list[Restored[OriginT]]:
        """Each message of ``view`` with its origin; the session's own system prompt (which the
        framework sends beside the messages) is left out."""
        out: list[Restored[OriginT]] = []
        system = self.session.system
        for msg in view:
            if system is not None and (msg is system or msg == system) and not out:
                continue
            out.append(self._restore(msg))
        return out

    def _restore(self, msg: Message) -> Restored[OriginT]:
        hit = self._by_identity.get(id(msg))
        if hit is not None and hit[0] is msg:
            return Restored(msg, hit[1], exact=True)
        if msg in self._by_value:
            return Restored(msg, self._by_value[msg], exact=True)
        if msg.tool_call_id is not None and msg.tool_call_id in self._by_result:
            return Restored(msg, self._by_result[msg.tool_call_id], exact=False)
        if msg.tool_calls and msg.tool_calls[0].id in self._by_call:
            return Restored(msg, self._by_call[msg.tool_calls[0].id][1], exact=False)
        return Restored(msg, None, exact=False)

    # ------------------------------------------------------------ usage

    def observe(self, usage: Usage | None) -> None:
        """Feed the framework's usage of the last request to the session, once per view."""
        if usage is None or not self.awaiting_usage or usage.input_tokens <= 0:
            return
        self.awaiting_usage = False
        self.session.observe_usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_creation_tokens=usage.cache_creation_tokens,
            model=usage.model,
        )

    def close(self) -> None:
        if self._session is not None:
            self._session.close()


class _SessionFactory(Protocol):
    def __call__(self, resume: Sequence[Message]) -> CompactionSession: ...


class Conversations(Generic[ItemT, OriginT]):
    """One ``Conversation`` per conversation key, all with the same options and event sink."""

    def __init__(self, codec: Codec[ItemT, OriginT], options: CompactionOptions) -> None:
        self.codec = codec
        window = options["context_window"]
        template = options.get("compactor")
        if template is not None and template.context_window != window:
            raise ValueError(
                f"context_window={window} differs from the compactor's "
                f"{template.context_window}: pass the same window (or only one compactor)"
            )
        if template is None:
            work_dir = options.get("work_dir")
            template = ProgressiveCompactor(
                options.get("summarizer") or ExtractiveSummarizer(),
                window,
                config=options.get("config"),
                offloader=CompactionOffloader(work_dir, "adapter") if work_dir else None,
            )
        self.template = template
        spool = options.get("spool")
        self.sink: EventSink | None
        if isinstance(spool, str | os.PathLike):
            self.sink, self._owns_sink = SpoolSink(spool), True
        else:
            self.sink, self._owns_sink = spool, False
        self.session_id = options.get("session_id")
        self.capture: Capture = options.get("capture", "full")
        self.model = options.get("model", "")
        self.agent = options.get("agent", "")
        self._by_key: dict[str | None, Conversation[ItemT, OriginT]] = {}
        self._lock = threading.Lock()

    def get(
        self, key: str | None, *, system: str | None = None, session_id: str | None = None
    ) -> Conversation[ItemT, OriginT]:
        """The conversation of ``key`` (the framework's conversation or thread id, None when it
        has none); created on first use, with ``system`` as its session's system prompt, under
        ``session_id`` if given. A named session the sink already holds is resumable."""
        with self._lock:
            found = self._by_key.get(key)
            if found is None:
                named = bool(session_id or self.session_id)
                session_id = session_id or self._session_id(key)
                resumable = named and self._known(session_id)
                found = Conversation(
                    self.codec, self._factory(session_id, system), resumable=resumable
                )
                self._by_key[key] = found
            return found

    def drop(self, key: str | None) -> None:
        """Forget a conversation (the next ``get`` of ``key`` starts it again)."""
        with self._lock:
            self._by_key.pop(key, None)

    def _session_id(self, key: str | None) -> str:
        if self.session_id:
            if not self._by_key:
                return self.session_id
            return f"{self.session_id}:{key or uuid.uuid4()}"
        return key or str(uuid.uuid4())

    def _known(self, session_id: str) -> bool:
        """The sink already holds events of this session (an earlier process recorded it)."""
        return next_seq_of(self.sink, session_id, self.template.faults) > 0

    def _factory(self, session_id: str, system: str | None) -> _SessionFactory:
        def start(resume: Sequence[Message]) -> CompactionSession:
            # a copy per conversation: its own paths and summary state
            compactor = self.template.for_session(session_id, capture=self.capture)
            return CompactionSession(
                compactor,
                system,
                session_id=session_id,
                event_sink=self.sink,
                capture=self.capture,
                model=self.model,
                agent=self.agent,
                source="live",
                resume=resume,
            )

        return start

    def sessions(self) -> dict[str | None, CompactionSession]:
        """The sessions started so far, by conversation key."""
        with self._lock:
            return {k: c.session for k, c in self._by_key.items()}

    def close(self) -> None:
        """Flush every session; close the spool if this adapter opened it."""
        with self._lock:
            conversations = list(self._by_key.values())
        for conversation in conversations:
            conversation.close()
        if self._owns_sink and self.sink is not None:
            self.sink.close()
