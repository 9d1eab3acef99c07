"""Tool-exchange integrity: repairing broken call/result pairs and listing violations.

A valid history has every tool call's result right after its assistant message and no result
without its call. Repair never drops text: orphaned results become user notes. Nothing here
compacts or truncates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from compactor.messages import Message

MISSING_RESULT = "[tool result missing: the call was interrupted before it returned]"


@dataclass
class Repair:
    messages: list[Message]
    sources: list[int | None]
    """Input position of each output message; None for a message the repair inserted."""
    notes: list[str] = field(default_factory=list)


def repair_with_report(msgs: Sequence[Message]) -> Repair:
    """Make every tool call have its result right after its assistant message, and no result
    lack its call. Missing results get an error placeholder; orphaned results become user notes
    (their text is kept); misplaced results move next to their call."""
    pending: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(msgs):
        if m.is_tool_result:
            pending[m.tool_call_id or ""].append(i)
    assigned: dict[int, list[int | None]] = {}
    used: set[int] = set()
    for i, m in enumerate(msgs):
        if m.role == "assistant" and m.tool_calls:
            slots: list[int | None] = []
            for tc in m.tool_calls:
                queue = pending.get(tc.id)
                slots.append(queue.pop(0) if queue else None)
            used.update(s for s in slots if s is not None)
            assigned[i] = slots
    out = Repair(messages=[], sources=[])
    for i, m in enumerate(msgs):
        if i in used:
            continue
        if m.is_tool_result:
            out.notes.append(f"orphaned tool result {m.tool_call_id!r} at {i} kept as a user note")
            note = f"[orphaned tool result {m.tool_call_id}]\n{m.content}"
            out.messages.append(Message(role="user", content=note))
            out.sources.append(i)
            continue
        if m.role == "system" and i > 0:
            out.notes.append(f"system message at {i} kept as a user note")
            out.messages.append(Message(role="user", content=f"[system note]\n{m.content}"))
            out.sources.append(i)
            continue
        out.messages.append(m)
        out.sources.append(i)
        slots = assigned.get(i, [])
        found = sorted(s for s in slots if s is not None)  # keep the results' own order
        for k, pos in enumerate(found):
            if pos != i + 1 + k:
                out.notes.append(
                    f"tool result {msgs[pos].tool_call_id!r} moved from {pos} "
                    f"next to its call at {i}"
                )
            out.messages.append(msgs[pos])
            out.sources.append(pos)
        for tc, slot in zip(m.tool_calls, slots, strict=False):
            if slot is None:
                out.notes.append(f"tool call {tc.id!r} at {i} had no result; placeholder inserted")
                out.messages.append(
                    Message(
                        role="tool",
                        content=MISSING_RESULT,
                        tool_call_id=tc.id,
                        is_error=True,
                        name=tc.name,
                    )
                )
                out.sources.append(None)
    return out


def repair_orphaned_tool_pairs(msgs: Sequence[Message]) -> list[Message]:
    """A repaired copy of ``msgs`` (see ``repair_with_report``); the input is not changed."""
    return repair_with_report(msgs).messages


def validate_history(msgs: Sequence[Message]) -> list[str]:
    """Every invariant violation, as text; empty when the history is valid."""
    problems: list[str] = []
    i, n = 0, len(msgs)
    while i < n:
        m = msgs[i]
        if m.role == "system" and i > 0:
            problems.append(f"system message at index {i}: only the first message may be system")
        if m.is_tool_result:
            problems.append(f"tool result {m.tool_call_id!r} at index {i} does not follow its call")
            i += 1
            continue
        i += 1
        if m.role == "assistant" and m.tool_calls:
            expected = [tc.id for tc in m.tool_calls]
            while i < n and msgs[i].is_tool_result:
                rid = msgs[i].tool_call_id
                if rid in expected:
                    expected.remove(rid)
                else:
                    problems.append(
                        f"tool result {rid!r} at index {i} answers no call of the "
                        f"assistant message before it"
                    )
                i += 1
            problems.extend(
                f"tool call {cid!r} has no result right after its assistant message"
                for cid in expected
            )
    return problems


class ExchangeTracker:
    """O(1) bookkeeping of tool exchanges as messages are appended, so that only a broken view
    pays for repair: the calls of the newest assistant message still without results
    (``open_calls``, id to tool name), where that message is (``open_at``), and the newest
    history index at which an exchange was left broken (``broken_at``)."""

    def __init__(self) -> None:
        self.open_calls: dict[str, str] = {}
        self.open_at: int | None = None
        self.broken_at: int | None = None

    @property
    def broken(self) -> bool:
        return self.broken_at is not None

    @property
    def needs_repair(self) -> bool:
        return self.broken or bool(self.open_calls)

    def add(self, msg: Message, index: int) -> None:
        if msg.is_tool_result:
            if msg.tool_call_id in self.open_calls:
                del self.open_calls[msg.tool_call_id or ""]
                if not self.open_calls:
                    self.open_at = None
            else:
                self.broken_at = index  # a result without its call
            return
        if self.open_calls:
            self.broken_at = index  # a call was left without its result
            self.open_calls.clear()
        self.open_calls.update((tc.id, tc.name) for tc in msg.tool_calls)
        self.open_at = index if self.open_calls else None

    def checkpointed(self, upto: int) -> None:
        """The history before ``upto`` is now behind a checkpoint, repaired; a break at or
        after it (inside an exchange still open) still needs repair in the views."""
        if self.broken_at is not None and self.broken_at < upto:
            self.broken_at = None


def missing_results(open_calls: dict[str, str]) -> list[Message]:
    """Stand-ins for the results of calls still running (id to tool name), in call order: what
    a view sent now shows until the real results arrive."""
    return [
        Message(role="tool", content=MISSING_RESULT, tool_call_id=call_id, is_error=True, name=name)
        for call_id, name in open_calls.items()
    ]
