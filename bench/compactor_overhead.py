"""Per-turn ``CompactionSession.prepare()`` cost against the naive per-turn recompaction.

Two sessions: the largest transcript in ``../shared/data/transcripts`` (by message count) and a
synthetic 5,000-message session. Each is replayed turn by turn (a turn = each assistant message)
with an instant stub summariser. The baseline, in the same run, is what the original does: every
turn it re-estimates, re-splits and recompacts the whole history with a stateless compactor.

Target (issue 2): at 5,000 messages the median per-turn cost is at most 1 ms and at least 10x
faster than the baseline. Run: ``.venv/bin/python bench/compactor_overhead.py``.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from analytics.replay.synthetic import SYSTEM_PROMPT, generate_session
from compactor import (
    CompactionOffloader,
    CompactionSession,
    Message,
    PreviousCompaction,
    ProgressiveCompactor,
    SummaryResult,
    from_openai,
)

ROOT = Path(__file__).resolve().parents[1]
TRANSCRIPTS = ROOT.parent / "shared" / "data" / "transcripts"
STUB_TEXT = (
    "## Anchors\n### User Intent\nfinish the task\n### Execution Progress\n- progressing\n"
    "### Key Decisions\n- N/A\n### Tried Solutions\n- N/A\n### Next Steps\n- continue\n"
    "## Summary\nstub summary"
)


class InstantSummarizer:
    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        return SummaryResult(text=STUB_TEXT, model="stub")


def largest_transcript() -> tuple[str, list[Message]]:
    """The mini-swe-agent trajectory with the most messages (the largest single session)."""
    best: tuple[str, list[Message]] = ("", [])
    for path in sorted((TRANSCRIPTS / "mini-swe-agent").rglob("*.traj.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        msgs = [from_openai(m) for m in raw["messages"] if m.get("role") != "exit"]
        if len(msgs) > len(best[1]):
            best = (str(path.relative_to(TRANSCRIPTS)), msgs)
    return best


def synthetic(n_messages: int) -> list[Message]:
    msgs: list[Message] = [Message(role="system", content=SYSTEM_PROMPT)]
    seed = 0
    while len(msgs) < n_messages:
        session = generate_session(seed, steps=200)
        msgs.extend(session[2:] if seed else session[1:])
        seed += 1
    return msgs[:n_messages]


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e6


def run(
    msgs: list[Message], window: int
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(history length, ms) per turn for the session and for the naive baseline."""
    system, rest = (msgs[0], msgs[1:]) if msgs[0].role == "system" else (None, msgs)
    with tempfile.TemporaryDirectory() as tmp:
        base = ProgressiveCompactor(
            InstantSummarizer(), window, offloader=CompactionOffloader(tmp, "bench")
        )
        session = CompactionSession(base, system, session_id="bench")
        naive = ProgressiveCompactor(
            InstantSummarizer(),
            window,
            offloader=CompactionOffloader(tmp, "naive"),
            session_id="naive",
        )
        ours: list[tuple[int, float]] = []
        theirs: list[tuple[int, float]] = []
        head = [system] if system else []
        for m in rest:
            if m.role == "assistant":
                n = len(session.history)
                ours.append((n, _timed(session.prepare)))
                theirs.append(
                    (n, _timed(lambda: naive.compact_with_record([*head, *session.history])))
                )
            session.append(m)
    return ours, theirs


def report(name: str, msgs: list[Message], window: int) -> tuple[float, float]:
    ours, theirs = run(msgs, window)
    last = max(n for n, _ in ours)
    late = [ms for n, ms in ours if n >= 0.9 * last]
    late_naive = [ms for n, ms in theirs if n >= 0.9 * last]
    med, med_naive = statistics.median(late), statistics.median(late_naive)
    print(f"\n{name}: {len(msgs):,} messages, {len(ours):,} turns, window {window:,} tokens")
    print(
        f"  all turns      prepare() median {statistics.median(x for _, x in ours):8.3f} ms   "
        f"naive median {statistics.median(x for _, x in theirs):8.3f} ms"
    )
    print(
        f"  last 10% turns prepare() median {med:8.3f} ms   p90 "
        f"{statistics.quantiles(late, n=10)[-1]:8.3f} ms   max {max(late):8.3f} ms"
    )
    print(
        f"  last 10% turns naive     median {med_naive:8.3f} ms   p90 "
        f"{statistics.quantiles(late_naive, n=10)[-1]:8.3f} ms"
    )
    print(f"  speed-up at the end of the session: {med_naive / med:,.1f}x")
    return med, med_naive


def main() -> int:
    name, msgs = largest_transcript()
    if msgs:
        report(f"largest transcript ({name})", msgs, 32_000)
    else:
        print(f"no transcripts under {TRANSCRIPTS}; skipping that half")
    med, med_naive = report("synthetic 5,000-message session", synthetic(5000), 32_000)
    ok = med <= 1.0 and med_naive / med >= 10
    print(
        f"\ntarget at 5,000 messages: median <= 1 ms and >= 10x the baseline -> "
        f"{'MET' if ok else 'NOT MET'} ({med:.3f} ms, {med_naive / med:.1f}x)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
