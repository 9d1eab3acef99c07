"""The property tests and state machines with many more examples than CI runs, drawn at random.

CI runs every Hypothesis test derandomised (the ``ci`` profile of ``tests/fuzzing.py``) so that a
red run comes from the submitted change, not from the luck of the draw. This bench runs the same
tests (those marked ``hypothesis``: Hypothesis marks every ``@given`` test, the state machines
carry the mark by hand) under the ``fuzz`` profile: random seeds, failing examples kept in
``.hypothesis/`` (the next run tries them first), and ``--factor`` times the examples. It prints
each test's outcome and seconds and a total line; it exits with pytest's code, so a script can
tell a found bug from a clean run.

Run: ``.venv/bin/python bench/fuzz.py [--factor 20] [-n 2] [-k EXPR]``.
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
    parser.add_argument("--factor", type=int, default=20, help="times the CI's examples")
    parser.add_argument("-n", "--workers", default="auto", help="pytest-xdist workers (0: none)")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="compactlens-fuzz-") as tmp:
        junit = Path(tmp) / "fuzz.xml"
        command = [
            *(sys.executable, "-m", "pytest", "tests", "-m", "hypothesis"),
            *("--hypothesis-profile=fuzz", "--hypothesis-show-statistics"),
            *("-n", str(args.workers), f"--junitxml={junit}"),
            *(("-k", args.keyword) if args.keyword else ()),
        ]
        env = {**os.environ, "COMPACTLENS_FUZZ_FACTOR": str(args.factor)}
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, check=False)
        took = time.perf_counter() - started
        results = _results(junit) if junit.exists() else []

    print(f"\n{'outcome':<8} {'seconds':>8}  property test (examples x{args.factor})")
    for name, outcome, seconds in sorted(results, key=lambda r: -r[2]):
        print(f"{outcome:<8} {seconds:>8.1f}  {name}")
    failed = sum(r[1] in ("FAILED", "ERROR") for r in results)
    print(
        f"fuzz: {len(results)} property tests at {args.factor}x the CI's examples, "
        f"{len(results) - failed} passed, {failed} failed, {took:.0f} s "
        f"(pytest exit {done.returncode})"
    )
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
