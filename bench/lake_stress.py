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
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = (
    "tests/analytics/store/test_lake_writers.py",
    "tests/analytics/store/test_lake_fleet_start.py",
    "tests/analytics/store/test_lake_maintenance.py",
)


def _results(junit: Path) -> list[tuple[str, str, float]]:
    """(test id, outcome, seconds) of every test case in a JUnit XML file."""
    found: list[tuple[str, str, float]] = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for kind in ("failure", "error", "skipped"):
            if case.find(kind) is not None:
                outcome = {"failure": "FAILED", "error": "ERROR"}.get(kind, kind)
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        found.append((name, outcome, float(case.get("time", "0"))))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="race repetitions (CI: 1)")
    parser.add_argument("--scale", type=int, default=4, help="spool size factor (CI: 1)")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    args = parser.parse_args()
    if args.rounds < 1 or args.scale < 1:
        parser.error("--rounds and --scale must be at least 1")

    with tempfile.TemporaryDirectory(prefix="compactlens-lake-stress-") as tmp:
        junit = Path(tmp) / "lake_stress.xml"
        command = [
            *(sys.executable, "-m", "pytest", "-q", "-n", "0", *TESTS),
            f"--junitxml={junit}",
            *(("-k", args.keyword) if args.keyword else ()),
        ]
        env = {
            **os.environ,
            "COMPACTLENS_STRESS_ROUNDS": str(args.rounds),
            "COMPACTLENS_STRESS_SCALE": str(args.scale),
        }
        print(
            f"lake stress: COMPACTLENS_STRESS_ROUNDS={args.rounds} "
            f"COMPACTLENS_STRESS_SCALE={args.scale} {' '.join(command[1:])}",
            flush=True,
        )
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, check=False)
        took = time.perf_counter() - started
        results = _results(junit) if junit.exists() else []

    print(f"\n{'outcome':<8} {'seconds':>8}  lake test (rounds x{args.rounds}, size x{args.scale})")
    for name, outcome, seconds in sorted(results, key=lambda r: -r[2]):
        print(f"{outcome:<8} {seconds:>8.1f}  {name}")
    failed = sum(r[1] in ("FAILED", "ERROR") for r in results)
    print(
        f"lake stress: {len(results)} tests at {args.rounds} rounds and {args.scale}x the CI's "
        f"size, {len(results) - failed} passed, {failed} failed, {took:.0f} s "
        f"(pytest exit {done.returncode})"
    )
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
