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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

from bench.pytest_runs import run_tests


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--factor", type=int, default=20, help="times the CI's examples")
    parser.add_argument("-n", "--workers", default="auto", help="pytest-xdist workers (0: none)")
    parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    args = parser.parse_args()
    return run_tests(
        [
            *("tests", "-m", "hypothesis"),
            *("--hypothesis-profile=fuzz", "--hypothesis-show-statistics"),
            *("-n", str(args.workers)),
            *(("-k", args.keyword) if args.keyword else ()),
        ],
        {"COMPACTLENS_FUZZ_FACTOR": str(args.factor)},
        name="fuzz",
        column=f"property test (examples x{args.factor})",
        scope=f"at {args.factor}x the CI's examples",
    )


if __name__ == "__main__":
    raise SystemExit(main())
