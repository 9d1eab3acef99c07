"""Commands run one after another in one process (a program, a notebook, a test suite) each use
the store they were given: a ``--store`` of one command is not the next one's default.

The command line selects its store and exports it to the environment for the app server it may
start; both used to outlive the command, so every later command of the process opened the lake
of an earlier one (a CI run failed 60 tests after one that named an unreachable lake).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analytics.cli.common import LAKE_DATA_ENV, STORE_ENV
from analytics.cli.main import app
from analytics.store import selected

UNREACHABLE = "ducklake:postgres:dbname=lake host=127.0.0.1 port=9 user=u password=pw"

pytestmark = pytest.mark.integration


def test_a_store_named_by_one_command_is_not_the_next_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STORE_ENV, raising=False)
    monkeypatch.delenv(LAKE_DATA_ENV, raising=False)
    before = selected()
    runner = CliRunner()
    lake = runner.invoke(app, ["stats", "--store", UNREACHABLE, "--home", str(tmp_path / "a")])
    assert lake.exit_code != 0 and "port=9" in lake.output  # it did try the lake it was given
    assert selected() == before
    assert STORE_ENV not in os.environ and LAKE_DATA_ENV not in os.environ
    local = runner.invoke(app, ["ingest", "--home", str(tmp_path / "b")])
    assert local.exit_code == 0, local.output
    assert (tmp_path / "b" / "compactlens.duckdb").is_file()
