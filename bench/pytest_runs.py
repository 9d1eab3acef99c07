"""What the benches that run tests share: pytest run with a JUnit report, then each test's
outcome and seconds (slowest first) and a total line. The caller exits with pytest's code, so
a script can tell a failure from a clean run."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
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


def run_tests(
    args: Sequence[str], env: Mapping[str, str], *, name: str, column: str, scope: str
) -> int:
    """``pytest ARGS`` under ``env`` (added to this process's), then the table: ``column``
    heads its test column, and the total line reads "NAME: N tests SCOPE, ...". Pytest's
    exit code."""
    with tempfile.TemporaryDirectory(prefix=f"compactlens-{name}-") as tmp:
        junit = Path(tmp) / "results.xml"
        command = [sys.executable, "-m", "pytest", *args, f"--junitxml={junit}"]
        print(f"{name}: {' '.join(f'{k}={v}' for k, v in env.items())} {' '.join(command[1:])}")
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env={**os.environ, **env}, check=False)
        took = time.perf_counter() - started
        results = _results(junit) if junit.exists() else []
    print(f"\n{'outcome':<8} {'seconds':>8}  {column}")
    for test, outcome, seconds in sorted(results, key=lambda r: -r[2]):
        print(f"{outcome:<8} {seconds:>8.1f}  {test}")
    failed = sum(r[1] in ("FAILED", "ERROR") for r in results)
    print(
        f"{name}: {len(results)} tests {scope}, {len(results) - failed} passed, {failed} "
        f"failed, {took:.0f} s (pytest exit {done.returncode})"
    )
    return done.returncode
