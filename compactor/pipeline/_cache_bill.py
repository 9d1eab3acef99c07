"""Whether a Warn offload pays for itself in a prompt-cached session (``cache_priced_offload``).

A provider that caches prompts bills the part of a prompt it has seen before at the cache-read
price and the rest at the cache-write price. An offload replaces tool results inside the cached
prefix, so the prompt is new from the first offloaded result on: this turn writes what it would
have read. What it earns back:

- the offloaded tokens' cache reads on every later turn until the next summarising compaction
  (Soft), which rewrites the prefix anyway;
- Soft itself, later: the view is smaller by the offloaded tokens, so Soft fires that many
  turns of growth later, and every later compaction with it. A summarising compaction costs a
  rewrite of the view it leaves (cache writes) and the summariser's reading of what it replaces
  (uncached input); spread over the turns of one compaction cycle (Soft's threshold less what
  a summary leaves, at the view's growth per turn), each turn it is put off is worth that cost
  over the cycle's length.

A replay of real sessions showed why the second term matters: without it, a session growing by
6% of its window per turn held every offload (Soft was always a turn or two away), and its Softs
then freed far less than the offloads would have, so it compacted more and paid more. Prices
are in units of one uncached input token (``CompactorConfig.cache_read_price`` and
``cache_write_price``). Pure arithmetic over the view; nothing here writes a file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from compactor.config import CompactorConfig
from compactor.messages import Message
from compactor.pipeline._tiers import split_head_tail
from compactor.pipeline.offload import offloadable, render_placeholder, result_path
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
    deferral: float = 0.0
    """What putting Soft (and every compaction after it) off by the offloaded tokens' turns of
    growth is worth."""

    @property
    def pays(self) -> bool:
        return self.turns is None or self.saving + self.deferral >= self.cost

    def words(self) -> str:
        return (
            f"offload held: it would write again {self.rewritten:,} cached tokens "
            f"(+{self.cost:,.0f} uncached-token prices now) to save {self.saved:,} tokens on "
            f"each of the {self.turns} turns until Soft ({self.saving:,.0f}) and put Soft off "
            f"({self.deferral:,.0f})"
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
    settled: int | None = None,
    session_id: str = "",
) -> OffloadBill | None:
    """The bill of the offload Warn would make of ``view`` now, or None when it would offload
    nothing. ``cached_bytes``: how much of the view the provider has cached (the previous
    view's bytes; 0 when the cache has expired); ``growth``: tokens the view gains per turn;
    ``tokens``: the view's tokens now, in a ``window``-token context; ``settled``: the tokens
    the session's last summarising compaction left (None: none yet, half of Soft's
    threshold is assumed); ``session_id``: whose offload folder the placeholders name."""
    split = split_head_tail(view, config.min_tail_messages)
    first: int | None = None
    saved_bytes = 0
    for i in range(split.head_start, split.tail_start):
        msg = view[i]
        if not offloadable(msg, config.offload_threshold):
            continue
        path = result_path(session_id, msg.tool_call_id or "")
        size = utf8_len(msg.content)
        kept = utf8_len(
            render_placeholder(path, msg.content, config.preview_lines, config.preview_chars)
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
    if growth is None or growth <= 0:
        return OffloadBill(saved, rewritten, None, cost, 0.0)
    soft_at = config.soft * window - config.reserve_tokens
    turns = max(0, math.ceil((soft_at - tokens) / growth))
    left = soft_at / 2 if settled is None else min(settled, soft_at)
    cycle = max(1.0, (soft_at - left) / growth)  # turns from one summary to the next
    # a summary's rewrite (the fixed prompt the estimator counts stays cached) and the
    # summariser's reading of what it replaces
    compaction = write * max(0.0, left - zero) + (soft_at - left)
    deferral = min(saved / growth, cycle) / cycle * compaction
    # reads saved on the turns before Soft's; Soft's own turn is in the deferral
    saving = read * saved * max(0, turns - 1)
    return OffloadBill(saved, rewritten, turns, cost, saving, deferral)
