"""Token estimation: the harness9-compatible byte estimator, pluggable estimators, calibration.

``estimate_tokens`` is ``sum of UTF-8 bytes of content, tool-call ids, names, arguments and
tool_call_id, // 4``. ``CalibratedEstimator`` scales it by what the provider reported. Nothing
here calls a tokenizer or the network.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from compactor.messages import Message


def message_bytes(msg: Message) -> int:
    """UTF-8 bytes of one message as the estimator counts them."""
    total = len(msg.content.encode("utf-8", "surrogatepass"))
    for tc in msg.tool_calls:
        total += len(tc.id.encode("utf-8", "surrogatepass")) + len(
            tc.name.encode("utf-8", "surrogatepass")
        )
        total += len(tc.arguments.encode("utf-8", "surrogatepass"))
    if msg.tool_call_id:
        total += len(msg.tool_call_id.encode("utf-8", "surrogatepass"))
    return total


def estimate_tokens(msgs: Iterable[Message]) -> int:
    """harness9's estimate: total UTF-8 bytes // 4."""
    return sum(message_bytes(m) for m in msgs) // 4


def estimate_tool_schema_tokens(tools: Sequence[dict[str, Any]]) -> int:
    """Tokens the tool schemas sent with each request take: their compact JSON bytes // 4."""
    return (
        len(json.dumps(list(tools), separators=(",", ":"), ensure_ascii=False).encode("utf-8")) // 4
    )


@runtime_checkable
class TokenEstimator(Protocol):
    """Turns byte counts into token estimates. ``name`` goes on every record."""

    @property
    def name(self) -> str: ...

    def tokens_for_bytes(self, n_bytes: int) -> int: ...


class ByteEstimator:
    """The default: bytes // 4, as harness9."""

    name = "bytes/4"

    def tokens_for_bytes(self, n_bytes: int) -> int:
        return n_bytes // 4


class CalibratedEstimator:
    """bytes // 4 scaled by an exponentially weighted ratio of reported to estimated tokens.

    ``observe(estimated, reported)`` is fed from provider usage after each call. The factor is
    clamped to [0.25, 4] so that one odd report (a cached prompt, a wrong model) cannot make the
    tier decision absurd.
    """

    def __init__(self, *, alpha: float = 0.3, initial_factor: float = 1.0) -> None:
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha={alpha!r} must be in (0, 1]")
        self._alpha = alpha
        self._factor = initial_factor
        self._observations = 0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"bytes/4*calibrated({self._factor:.3f})"

    @property
    def factor(self) -> float:
        return self._factor

    @property
    def observations(self) -> int:
        return self._observations

    def observe(self, estimated_tokens: int, reported_tokens: int) -> None:
        """Record one (estimate, provider-reported) pair; ignores non-positive values."""
        if estimated_tokens <= 0 or reported_tokens <= 0:
            return
        ratio = min(4.0, max(0.25, reported_tokens / estimated_tokens))
        with self._lock:
            if self._observations == 0:
                self._factor = ratio
            else:
                self._factor = (1 - self._alpha) * self._factor + self._alpha * ratio
            self._observations += 1

    def tokens_for_bytes(self, n_bytes: int) -> int:
        return int((n_bytes // 4) * self._factor)
