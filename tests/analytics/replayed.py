"""Homes holding replays of every dev transcript at a window, made once per test run.

Several test modules ask questions of the same replays (``stats`` against plain SQL, the
post-mortems against the transcripts' own usage); ``replayed_home`` replays through the real
command line the first time a window is asked for and hands the same home to every later
caller in the run. Callers may run the analysis commands on it (they only materialise job
results), never add events to it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from tests.transcripts import DEV

_HOMES: dict[int, Path] = {}


def replayed_home(window: int, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with ``compactlens replay <dev set> --window WINDOW`` done (exit 0 checked)."""
    if window not in _HOMES:
        home = tmp_path_factory.mktemp(f"dev{window // 1000}k")
        done = CliRunner().invoke(
            app, ["replay", *map(str, DEV), "--window", str(window), "--home", str(home)]
        )
        assert done.exit_code == 0, done.output
        _HOMES[window] = home
    return _HOMES[window]
