"""``ingest --watch --interval`` takes only a usable number of seconds (issue 28, item 6.12).

``inf`` and ``1e300`` passed the old range check and made the watch's first wait raise
OverflowError (a traceback, exit 1); ``nan`` could pass such a check too (every comparison
with it is false). Each is now a usage error, as a negative or zero interval was: exit 2, one
message naming the option, no traceback, and no watch started. The real command line, as a
process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from analytics.cli.ingesting import interval_seconds

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 120


@pytest.mark.parametrize("interval", ["inf", "-inf", "nan", "1e300", "-1", "0"])
def test_an_interval_that_is_no_usable_number_of_seconds_is_a_usage_error(
    interval: str, tmp_path: Path
) -> None:
    (tmp_path / "spool").mkdir()
    command = ["ingest", "--watch", "--interval", interval, "--home", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-m", "analytics.cli", *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr.replace("─ Error ", "")
    assert "Invalid value for '--interval'" in done.stderr, done.stderr
    assert "watching" not in done.stderr


@pytest.mark.parametrize("seconds", [0.01, 0.5, 60.0, 86_400.0])
def test_a_usable_interval_is_taken_as_it_is(seconds: float) -> None:
    assert interval_seconds(seconds) == seconds


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), 0.0, -1.0, 86_400.5])
def test_the_interval_check_refuses_what_the_watch_cannot_wait(seconds: float) -> None:
    with pytest.raises(typer.BadParameter, match=r"between 0\.01 and 86400 seconds"):
        interval_seconds(seconds)
