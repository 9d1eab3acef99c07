"""The prompt-cache model against the providers' own figures, per family, on the dev transcripts.

Replays the dev transcripts (the folders beside ``native/`` under ../shared/data/transcripts)
with a window nothing reaches, so every view is the prompt really sent, runs the costs job, and
prints per family (Claude Code on Anthropic, mini-swe-agent on DeepSeek): turns compared,
predicted and reported cache reads, their ratio, and the share of sessions within 25%; then
the predicted cost against the cost of the same prompts with no cache at all.
Run: ``.venv/bin/python bench/cache_model.py``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.importers import ImportedSession, import_path
from analytics.queries import frames
from analytics.queries.materialize import refresh
from analytics.store import open_store
from analytics.tuning.cachecheck import (
    CACHING_FAMILIES,
    compare_reads,
    family_ratios,
    reported_cache_reads,
)

TRANSCRIPTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "transcripts"
WINDOW = 100_000_000


def main() -> int:
    dev = sorted(p for p in TRANSCRIPTS.iterdir() if p.is_dir() and p.name != "native")
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as home:
        started = time.perf_counter()
        done = CliRunner().invoke(
            app, ["replay", *map(str, dev), "--window", str(WINDOW), "--home", home]
        )
        if done.exit_code != 0:
            print(done.output)
            return 1
        imported: list[ImportedSession] = []
        for folder in dev:
            found, _issues = import_path(folder)
            imported += [s for s in found if s.agent in CACHING_FAMILIES]
        with open_store(Path(home)) as store:
            refresh(store)
            costs = frames.turn_costs_frame(store)
            sessions = frames.sessions_frame(store)
        elapsed = time.perf_counter() - started
    compared = compare_reads(costs, sessions, reported_cache_reads(imported))
    print(f"replayed and priced {costs.height:,} turns in {elapsed:.1f}s at window {WINDOW:,}")
    print(
        f"{'family':16} {'turns':>6} {'predicted':>12} {'reported':>12} {'ratio':>7} {'<=25%':>6}"
    )
    for row in family_ratios(compared).iter_rows(named=True):
        print(
            f"{row['agent']:16} {row['turns']:>6,} {row['predicted']:>12,} "
            f"{row['reported']:>12,} {row['ratio']:>7.3f} {row['sessions_within_25pct']:>6.0%}"
        )
    priced = costs.join(sessions.select("session_id", "agent"), on="session_id")
    by_agent = priced.group_by("agent", "profile").agg(
        pl.col("cost").sum(), pl.col("uncached_tokens").sum(), pl.col("prompt_tokens").sum()
    )
    print(f"\n{'agent':16} {'profile':10} {'cost':>10} {'prompt tokens':>14} {'uncached':>12}")
    for agent, profile, cost, uncached, prompt in by_agent.sort("agent", "profile").iter_rows():
        print(f"{agent:16} {profile:10} {cost:>10.3f} {prompt:>14,} {uncached:>12,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
