"""The tier decision and the pair-safe head/tail split.

A split point never separates an assistant message with tool calls from its results: a point
is safe iff the message at it is not a tool result (histories are repaired first, so results sit
right after their call). Nothing here compacts anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compactor.config import CompactorConfig
from compactor.messages import Message
from compactor.records import CompactionTier


def tier_for_ratio(ratio: float, config: CompactorConfig) -> CompactionTier:
    """Thresholds are inclusive: a ratio equal to ``warn`` is Warn."""
    if ratio >= config.emergency:
        return CompactionTier.EMERGENCY
    if ratio >= config.full:
        return CompactionTier.FULL
    if ratio >= config.soft:
        return CompactionTier.SOFT
    if ratio >= config.warn:
        return CompactionTier.WARN
    return CompactionTier.NONE


def context_ratio(tokens: int, context_window: int, reserve_tokens: int = 0) -> float:
    if context_window <= 0:
        return 0.0
    return (tokens + reserve_tokens) / context_window


def is_safe_boundary(msgs: Sequence[Message], i: int) -> bool:
    """True if a cut before ``msgs[i]`` keeps every tool exchange on one side."""
    return i >= len(msgs) or not msgs[i].is_tool_result


@dataclass(frozen=True)
class Split:
    """Index ranges of one view: ``[0:head_start]`` system, ``head``, then ``tail``."""

    head_start: int
    tail_start: int
    n: int

    @property
    def has_system(self) -> bool:
        return self.head_start == 1

    @property
    def head_len(self) -> int:
        return self.tail_start - self.head_start

    @property
    def tail_len(self) -> int:
        return self.n - self.tail_start


def split_head_tail(msgs: Sequence[Message], min_tail: int) -> Split:
    """Head = ``msgs[first:tail_start]``, tail = the rest: at least ``min_tail`` messages,
    extended backwards until it does not start inside a tool exchange."""
    first = 1 if msgs and msgs[0].role == "system" else 0
    start = max(first, len(msgs) - min_tail)
    while start > first and not is_safe_boundary(msgs, start):
        start -= 1
    return Split(head_start=first, tail_start=start, n=len(msgs))


def soft_midpoint(msgs: Sequence[Message], split: Split) -> int:
    """The Soft cut inside the head, moved to the nearest safe point.

    Returns ``split.tail_start`` (summarise the whole head, as Full) when the head has no safe
    point strictly inside it.
    """
    lo, hi = split.head_start, split.tail_start
    mid = lo + (hi - lo) // 2
    for delta in range(hi - lo):
        for cand in (mid - delta, mid + delta):
            if lo < cand < hi and is_safe_boundary(msgs, cand):
                return cand
    return hi
