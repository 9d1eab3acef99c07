"""CompactorConfig: validated, frozen thresholds and sizes for the ProgressiveCompactor.

Validation happens here, once; every other module trusts these values. Environment variables
are not read here (see the README's table for the CLI's variables).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class CompactorConfig(BaseModel):
    """Tier thresholds (fractions of the context window, inclusive) and sizes.

    Attributes:
        warn, soft, full, emergency: ratios at which each tier fires; strictly increasing in (0, 1].
        offload_threshold: a tool result larger than this many UTF-8 bytes is offloaded to a file.
            The one threshold the compactor honours (its offloader's own default is overridden).
        preview_lines, preview_chars: what an offload placeholder keeps of the original.
        min_tail_messages: newest messages always kept verbatim (extended to keep tool pairs whole).
        reserve_tokens: tokens added to every ratio (tool schemas, the expected output).
        emergency_target: the whole view after Emergency is at most this fraction of the window.
        fallback_target: the view after an LLM-failure fallback is at most this fraction; must be
            below ``warn`` so that the fallback really leaves every tier.
        task_max_fraction: the task message is middle-truncated to this fraction of the window
            in compaction messages and emergency views.
        summarizer_timeout_s: a summariser call that takes longer fails over to the fallback.
        soft_min_gain: Soft summarises the whole head instead of its older half when that half
            holds less than this fraction of the context in new messages (a summary of it would
            barely reduce anything, and an LLM call costs money).
        tool_offload_threshold: tool-time offload: a tool result larger than this many UTF-8
            bytes is offloaded when ``CompactionSession.append`` receives it (the history keeps
            the placeholder, the file the full text), in the compactor's offloader folders, as
            ``OffloadHook`` does. None (the default) turns it off: results enter the history
            whole and only compactions offload them (``offload_threshold``).
        tool_offload_preview_lines, tool_offload_preview_chars: what a tool-time placeholder
            keeps of the result (``OffloadHook``'s defaults: 20 lines, 4000 characters).
        cold_cache_compact: pull a due compaction forward to a turn whose prompt cache has
            expired anyway: when more than ``cold_cache_ttl_s`` passed since the session's
            previous ``prepare()`` (the provider then writes the whole prompt again) and the
            view is at this fraction of the window or more, below Soft, Soft runs now instead
            of at a later turn whose cache would still be warm. None (the default) turns it
            off; it must be below ``soft``.
        cold_cache_ttl_s: how long the provider keeps a prompt cached (Anthropic's default: 300
            seconds), for ``cold_cache_compact`` and ``cache_priced_offload``.
        cache_priced_offload: hold a Warn offload back while the prompt cache is warm and the
            offload does not pay for itself: it rewrites the cached prompt from its first
            offloaded result on (a cache write where a cache read was due); it earns the
            offloaded tokens' cache reads on each later turn until Soft, which the session
            foresees from how fast the view has been growing, and puts Soft (and every
            compaction after it) off by the offloaded tokens' turns of growth
            (``compactor.pipeline._cache_bill``). Off (the default): Warn always offloads.
        cache_read_price, cache_write_price: what a cached prompt token costs to read and to
            write, as fractions of an uncached one (Anthropic's: 0.1 and 1.25), for
            ``cache_priced_offload``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    warn: float = Field(0.60, gt=0, le=1)
    soft: float = Field(0.70, gt=0, le=1)
    full: float = Field(0.80, gt=0, le=1)
    emergency: float = Field(0.95, gt=0, le=1)
    offload_threshold: int = Field(4000, ge=1)
    preview_lines: int = Field(10, ge=0)
    preview_chars: int = Field(2000, ge=0)
    min_tail_messages: int = Field(6, ge=1)
    reserve_tokens: int = Field(0, ge=0)
    emergency_target: float = Field(0.50, gt=0, le=1)
    fallback_target: float = Field(0.50, gt=0, le=1)
    task_max_fraction: float = Field(0.25, gt=0, le=1)
    summarizer_timeout_s: float = Field(120.0, gt=0)
    soft_min_gain: float = Field(0.05, ge=0, le=1)
    tool_offload_threshold: int | None = Field(None, ge=1)
    tool_offload_preview_lines: int = Field(20, ge=0)
    tool_offload_preview_chars: int = Field(4000, ge=0)
    cold_cache_compact: float | None = Field(None, gt=0, lt=1)
    cold_cache_ttl_s: float = Field(300.0, gt=0)
    cache_priced_offload: bool = False
    cache_read_price: float = Field(0.1, ge=0)
    cache_write_price: float = Field(1.25, ge=0)

    @model_validator(mode="after")
    def _check_order(self) -> CompactorConfig:
        pairs = [(n, getattr(self, n)) for n in ("warn", "soft", "full", "emergency")]
        for (a, va), (b, vb) in itertools.pairwise(pairs):
            if not va < vb:
                raise ValueError(
                    f"thresholds must be strictly increasing: {a}={va} is not below {b}={vb}"
                )
        if not self.emergency_target < self.emergency:
            raise ValueError(
                f"emergency_target={self.emergency_target} must be below "
                f"emergency={self.emergency}, or Emergency would fire again next turn"
            )
        if self.cold_cache_compact is not None and not self.cold_cache_compact < self.soft:
            raise ValueError(
                f"cold_cache_compact={self.cold_cache_compact} must be below soft={self.soft}: "
                "it pulls Soft forward, to a turn before Soft would fire"
            )
        if not self.fallback_target < self.warn:
            raise ValueError(
                f"fallback_target={self.fallback_target} must be below warn={self.warn}, "
                "so that the LLM-failure fallback leaves every tier"
            )
        return self

    def config_hash(self) -> str:
        """A short stable hash of every value, stored on records to group runs by config.
        Fields added after the first release count only when set away from their default, so
        a config that leaves them alone hashes as it did before they existed."""
        later = self.at_default(_LATER_FIELDS)
        return hashlib.sha256(self.model_dump_json(exclude=later).encode()).hexdigest()[:12]

    def recorded(self) -> dict[str, Any]:
        """Every value as JSON data, less the later fields still at their default (those
        ``config_hash`` leaves out): what a session records of its config."""
        return self.model_dump(mode="json", exclude=self.at_default(_LATER_FIELDS))

    def at_default(self, names: Iterable[str]) -> set[str]:
        """Those of the fields ``names`` that hold their default value: what a record or a key
        leaves out, so that a config that leaves fields added later alone is written (and
        hashed) as before they existed."""
        fields = type(self).model_fields
        return {n for n in names if getattr(self, n) == fields[n].default}


_LATER_FIELDS = (
    "tool_offload_threshold",
    "tool_offload_preview_lines",
    "tool_offload_preview_chars",
    "cold_cache_compact",
    "cold_cache_ttl_s",
    "cache_priced_offload",
    "cache_read_price",
    "cache_write_price",
)
