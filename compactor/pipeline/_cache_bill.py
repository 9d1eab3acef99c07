"""Whether a Warn offload pays for itself in a prompt-cached session (``cache_priced_offload``).

A provider that caches prompts bills the part of a prompt it has seen before at the cache-read
price and the rest at the cache-write price. An offload replaces tool results inside the cached
prefix, so the prompt is new from the first offloaded result on: this turn writes what it would
have read. What it earns back is the offloaded tokens' cache reads on every later turn, but
only until the next summarising compaction (Soft), which rewrites the prefix anyway. Prices are
in units of one uncached input token (``CompactorConfig.cache_read_price`` and
``cache_write_price``). Pure arithmetic over the view; nothing here writes a file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from compactor.config import CompactorConfig
from compactor.messages import Message
from compactor.pipeline._tiers import split_head_tail
from compactor.pipeline.offload import OFFLOAD_DIR, is_offloaded, render_placeholder
from compactor.tokens import TokenEstimator, message_bytes, utf8_len


@dataclass(frozen=True)
class OffloadBill:
    """One Warn offload priced against the cache."""

    saved: int
    """Tokens the offloads would take out of every later prompt."""
    rewritten: int
    """Cached tokens from the first offloaded result on, written again this turn."""
    turns: int | None
    """Turns until Soft would fire at the view's recent growth; None when it is not growing
    (or there is no growth to go by yet): the saving then has no horizon."""
    cost: float
    """What this turn pays more with the offload than without it."""
    saving: float
    """The cache reads the offload saves on the turns until Soft."""

    @property
    def pays(self) -> bool:
        return self.turns is None or self.saving >= self.cost

    def words(self) -> str:
        return (
            f"offload held: it would write again {self.rewritten:,} cached tokens "
            f"(+{self.cost:,.0f} uncached-token prices now) to save {self.saved:,} tokens on "
            f"each of the {self.turns} turns until Soft ({self.saving:,.0f})"
        )


def offload_bill(
    view: Sequence[Message],
    config: CompactorConfig,
    estimator: TokenEstimator,
    *,
    cached_bytes: int,
    growth: float | None,
    tokens: int,
    window: int,
) -> OffloadBill | None:
    """The bill of the offload Warn would make of ``view`` now, or None when it would offload
    nothing. ``cached_bytes``: how much of the view the provider has cached (the previous
    view's bytes; 0 when the cache has expired); ``growth``: tokens the view gains per turn;
    ``tokens``: the view's tokens now, in a ``window``-token context."""
    split = split_head_tail(view, config.min_tail_messages)
    first: int | None = None
    saved_bytes = 0
    for i in range(split.head_start, split.tail_start):
        msg = view[i]
        size = utf8_len(msg.content)
        if not msg.tool_call_id or size <= config.offload_threshold or is_offloaded(msg.content):
            continue
        stand_in = f"{OFFLOAD_DIR}/session/{msg.tool_call_id}.txt"
        kept = utf8_len(
            render_placeholder(stand_in, msg.content, config.preview_lines, config.preview_chars)
        )
        if kept < size:
            first = i if first is None else first
            saved_bytes += size - kept
    if first is None:
        return None
    before = sum(message_bytes(m) for m in view[:first])
    zero = estimator.tokens_for_bytes(0)
    saved = max(0, estimator.tokens_for_bytes(saved_bytes) - zero)
    rewritten = max(0, estimator.tokens_for_bytes(max(0, cached_bytes - before)) - zero)
    read, write = config.cache_read_price, config.cache_write_price
    cost = write * (rewritten - min(saved, rewritten)) - read * rewritten
    turns: int | None = None
    if growth is not None and growth > 0:
        soft_at = config.soft * window - config.reserve_tokens
        turns = max(0, math.ceil((soft_at - tokens) / growth))
    saving = read * saved * (turns or 0)
    return OffloadBill(saved, rewritten, turns, cost, saving)
