"""The token-budget fallback: trim below a budget, or Emergency truncation, with no LLM call.

``TokenBudgetCompactor.compact`` trims a view below a budget (the LLM-failure fallback: below
Warn); ``compact_force`` is Emergency. Both keep the system message, the task (or the latest
compaction message, which carries it), and a contiguous run of the newest messages that fits
the target minus the reserved tokens, pair-safe. Oversized newest messages are offloaded (or
cut in the middle) rather than dropped, so a view is never system-only. It does not summarise.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from compactor._truncation import shrink_message, truncate_middle
from compactor.config import CompactorConfig
from compactor.errors import OffloadError
from compactor.messages import Message
from compactor.pipeline.offload import CompactionOffloader
from compactor.records import DroppedMessage, OffloadEntry
from compactor.summaries._message import (
    CompactionState,
    fit_compaction_message,
    parse_compaction_message,
    task_carrier_index,
)
from compactor.tokens import (
    ByteEstimator,
    TokenEstimator,
    max_bytes_for,
    message_budget_tokens,
    message_bytes,
    task_cap_bytes,
    utf8_len,
)


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

    def rebind(
        self, *, estimator: TokenEstimator, offloader: CompactionOffloader | None
    ) -> TokenBudgetCompactor:
        """A copy (of the same class, so a subclass keeps its behaviour) that counts with
        ``estimator`` and offloads with ``offloader``: the compactor's own, per session."""
        twin = copy.copy(self)
        twin.estimator, twin.offloader = estimator, offloader
        return twin

    def compact(self, msgs: Sequence[Message]) -> list[Message]:
        """Trim below ``fallback_target`` of the window (below Warn)."""
        return self.truncate(msgs, self.config.fallback_target).messages

    def compact_force(self, msgs: Sequence[Message]) -> list[Message]:
        """Emergency truncation to ``emergency_target`` of the window."""
        return self.truncate(msgs, self.config.emergency_target).messages

    def _tokens(self, n_bytes: int) -> int:
        return self.estimator.tokens_for_bytes(n_bytes)

    def truncate(self, msgs: Sequence[Message], target_fraction: float) -> Truncation:
        """System, the task (or the compaction message carrying it), and the newest messages,
        contiguous, within ``target_fraction`` of the window minus the reserved tokens."""
        budget = int(self.context_window * target_fraction) - self.config.reserve_tokens
        work = list(msgs)
        result = Truncation([], [], [], [], [], set())
        first = 1 if work and work[0].role == "system" else 0
        pinned: list[int] = list(range(first))
        task = task_carrier_index(work)
        if task is not None:
            pinned.append(task)
            state = parse_compaction_message(work[task])
            if state is not None:
                self._fit_carrier(work, task, state, result)
            else:
                self._cap_task(work, task, result)
        used = sum(message_bytes(work[i]) for i in pinned)
        kept = set(pinned)
        for unit in reversed(_units(work, first)):
            if any(i in kept for i in unit):
                break  # the run of newest messages reached the task: it stays contiguous
            size = sum(message_bytes(work[i]) for i in unit)
            if self._tokens(used + size) > budget:
                if len(kept) > len(pinned):
                    break
                room = max(0, max_bytes_for(self.estimator, budget) - used)
                size = self._shrink(work, unit, room, result)
            used += size
            kept.update(unit)
        for i, m in enumerate(work):
            if i in kept:
                result.messages.append(m)
                result.sources.append(i)
            else:
                result.dropped.append(self._dropped(i, msgs[i]))
        return result

    def _cap_task(self, work: list[Message], task: int, result: Truncation) -> None:
        """A task above ``task_max_fraction`` of the window is cut in the middle."""
        cap = self._task_cap()
        if message_bytes(work[task]) > cap:
            work[task] = work[task].model_copy(
                update={"content": truncate_middle(work[task].content, cap)}
            )
            result.truncated.add(task)

    def _fit_carrier(
        self, work: list[Message], at: int, state: CompactionState, result: Truncation
    ) -> None:
        """A compaction message larger than its task plus ``task_max_fraction`` of the window is
        re-rendered smaller; the task it carries is never cut further."""
        cap = self._task_cap() + utf8_len(state.task)
        if message_bytes(work[at]) > cap:
            work[at] = fit_compaction_message(state, cap)
            result.truncated.add(at)

    def _task_cap(self) -> int:
        return task_cap_bytes(self.estimator, self.context_window, self.config.task_max_fraction)

    def _dropped(self, index: int, msg: Message) -> DroppedMessage:
        n_bytes = message_bytes(msg)
        return DroppedMessage(
            index=index,
            role=msg.role,
            bytes=n_bytes,
            tokens=message_budget_tokens(self.estimator, n_bytes),
            tool_call_id=msg.tool_call_id,
        )

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
