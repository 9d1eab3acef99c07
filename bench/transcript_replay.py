"""Tier counts and tokens saved per transcript format, replaying ../shared/data/transcripts.

Every imported session goes through ``CompactionSession`` with the offline
``ExtractiveSummarizer`` at 16k and 32k-token windows. Prints, per format and window: sessions,
turns, effective compactions per tier, tokens saved, tokens billed (the view sent, summed over
turns, bytes/4) against the baseline of no compaction (the whole history each turn), the largest
view seen, wall time and turns per second. Run: ``.venv/bin/python bench/transcript_replay.py``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from analytics.importers import import_path
from analytics.replay.driver import replay_session
from compactor import (
    CompactionOffloader,
    CompactionRecord,
    CompactionTier,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    estimate_tokens,
)

TRANSCRIPTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "transcripts"
TIERS = [CompactionTier.WARN, CompactionTier.SOFT, CompactionTier.FULL, CompactionTier.EMERGENCY]


def main() -> int:
    t0 = time.perf_counter()
    sessions, issues = import_path(TRANSCRIPTS)
    n_msgs = sum(len(s.messages) for s in sessions)
    print(
        f"imported {len(sessions)} sessions, {n_msgs:,} messages in "
        f"{time.perf_counter() - t0:.2f}s ({len(issues)} issues)"
    )
    header = (
        f"{'format':<16}{'window':>7}{'sess':>6}{'turns':>7}"
        + "".join(f"{t.label:>10}" for t in TIERS)
        + f"{'saved tok':>12}{'billed':>12}{'no compact':>12}{'share':>7}"
        + f"{'max view':>10}{'turns/s':>9}"
    )
    for window in (16_000, 32_000):
        print("\n" + header)
        by_format: dict[str, Counter[str]] = defaultdict(Counter)
        total: Counter[str] = Counter()
        with tempfile.TemporaryDirectory() as tmp:
            base = ProgressiveCompactor(
                ExtractiveSummarizer(), window, offloader=CompactionOffloader(tmp, "bench")
            )
            for s in sessions:
                started = time.perf_counter()
                row = by_format[s.format]

                def billed(
                    i: int,
                    view: list[Message],
                    _record: CompactionRecord,
                    row: Counter[str] = row,
                    history: list[Message] = s.messages,
                ) -> None:
                    row["billed"] += estimate_tokens(view)
                    row["uncompacted"] += estimate_tokens(history[:i])

                result = replay_session(s, base, on_view=billed)
                row["seconds_us"] += int((time.perf_counter() - started) * 1e6)
                row["sessions"] += 1
                row["turns"] += result.turns
                row["saved"] += result.tokens_saved
                row["max_view"] = max(row["max_view"], result.max_view_tokens)
                for r in result.effective:
                    row[r.tier.label] += 1
        for fmt, row in sorted(by_format.items()):
            rate = row["turns"] / max(row["seconds_us"] / 1e6, 1e-9)
            share = row["billed"] / max(row["uncompacted"], 1)
            print(
                f"{fmt:<16}{window:>7}{row['sessions']:>6}{row['turns']:>7}"
                + "".join(f"{row[t.label]:>10}" for t in TIERS)
                + f"{row['saved']:>12,}{row['billed']:>12,}{row['uncompacted']:>12,}"
                + f"{share:>7.1%}{row['max_view']:>10,}{rate:>9,.0f}"
            )
            total["billed"] += row["billed"]
            total["uncompacted"] += row["uncompacted"]
        print(
            f"all formats at {window}: billed {total['billed']:,} tokens vs "
            f"{total['uncompacted']:,} without compaction "
            f"({total['billed'] / max(total['uncompacted'], 1):.1%})"
        )
    print(f"\ntotal wall time {time.perf_counter() - t0:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
