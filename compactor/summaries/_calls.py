"""Summariser calls with a timeout: a blocking call in a daemon thread, or an awaited one.

A call that fails or times out returns its exception instead of raising, so that the pipeline
can put the cause on the record and fall back. Cancellation of an awaited call propagates.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from compactor.messages import Message
from compactor.summaries.summarize import PreviousCompaction, Summarizer, SummaryResult


@dataclass
class SummaryRequest:
    transcript: list[Message]
    previous: PreviousCompaction | None


SummaryResponse = SummaryResult | BaseException


def _timeout(timeout_s: float) -> TimeoutError:
    return TimeoutError(f"summarizer timed out after {timeout_s}s")


def summarize_with_timeout(
    summarizer: Summarizer, req: SummaryRequest, timeout_s: float
) -> SummaryResponse:
    """Run ``summarize`` in a daemon thread (a hung call never blocks the agent's exit)."""
    box: list[SummaryResponse] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append(summarizer.summarize(req.transcript, req.previous))
        except BaseException as exc:
            box.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="compactlens-summarizer", daemon=True).start()
    if not done.wait(timeout_s):
        return _timeout(timeout_s)
    return box[0]


async def asummarize_with_timeout(
    summarizer: Summarizer, req: SummaryRequest, timeout_s: float
) -> SummaryResponse:
    """Await ``asummarize`` when the summariser has one, else ``summarize`` in a thread."""
    asummarize = getattr(summarizer, "asummarize", None)
    try:
        if asummarize is not None:
            coro = asummarize(req.transcript, req.previous)
        else:
            coro = asyncio.to_thread(summarizer.summarize, req.transcript, req.previous)
        result: SummaryResult = await asyncio.wait_for(coro, timeout_s)
        return result
    except TimeoutError:
        return _timeout(timeout_s)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return exc
