"""The lake's race tests with more rounds and larger spools than CI runs.

CI runs the lake tests whose point is a race (writers committing over each other, a fleet
opening a fresh lake at once, maintenance while a projector keeps committing) at the smallest
size that still exercises the race: one fleet start per test, 200 bulk usage lines per
writer home, twelve watch passes. Races are caught by repetition, so this bench runs the same tests
with ``COMPACTLENS_STRESS_ROUNDS`` (fleets started on fresh lakes one after another; watch
passes multiplied) and ``COMPACTLENS_STRESS_SCALE`` (bulk files and per-host events
multiplied). The defaults, ``--rounds 4 --scale 4``, run more than the suite ever did before it
was cut (two fleet rounds, 800 bulk lines, 24 passes). It needs PostgreSQL, as the tests do.

It prints each test's outcome and seconds and a total line; it exits with pytest's code, so a
script can tell a found race from a clean run.

Run: ``.venv/bin/python bench/lake_stress.py [--rounds 4] [--scale 4] [-k EXPR]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

from bench.pytest_runs import run_tests

TESTS = (
    "tests/analytics/store/test_lake_writers.py",
    "tests/analytics/store/test_lake_fleet_start.py",
    "tests/analytics/store/test_lake_maintenance.py",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="race repetitions (CI: 1)")
    parser.add_argument("--scale", type=int, default=4, help="spool size factor (CI: 1)")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    args = parser.parse_args()
    if args.rounds < 1 or args.scale < 1:
        parser.error("--rounds and --scale must be at least 1")
    return run_tests(
        ["-q", "-n", "0", *TESTS, *(("-k", args.keyword) if args.keyword else ())],
        {
            "COMPACTLENS_STRESS_ROUNDS": str(args.rounds),
            "COMPACTLENS_STRESS_SCALE": str(args.scale),
        },
        name="lake stress",
        column=f"lake test (rounds x{args.rounds}, size x{args.scale})",
        scope=f"at {args.rounds} rounds and {args.scale}x the CI's size",
    )


if __name__ == "__main__":
    raise SystemExit(main())
