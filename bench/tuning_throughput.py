"""Tuning-lab throughput: (sessions x configs) replayed and measured per second, 1 vs 2 workers.

Replays the sessions of ../shared/data/transcripts (those with at least one model turn; all by
default, the first N by session id with ``--sessions N``) under
eight progressive configurations of the default grid at a 32k window, through the local process
pool (``analytics.tuning.open_backend``) with 1 and then 2 workers; the pool's start-up (the
sessions sent to each process, a warm-up task) is timed apart from the replays.
Prints the figures and the speed-up; exits 0 (a benchmark, not a test: there is no target).
Run: ``.venv/bin/python bench/tuning_throughput.py [--sessions N]``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from analytics.importers import ImportedSession, import_path
from analytics.tuning import DEFAULT_GRID, Setting, StrategySpec, grid_specs, open_backend

TRANSCRIPTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "transcripts"
WINDOW = 32_000
CONFIGS = 8


def _sessions(limit: int | None) -> list[ImportedSession]:
    found, _issues = import_path(TRANSCRIPTS)
    sessions = sorted((s for s in found if s.turns), key=lambda s: s.session_id)
    return sessions[:limit] if limit else sessions


def _rate(sessions: list[ImportedSession], workers: int) -> tuple[float, float, float]:
    """(start-up seconds, seconds, (sessions x configs) per second) for one pass of every
    config; start-up is the pool's processes receiving the sessions and running one cheap
    warm-up task each (masking on a few sessions), timed apart."""
    specs = grid_specs(DEFAULT_GRID)[:: len(grid_specs(DEFAULT_GRID)) // CONFIGS][:CONFIGS]
    tasks = [(spec.name, spec) for spec in specs]
    warm_up = [(f"warm-up {k}", StrategySpec(kind="masking")) for k in range(workers)]
    started = time.perf_counter()
    backend = open_backend(sessions, workers=workers)
    try:
        for _result in backend.run(warm_up, Setting(WINDOW)):
            pass
        ready = time.perf_counter()
        done = sum(len(metrics) for _key, metrics in backend.run(tasks, Setting(WINDOW)))
    finally:
        backend.close()
    seconds = time.perf_counter() - ready
    return ready - started, seconds, done / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=None, help="use the first N sessions")
    args = parser.parse_args()
    sessions = _sessions(args.sessions)
    turns = sum(len(s.turns) for s in sessions)
    scope = f"first {len(sessions)}" if args.sessions else f"all {len(sessions)}"
    print(f"{scope} sessions with a turn ({turns:,} turns) x {CONFIGS} configs, window {WINDOW:,}")
    rates: dict[int, float] = {}
    load = os.getloadavg()[0]
    print(f"CPUs: {os.cpu_count()}; load average before: {load:.2f} (other processes compete")
    print("with the workers on a shared host and cap the speed-up)")
    for workers in (1, 2):
        start_up, seconds, rate = _rate(sessions, workers)
        rates[workers] = rate
        print(
            f"{workers} worker(s): start-up and warm-up {start_up:5.1f}s, then "
            f"{len(sessions) * CONFIGS:,} replays in {seconds:6.1f}s "
            f"= {rate:7.1f} (sessions x configs)/s"
        )
    print(
        f"speed-up 2 vs 1 worker: {rates[2] / rates[1]:.2f}x (load after: {os.getloadavg()[0]:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
