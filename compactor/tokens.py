"""Token estimation: the harness9-compatible byte estimator, pluggable estimators, calibration.

``estimate_tokens`` is ``sum of UTF-8 bytes of content, tool-call ids, names, arguments and
tool_call_id, // 4``. ``CalibratedEstimator`` scales it by what the provider reported;
``OverheadCalibratedEstimator`` also learns the prompt the harness adds unseen. A report that is
no token count (None, NaN, infinite, negative, above ``MAX_REPORTED_TOKENS``) is ignored, and
one far off the fit is held until the next report says whether the fit or the report was wrong.
Nothing here calls a tokenizer or the network.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from compactor.messages import Message


def utf8_len(text: str) -> int:
    """UTF-8 bytes of ``text`` (lone surrogates counted as 3, as ``surrogatepass`` writes them);
    ASCII text is measured without being copied."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def message_bytes(msg: Message) -> int:
    """UTF-8 bytes of one message as the estimator counts them."""
    total = utf8_len(msg.content)
    for tc in msg.tool_calls:
        total += utf8_len(tc.id) + utf8_len(tc.name) + utf8_len(tc.arguments)
    if msg.tool_call_id:
        total += utf8_len(msg.tool_call_id)
    return total


def estimate_tokens(msgs: Iterable[Message]) -> int:
    """harness9's estimate: total UTF-8 bytes // 4."""
    return ByteEstimator().tokens_for_bytes(sum(message_bytes(m) for m in msgs))


def estimate_tool_schema_tokens(tools: Sequence[dict[str, Any]]) -> int:
    """Tokens the tool schemas sent with each request take: their compact JSON bytes // 4."""
    text = json.dumps(list(tools), separators=(",", ":"), ensure_ascii=False)
    return ByteEstimator().tokens_for_bytes(utf8_len(text))


@runtime_checkable
class TokenEstimator(Protocol):
    """Turns byte counts into token estimates. ``name`` goes on every record."""

    @property
    def name(self) -> str: ...

    def tokens_for_bytes(self, n_bytes: int) -> int: ...


def linear_params(estimator: TokenEstimator) -> tuple[float, float] | None:
    """``(slope, overhead)`` when ``estimator`` counts ``bytes / 4 * slope + overhead`` tokens
    (the library's estimators do; they go on every record as numbers), else None (an estimator
    of the caller's own, known by its ``name`` alone)."""
    params = getattr(estimator, "linear", None)
    if isinstance(params, tuple) and len(params) == 2:
        return float(params[0]), float(params[1])
    return None


class ByteEstimator:
    """The default: bytes // 4, as harness9."""

    name = "bytes/4"
    bytes_per_token = 4

    @property
    def linear(self) -> tuple[float, float]:
        """``(slope, overhead)`` of ``bytes / 4 * slope + overhead``."""
        return 4 / self.bytes_per_token, 0.0

    def tokens_for_bytes(self, n_bytes: int) -> int:
        return n_bytes // self.bytes_per_token


MAX_REPORTED_TOKENS = 1_000_000_000
"""No model reads a prompt this long: a larger count is a bug upstream, never a measurement."""

OUTLIER_FACTOR = 4.0
"""A report more than this many times above (or below) what the fit expects is held, not
learnt from, until the next report: one odd report cannot hold the estimate off for many
turns, and two in a row (the harness really changed) start the fit again from them."""


def token_count(value: object) -> int | None:
    """``value`` as a token count a provider could report (a whole number from 0 to
    ``MAX_REPORTED_TOKENS``; a float only if whole), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_REPORTED_TOKENS:
        return value
    return None


class _Calibrating:
    """What both calibrating estimators share: the forgetting rate, a lock, a report count,
    and the screening of reports (``observe``); each subclass fits in ``_fold``."""

    def __init__(self, alpha: float) -> None:
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha={alpha!r} must be in (0, 1]")
        self._alpha = alpha
        self._observations = 0
        self._lock = threading.Lock()
        self._base = ByteEstimator()
        self._held: tuple[float, float, bool] | None = None
        """A report far off the fit (estimate, report, above?), awaiting the next one."""

    def raw_tokens(self, n_bytes: int) -> int:
        """The uncalibrated estimate, which ``observe`` compares with provider reports."""
        return self._base.tokens_for_bytes(n_bytes)

    @property
    def observations(self) -> int:
        return self._observations

    def observe(self, estimated_tokens: int, reported_tokens: int) -> None:
        """Record one (raw estimate, provider-reported) pair. Pairs that are not positive token
        counts are ignored; one far off the fit waits for the next (``OUTLIER_FACTOR``)."""
        x, y = token_count(estimated_tokens), token_count(reported_tokens)
        if not x or not y:
            return
        with self._lock:
            for pair in self._screened(float(x), float(y)):
                self._fold(*pair)
                self._observations += 1

    def _screened(self, x: float, y: float) -> list[tuple[float, float]]:
        """The pairs to learn from now: this one, none (held), or the held one and this one
        after a fresh start (two in a row off the same way: the fit, not they, was wrong)."""
        off = self._off(x, y) if self._observations else 1.0
        if 1 / OUTLIER_FACTOR <= off <= OUTLIER_FACTOR:
            self._held = None
            return [(x, y)]
        held, self._held = self._held, (x, y, off > 1)
        if held is None or held[2] != (off > 1):
            return []
        self._held = None
        self._restart()
        return [held[:2], (x, y)]

    def _off(self, x: float, y: float) -> float:
        """How many times what the fit expects the report ``y`` is."""
        raise NotImplementedError

    def _fold(self, x: float, y: float) -> None:
        raise NotImplementedError

    def _restart(self) -> None:
        """Forget every report so far."""
        raise NotImplementedError


class CalibratedEstimator(_Calibrating):
    """bytes // 4 scaled by an exponentially weighted ratio of reported to estimated tokens.

    ``observe(estimated, reported)`` is fed from provider usage after each call. The factor is
    clamped to [0.25, 4] so that one odd report (a cached prompt, a wrong model) cannot make the
    tier decision absurd.
    """

    def __init__(self, *, alpha: float = 0.3, initial_factor: float = 1.0) -> None:
        super().__init__(alpha)
        self._factor = initial_factor

    @property
    def name(self) -> str:
        return f"bytes/4*calibrated({self._factor:.3f})"

    @property
    def factor(self) -> float:
        return self._factor

    @property
    def linear(self) -> tuple[float, float]:
        """``(slope, overhead)`` of ``bytes / 4 * slope + overhead``: the factor, no overhead."""
        return self._factor, 0.0

    @staticmethod
    def _ratio(x: float, y: float) -> float:
        return min(4.0, max(0.25, y / x))

    def _off(self, x: float, y: float) -> float:
        return (y / x) / self._factor  # unclamped: the clamp would hide how far off it is

    def _fold(self, x: float, y: float) -> None:
        ratio = self._ratio(x, y)
        if self._observations == 0:
            self._factor = ratio
        else:
            self._factor = (1 - self._alpha) * self._factor + self._alpha * ratio

    def _restart(self) -> None:
        self._observations = 0

    def tokens_for_bytes(self, n_bytes: int) -> int:
        return int(self.raw_tokens(n_bytes) * self._factor)


class OverheadCalibratedEstimator(_Calibrating):
    """``slope * bytes // 4 + overhead``, fitted to provider reports by weighted least squares.

    Providers count prompt tokens the messages do not show: the system prompt and tool schemas
    a harness adds, which are a fixed overhead rather than a ratio. With one report the slope is
    taken as 1 and the difference as overhead; with more, both are fitted (older reports weigh
    less, by ``1 - alpha`` per report); while the reports are too alike to separate the two,
    the slope found so far is kept. The slope is clamped to [0.5, 2] and the overhead to at
    least 0, so that a few odd reports cannot make the tier decision absurd.
    """

    def __init__(self, *, alpha: float = 0.05) -> None:
        super().__init__(alpha)
        self._sums = [0.0, 0.0, 0.0, 0.0, 0.0]  # weight, x, y, xx, xy
        self._ceiling = float("inf")
        self.slope = 1.0
        self.overhead = 0.0

    @property
    def name(self) -> str:
        return f"bytes/4*{self.slope:.3f}+{self.overhead:.0f}"

    @property
    def linear(self) -> tuple[float, float]:
        """``(slope, overhead)`` as fitted so far."""
        return self.slope, self.overhead

    def _off(self, x: float, y: float) -> float:
        expected = x * self.slope + self.overhead
        return y / expected if expected > 0 else 1.0

    def _fold(self, x: float, y: float) -> None:
        keep = 1 - self._alpha
        w, sx, sy, sxx, sxy = (v * keep for v in self._sums)
        self._sums = [w + 1, sx + x, sy + y, sxx + x * x, sxy + x * y]
        self._fit()

    def _restart(self) -> None:
        self._sums = [0.0, 0.0, 0.0, 0.0, 0.0]
        self.slope, self.overhead = 1.0, 0.0
        self._observations = 0

    def _fit(self) -> None:
        w, sx, sy, sxx, sxy = self._sums
        mx, my = sx / w, sy / w
        var = sxx / w - mx * mx
        if var > (0.05 * mx) ** 2:  # reports spread enough to tell slope from overhead
            self.slope = min(2.0, max(0.5, (sxy / w - mx * my) / var))
        self.overhead = min(self._ceiling, max(0.0, my - self.slope * mx))

    def bound_overhead(self, tokens: float) -> None:
        """The overhead is at most ``tokens`` from now on: a prompt the provider counted that
        held less beside its visible part (a report of a transcript that starts mid-session,
        after its harness compacted away the history the file never showed)."""
        with self._lock:
            self._ceiling = min(self._ceiling, max(0.0, tokens))
            self.overhead = min(self.overhead, self._ceiling)

    def tokens_for_bytes(self, n_bytes: int) -> int:
        return int(self.raw_tokens(n_bytes) * self.slope + self.overhead)


def max_bytes_for(estimator: TokenEstimator, tokens: int) -> int:
    """The most bytes ``estimator`` counts as at most ``tokens`` (0 when none fit).

    Estimators are monotonic in bytes, so a binary search inverts any of them; no caller needs
    to know a bytes-per-token figure.
    """
    if tokens <= 0 or estimator.tokens_for_bytes(0) > tokens:
        return 0
    lo, hi = 0, max(64, tokens)
    while estimator.tokens_for_bytes(hi) <= tokens:
        lo, hi = hi, hi * 2
        if hi > 1 << 62:
            return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if estimator.tokens_for_bytes(mid) <= tokens:
            lo = mid
        else:
            hi = mid
    return lo


def task_cap_bytes(estimator: TokenEstimator, context_window: int, fraction: float) -> int:
    """Bytes a task may take in a view: ``fraction`` of the window, in this estimator's tokens,
    on top of its fixed overhead."""
    return message_budget_bytes(estimator, int(context_window * fraction))


def message_budget_bytes(estimator: TokenEstimator, tokens: int) -> int:
    """Bytes one message may take to cost at most ``tokens`` on top of the fixed overhead."""
    return max_bytes_for(estimator, tokens + estimator.tokens_for_bytes(0))


def message_budget_tokens(estimator: TokenEstimator, n_bytes: int) -> int:
    """Tokens ``n_bytes`` of one message add on top of the fixed overhead."""
    return estimator.tokens_for_bytes(n_bytes) - estimator.tokens_for_bytes(0)


def raw_tokens(estimator: TokenEstimator, n_bytes: int) -> int:
    """The uncalibrated estimate that calibrating estimators fit (their own base estimator)."""
    raw = getattr(estimator, "raw_tokens", None)
    return int(raw(n_bytes)) if callable(raw) else estimator.tokens_for_bytes(n_bytes)
