"""OpenHands events → messages and condensations: what the V0 and SDK importers share.

Both harnesses keep a conversation as events; the model sees a *view* of them: every event
not forgotten by a condensation, the latest condensation's summary inserted at its
``summary_offset`` (counted in view events). ``Conversation`` is fed the events in order, each
as what it means (a system prompt, a message, a tool call of a model response, a tool result,
an event that is no message, a condensation), and builds the original history, the usage per
response and one ``NativeCompaction`` per condensation: the view before is the harness's view
(as ``HarnessView`` tracks it), the view after keeps the messages whose events were not all
forgotten, with the summary as a user message where the harness put it. OpenHands records no
token count for its context, so ``tokens_before`` is estimated. A condensation after a
condensation request is ``manual``, else ``auto``. Reading files is the importers' job.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from datetime import datetime

from analytics.importers.native import Found, HarnessView, cut_summary
from analytics.importers.native_anchors import openhands_anchors
from analytics.importers.reading import Figures
from analytics.importers.session import NativeCompaction, TurnUsage, ViewRef
from compactor import Message, ToolCall

_SUMMARY = "\0summary"
"""The view-event key of the latest condensation's summary."""


@dataclass(frozen=True)
class IdRange:
    """The event ids ``start`` to ``end`` (inclusive), as V0 writes a condensation's forgotten
    events: asked only whether it holds an id, so a range of 10**9 ids costs nothing (a set of
    them did). An id is in it when written as ``str`` writes a whole number (``"7"``, not
    ``"07"``)."""

    start: int
    end: int

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str) or len(key) > 40:
            return False
        try:
            number = int(key)
        except ValueError:
            return False
        return self.start <= number <= self.end and str(number) == key


@dataclass(frozen=True)
class Condensed:
    """One condensation event, as both formats record it (``forgotten`` is asked only whether
    it holds an event's id)."""

    key: str
    forgotten: Container[str]
    summary: str | None
    summary_offset: int | None
    line: int | None
    timestamp: datetime | None


@dataclass
class Conversation:
    """The history, usage and compactions built from one conversation's events."""

    context_window: int = 0
    messages: list[Message] = field(default_factory=list)
    usage: list[TurnUsage] = field(default_factory=list)
    compactions: list[NativeCompaction] = field(default_factory=list)
    _events_of: list[set[str]] = field(default_factory=list)
    _response_at: dict[str, int] = field(default_factory=dict)
    _view_events: list[str] = field(default_factory=list)
    _view: HarnessView = field(default_factory=HarnessView)
    _requested: bool = False

    def message(self, key: str, msg: Message) -> None:
        """An event that is one message of the history (system prompt, user or agent text,
        tool result)."""
        self._view_events.append(key)
        self._events_of.append({key})
        self.messages.append(msg)

    def call(
        self,
        key: str,
        response_id: str | None,
        thought: str,
        call: ToolCall,
        usage: TurnUsage | None = None,
    ) -> None:
        """A tool call; calls of one model response share one assistant message."""
        self._view_events.append(key)
        index = self._response_at.get(response_id) if response_id else None
        if index is None:
            index = len(self.messages)
            if response_id:
                self._response_at[response_id] = index
            self.messages.append(Message(role="assistant", content=thought, tool_calls=[call]))
            self._events_of.append({key})
            if usage is not None:
                self.usage.append(usage.model_copy(update={"message_index": index}))
            return
        old = self.messages[index]
        said = thought and thought not in old.content  # calls of a response repeat its text
        content = "\n".join(t for t in (old.content, thought if said else "") if t)
        calls = [*old.tool_calls, call]
        self.messages[index] = old.model_copy(update={"content": content, "tool_calls": calls})
        self._events_of[index].add(key)

    def other(self, key: str) -> None:
        """An event in the harness's view that is no message (a state change, a recall)."""
        self._view_events.append(key)

    def requested(self) -> None:
        """A condensation request: the next condensation was asked for."""
        self._requested = True

    def condensed(self, event: Condensed) -> None:
        at = len(self.messages)
        before = self._view.upto(at)
        forgotten = event.forgotten
        gone = {
            i
            for i, keys in enumerate(self._events_of)
            if keys and all(k in forgotten for k in keys)
        }
        kept = [r for r in before if isinstance(r, int) and r not in gone]
        events = [k for k in self._view_events if k not in forgotten and k != _SUMMARY]
        offset = len(events) if event.summary_offset is None else event.summary_offset
        shown = set(events[:offset])  # once: in the comprehension's test it was per message
        head = {i for i, keys in enumerate(self._events_of) if not keys.isdisjoint(shown)}
        after: list[ViewRef] = [i for i in kept if i in head]
        summary, hidden = cut_summary(event.summary)
        if summary is not None:
            after.append(Message(role="user", content=summary))
            events.insert(min(offset, len(events)), _SUMMARY)
        after += [i for i in kept if i not in head]
        self._view_events = events
        found = Found(
            harness="openhands",
            native_id=event.key,
            line=event.line,
            timestamp=event.timestamp,
            before=before,
            after=after,
            summary_text=summary,
            anchors=openhands_anchors(summary),
            trigger="manual" if self._requested else "auto",
            hidden_tokens=hidden,
            context_window=self.context_window,
        )
        self._requested = False
        self.compactions.append(self._view.compacted(self.messages, at, found))


def usage_of(raw: object, figures: Figures) -> TurnUsage | None:
    """Usage in LiteLLM's shape (``prompt_tokens``, ``completion_tokens``, cache fields), as
    OpenHands records it. LiteLLM's ``prompt_tokens`` counts cache reads but not cache writes,
    so the prompt is ``prompt_tokens + cache writes``. A bad figure is None (``figures`` names
    it): a prompt that is there but unreadable still makes a usage, its size unknown."""
    if not isinstance(raw, dict):
        return None
    prompt = figures.count(raw, "prompt_tokens")
    if prompt is None and not figures.failed("prompt_tokens"):
        return None
    details = raw.get("prompt_tokens_details")
    cached = figures.count(details, "cached_tokens", f"{figures.where}.prompt_tokens_details")
    read = (
        figures.count(raw, "cache_read_tokens")
        or figures.count(raw, "cache_read_input_tokens")
        or cached
    )
    write = figures.count(raw, "cache_write_tokens") or figures.count(
        raw, "cache_creation_input_tokens"
    )
    unknown = prompt is None or any(
        figures.failed(k) for k in ("cache_write_tokens", "cache_creation_input_tokens")
    )
    return TurnUsage(
        message_index=0,
        input_tokens=None if unknown or prompt is None else prompt + (write or 0),
        output_tokens=figures.count(raw, "completion_tokens"),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )
