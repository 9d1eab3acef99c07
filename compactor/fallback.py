"""Pair repair, history validation, and the token-budget fallback (trim and emergency truncation).

``TokenBudgetCompactor`` never calls an LLM. ``compact`` trims a view below a budget (the
LLM-failure fallback: below Warn); ``compact_force`` is Emergency: it keeps the system message,
the task (middle-truncated above a quarter of the window), the latest compaction message, and
the newest messages that fit the emergency target, pair-safe. Oversized newest messages are
offloaded (or cut in the middle) rather than dropped, so a view is never system-only.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from compactor.config import CompactorConfig
from compactor.errors import OffloadError
from compactor.messages import Message, ToolCall
from compactor.offload import CompactionOffloader
from compactor.records import DroppedMessage, OffloadEntry
from compactor.tokens import ByteEstimator, TokenEstimator, message_bytes

COMPACTION_MARKER = "[Context Compaction]"
MISSING_RESULT = "[tool result missing: the call was interrupted before it returned]"


def is_compaction_message(msg: Message) -> bool:
    return (
        msg.role == "user" and not msg.is_tool_result and msg.content.startswith(COMPACTION_MARKER)
    )


def find_task_index(msgs: Sequence[Message]) -> int | None:
    """The task: the first user message that is not a tool result (nor a compaction message)."""
    for i, m in enumerate(msgs):
        if m.role == "user" and not m.is_tool_result and not is_compaction_message(m):
            return i
    return None


def truncate_middle(text: str, max_bytes: int) -> str:
    """Cut ``text`` in the middle with a marker so that it fits ``max_bytes`` UTF-8 bytes."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    marker = f"\n…[{len(data) - max_bytes} bytes truncated by compactlens]…\n"
    keep = max(0, max_bytes - len(marker.encode()))
    head = data[: keep // 2].decode("utf-8", "ignore")
    tail = data[len(data) - (keep - keep // 2) :].decode("utf-8", "ignore") if keep else ""
    return f"{head}{marker}{tail}"


def _shrink_arguments(call: ToolCall, room: int) -> ToolCall:
    """The call with its arguments cut to ``room`` bytes, still a valid JSON object."""
    raw = call.arguments
    if len(raw.encode("utf-8", "surrogatepass")) <= room:
        return call
    keep = max(0, room - 40)
    while True:
        args = json.dumps({"truncated_arguments": truncate_middle(raw, keep)}, ensure_ascii=False)
        if len(args.encode("utf-8", "surrogatepass")) <= room or keep == 0:
            return call.model_copy(update={"arguments": args})
        keep //= 2


def shrink_message(msg: Message, max_bytes: int) -> Message:
    """``msg`` cut to about ``max_bytes``: long tool-call arguments first, then the content."""
    if message_bytes(msg) <= max_bytes:
        return msg
    content = len(msg.content.encode("utf-8", "surrogatepass"))
    fixed = (
        message_bytes(msg)
        - content
        - sum(len(tc.arguments.encode("utf-8", "surrogatepass")) for tc in msg.tool_calls)
    )
    available = max(0, max_bytes - fixed)
    if msg.tool_calls:
        arg_room = available - content if content <= available // 2 else available // 2
        per_call = max(0, arg_room) // len(msg.tool_calls)
        calls = tuple(_shrink_arguments(tc, per_call) for tc in msg.tool_calls)
        msg = msg.model_copy(update={"tool_calls": calls})
    room = max(0, max_bytes - (message_bytes(msg) - content))
    return msg.model_copy(update={"content": truncate_middle(msg.content, room)})


# ---------------------------------------------------------------- repair and validation


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


# ---------------------------------------------------------------- budget truncation


@dataclass
class Truncation:
    messages: list[Message]
    sources: list[int | None]
    dropped: list[DroppedMessage]
    offloaded: list[OffloadEntry]
    errors: list[str]
    truncated: set[int]
    """Input positions of messages kept but cut (not verbatim)."""


def _units(msgs: Sequence[Message], start: int) -> list[list[int]]:
    """Positions grouped so that an assistant message and its results form one unit."""
    units: list[list[int]] = []
    for i in range(start, len(msgs)):
        if msgs[i].is_tool_result and units:
            units[-1].append(i)
        else:
            units.append([i])
    return units


class TokenBudgetCompactor:
    """The fallback compactor: trims to a token budget without any LLM call."""

    def __init__(
        self,
        context_window: int,
        *,
        config: CompactorConfig | None = None,
        estimator: TokenEstimator | None = None,
        offloader: CompactionOffloader | None = None,
    ) -> None:
        self.context_window = context_window
        self.config = config or CompactorConfig()
        self.estimator = estimator or ByteEstimator()
        self.offloader = offloader

    def compact(self, msgs: Sequence[Message]) -> list[Message]:
        """Trim below ``fallback_target`` of the window (below Warn)."""
        return self.truncate(msgs, self.config.fallback_target).messages

    def compact_force(self, msgs: Sequence[Message]) -> list[Message]:
        """Emergency truncation to ``emergency_target`` of the window."""
        return self.truncate(msgs, self.config.emergency_target).messages

    def _tokens(self, n_bytes: int) -> int:
        return self.estimator.tokens_for_bytes(n_bytes)

    def truncate(self, msgs: Sequence[Message], target_fraction: float) -> Truncation:
        """Keep system, task, latest compaction message and the newest messages within budget."""
        budget = int(self.context_window * target_fraction)
        work = list(msgs)
        result = Truncation([], [], [], [], [], set())
        first = 1 if work and work[0].role == "system" else 0
        pinned: list[int] = list(range(first))
        task = find_task_index(work)
        carriers = [i for i, m in enumerate(work) if is_compaction_message(m)]
        if carriers:
            pinned.append(carriers[-1])
        if task is not None:
            pinned.append(task)
            task_cap = int(self.context_window * self.config.task_max_fraction) * 4
            if message_bytes(work[task]) > task_cap:
                work[task] = work[task].model_copy(
                    update={"content": truncate_middle(work[task].content, task_cap)}
                )
                result.truncated.add(task)
        used = sum(message_bytes(work[i]) for i in pinned)
        kept = set(pinned)
        for unit in reversed(_units(work, first)):
            if any(i in kept for i in unit):
                continue
            size = sum(message_bytes(work[i]) for i in unit)
            if self._tokens(used + size) > budget:
                if len(kept) > len(pinned):
                    break
                size = self._shrink(work, unit, max(0, budget * 4 - used), result)
            used += size
            kept.update(unit)
        for i, m in enumerate(work):
            if i in kept:
                result.messages.append(m)
                result.sources.append(i)
            else:
                orig = msgs[i]
                b = message_bytes(orig)
                result.dropped.append(
                    DroppedMessage(
                        index=i,
                        role=orig.role,
                        bytes=b,
                        tokens=self._tokens(b),
                        tool_call_id=orig.tool_call_id,
                    )
                )
        return result

    def _shrink(self, work: list[Message], unit: list[int], room: int, out: Truncation) -> int:
        """Fit the newest unit into ``room`` bytes: offload its results, then cut the middle."""
        share = max(64, room // max(1, len(unit)))
        total = 0
        for i in unit:
            m = work[i]
            if m.is_tool_result and self.offloader is not None and message_bytes(m) > share:
                try:
                    done = self.offloader.offload(
                        m,
                        threshold=min(share, self.config.offload_threshold),
                        preview_lines=self.config.preview_lines,
                        preview_chars=min(self.config.preview_chars, share // 2),
                    )
                except OffloadError as exc:
                    out.errors.append(str(exc))
                    done = None
                if done is not None:
                    out.offloaded.append(done[0])
                    m = done[1]
            if message_bytes(m) > share:
                m = shrink_message(m, share)
                out.truncated.add(i)
            work[i] = m
            total += message_bytes(m)
        return total
