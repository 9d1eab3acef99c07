"""The prompt-cache model: how much of one prompt a provider reads from its cache, and the bill.

A prompt's *cached prefix* is the longest prefix it shares with a prompt sent within the
profile's TTL (in practice the previous turn's: views only grow between compactions, and a
compaction or a Warn offload rewrites the prefix from the first message it changed). Given the
prompt's size and that prefix, in provider tokens, ``split_prompt`` applies the profile's rules:

- ``explicit`` (Anthropic): the prefix is read when it is at least ``min_prefix_tokens`` long,
  the rest of the prompt is written (Claude Code marks the newest message, so all of it is
  cacheable); a prompt shorter than the minimum is uncached.
- ``automatic`` (OpenAI, DeepSeek): the prefix is read in whole ``granularity_tokens`` units
  once it reaches ``min_prefix_tokens``; the rest is uncached input, with no write premium.
- ``none``: every token uncached.

Checked on the dev transcripts (``tests/analytics/jobs/test_cache_model_reality.py``): the
predicted reads are within 1.3% of Claude Code's and DeepSeek's reported ones. Tokens come from
bytes through ``slope * bytes // 4 + overhead`` (``fit_calibration`` fits both to reported usage
the way ``OverheadCalibratedEstimator`` does; the overhead is the harness's hidden system prompt
and tool schemas, always at the front of the prompt). Pure functions: no I/O, no frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from analytics.jobs.prices import PriceProfile

PER = 1_000_000
"""Prices are per million tokens."""
MIN_SLOPE, MAX_SLOPE = 0.5, 2.0
"""The clamp ``OverheadCalibratedEstimator`` puts on its slope."""


class CacheSplit(NamedTuple):
    """A prompt's tokens by how they are billed: read from the cache, written to it, neither."""

    read: int
    write: int
    uncached: int

    @property
    def prompt(self) -> int:
        return self.read + self.write + self.uncached


def split_prompt(profile: PriceProfile, prompt_tokens: int, prefix_tokens: int) -> CacheSplit:
    """The split of a prompt of ``prompt_tokens`` whose first ``prefix_tokens`` are in the cache
    (clamped to the prompt), under ``profile``'s cache rules (see the module text)."""
    prompt = max(int(prompt_tokens), 0)
    prefix = min(max(int(prefix_tokens), 0), prompt)
    least = profile.min_prefix_tokens
    if profile.caching == "none" or prompt < max(least, 1):
        return CacheSplit(0, 0, prompt)
    if profile.caching == "explicit":
        read = prefix if prefix >= least else 0
        return CacheSplit(read, prompt - read, 0)
    unit = profile.granularity_tokens
    read = 0 if prefix < max(least, unit) else least + (prefix - least) // unit * unit
    return CacheSplit(read, 0, prompt - read)


def split_cost(profile: PriceProfile, split: CacheSplit, output_tokens: int = 0) -> float:
    """What a call with this prompt split and ``output_tokens`` of answer costs, in the
    profile's currency."""
    total = (
        split.read * profile.cache_read
        + split.write * profile.cache_write
        + split.uncached * profile.input
        + max(output_tokens, 0) * profile.output
    )
    return total / PER


def call_cost(profile: PriceProfile, input_tokens: int, output_tokens: int) -> float:
    """A call with nothing cached (a summariser's): its input uncached, its output."""
    return split_cost(profile, CacheSplit(0, 0, max(input_tokens, 0)), output_tokens)


def within_ttl(profile: PriceProfile, gap_seconds: float | None) -> bool:
    """True when a prompt sent ``gap_seconds`` earlier is still readable (None: unknown gap,
    taken as readable: an undated transcript's turns follow each other at once)."""
    ttl = profile.ttl_seconds
    return gap_seconds is None or ttl is None or gap_seconds <= ttl


def cached_prefix(profile: PriceProfile, prefix_tokens: int, gap_seconds: float | None) -> int:
    """The prefix still cached after ``gap_seconds``: all of it within the TTL, none after
    (the costs job and the tuning lab price every turn's prefix through this one rule)."""
    return prefix_tokens if within_ttl(profile, gap_seconds) else 0


class Calibration(NamedTuple):
    """Provider tokens of a prompt of ``n`` bytes: ``slope * (n // 4) + overhead``."""

    slope: float = 1.0
    overhead: float = 0.0

    def tokens(self, n_bytes: int) -> int:
        return int(self.slope * (max(n_bytes, 0) // 4) + self.overhead)

    def tokens_of_text(self, n_bytes: int) -> int:
        """Tokens of bytes that are not a whole prompt (no overhead): an answer, a suffix."""
        return int(self.slope * (max(n_bytes, 0) // 4))


def fit_calibration(raw_tokens: Sequence[int], reported_tokens: Sequence[int]) -> Calibration:
    """Least squares of reported on raw (bytes // 4) tokens over every report of a session,
    with ``OverheadCalibratedEstimator``'s rules: slope 1 while the reports are too alike to
    separate slope from overhead, the slope clamped to [0.5, 2], the overhead at least 0.
    Pairs with a non-positive value are left out; none left gives the plain byte estimate."""
    pairs = [(float(x), float(y)) for x, y in zip(raw_tokens, reported_tokens, strict=True)]
    pairs = [(x, y) for x, y in pairs if x > 0 and y > 0]
    if not pairs:
        return Calibration()
    n = len(pairs)
    mx = sum(x for x, _ in pairs) / n
    my = sum(y for _, y in pairs) / n
    var = sum(x * x for x, _ in pairs) / n - mx * mx
    slope = 1.0
    if var > (0.05 * mx) ** 2:
        cov = sum(x * y for x, y in pairs) / n - mx * my
        slope = min(MAX_SLOPE, max(MIN_SLOPE, cov / var))
    return Calibration(slope, max(0.0, my - slope * mx))
