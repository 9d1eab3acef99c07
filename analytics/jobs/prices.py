"""Price profiles: how a provider caches prompts and what it charges, per million tokens.

A ``PriceProfile`` holds the cache rules (explicit breakpoints with a TTL, as Anthropic bills;
automatic prefix caching with a minimum prefix and a granularity, as OpenAI and DeepSeek do;
or no cache) and the prices of uncached input, cache reads, cache writes and output, with the
date and page they were read from. ``BUILTIN_PROFILES`` are the four named ones; a session's
profile comes from its model name (``profile_name_for_model``) unless the caller names one.
Reading a profile from a TOML file is ``analytics.tuning.prices``' job: nothing here reads files.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Caching = Literal["explicit", "automatic", "none"]

STORED_ON = dt.date(2026, 12, 2)
"""When the built-in prices were read from stored copies of the providers' pages."""
STORED_NOTE = "list price as stored, re-check before budgeting"


class PriceProfile(BaseModel):
    """One provider's prompt-cache rules and prices (per million tokens, in ``currency``).

    ``caching``: ``explicit`` (the harness marks breakpoints; a prefix read from the cache costs
    ``cache_read``, the rest of the prompt is written at ``cache_write``); ``automatic`` (the
    provider caches every prompt's prefix itself, in units of ``granularity_tokens`` once it is
    ``min_prefix_tokens`` long; what is not read is billed as uncached ``input``); ``none``.
    ``ttl_seconds``: how long a written prefix stays readable (None: longer than any gap we see).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    currency: str = Field(default="USD", min_length=1)
    caching: Caching
    ttl_seconds: float | None = Field(default=None, gt=0)
    min_prefix_tokens: int = Field(default=0, ge=0)
    granularity_tokens: int = Field(default=1, ge=1)
    input: float = Field(ge=0, allow_inf_nan=False)
    cache_read: float = Field(ge=0, allow_inf_nan=False)
    cache_write: float = Field(ge=0, allow_inf_nan=False)
    output: float = Field(ge=0, allow_inf_nan=False)
    models: list[str] = Field(default_factory=list)
    """Lower-case substrings of model names this profile applies to."""
    taken_on: dt.date | None = None
    source: str = ""
    note: str = ""

    @model_validator(mode="after")
    def _no_cache_prices_without_a_cache(self) -> PriceProfile:
        if self.caching == "none" and (self.cache_read or self.cache_write):
            raise ValueError(
                "caching = 'none' bills every prompt token as input: leave cache_read and "
                "cache_write at 0 or choose caching = 'explicit' or 'automatic'"
            )
        return self


ANTHROPIC = PriceProfile(
    name="anthropic",
    caching="explicit",
    ttl_seconds=300,
    min_prefix_tokens=1024,
    input=3.00,
    cache_read=0.30,
    cache_write=3.75,
    output=15.00,
    models=["claude", "anthropic"],
    taken_on=STORED_ON,
    source="https://platform.claude.com/docs/en/about-claude/pricing",
    note=(
        f"Claude Sonnet 4.x: 5-minute cache write 1.25x input (1-hour write $6.00, 2x), cache "
        "read 0.1x; explicit breakpoints (Claude Code marks the newest message each turn, so the "
        f"whole prefix up to it is cacheable); minimum cacheable prefix 1024 tokens; {STORED_NOTE}"
    ),
)
OPENAI = PriceProfile(
    name="openai",
    caching="automatic",
    ttl_seconds=300,
    min_prefix_tokens=1024,
    granularity_tokens=128,
    input=2.00,
    cache_read=0.50,
    cache_write=2.00,
    output=8.00,
    models=["gpt", "openai"],
    taken_on=STORED_ON,
    source=(
        "https://platform.openai.com/docs/guides/prompt-caching and the API pricing page "
        "(https://platform.openai.com/docs/pricing)"
    ),
    note=(
        "gpt-4.1 class: automatic prefix caching for prompts of 1024+ tokens, hits in "
        "increments of 128 tokens, no write premium, cached input 0.25x; cache kept 5-10 "
        f"minutes of inactivity (5 assumed); {STORED_NOTE}"
    ),
)
DEEPSEEK = PriceProfile(
    name="deepseek",
    caching="automatic",
    ttl_seconds=3600,
    min_prefix_tokens=64,
    granularity_tokens=64,
    input=0.27,
    cache_read=0.07,
    cache_write=0.27,
    output=1.10,
    models=["deepseek"],
    taken_on=STORED_ON,
    source="https://api-docs.deepseek.com/quick_start/pricing-details-usd",
    note=(
        "deepseek-chat: cache hit $0.07, cache miss $0.27 per MTok; automatic prefix caching "
        "in 64-token units, no write premium; unused cache cleared within hours (1 hour "
        f"assumed); {STORED_NOTE}"
    ),
)
NONE = PriceProfile(
    name="none",
    currency="Mtok",
    caching="none",
    input=1.0,
    cache_read=0.0,
    cache_write=0.0,
    output=1.0,
    note=(
        "no prompt cache: every prompt token at the input price 1.0, so cost is in millions "
        "of tokens billed (the tokens-billed figure / 1e6)"
    ),
)

BUILTIN_PROFILES: dict[str, PriceProfile] = {p.name: p for p in (ANTHROPIC, OPENAI, DEEPSEEK, NONE)}
"""The named profiles ``--price-profile`` accepts besides a TOML file."""


def profile_name_for_model(model: str | None) -> str:
    """The built-in profile a model name belongs to (``none`` when no profile names it).

    DeepSeek is tried first: routers spell its models ``openrouter/deepseek/...`` or
    ``openai/deepseek-chat``."""
    name = (model or "").lower()
    for profile in (DEEPSEEK, ANTHROPIC, OPENAI):
        if any(part in name for part in profile.models):
            return profile.name
    return NONE.name


def profile_for_model(model: str | None) -> PriceProfile:
    """The built-in profile of ``model`` (``NONE`` when unknown)."""
    return BUILTIN_PROFILES[profile_name_for_model(model)]
