"""Readers beside a running app on a lake: ``compactlens ui`` holds no lock that stops the CLI.

The real ``ui`` command runs on a lake (its server projecting the home's spool); meanwhile the
real ``stats --json`` on the same lake exits 0 with the figures, and ``ingest`` of another
host's spool lands beside it. On the local file the same ``stats`` is refused while ``ui``
runs (one writer per file), which is what the lake is for.

Each test makes a fresh lake and starts only the processes its claim is about (``ui``, ``stats``,
``ingest``, ``rebuild``); the other host's spool that ``rebuild`` must keep is ingested in this
process. There is no race to repeat here, so ``bench/lake_stress.py`` does not run it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from analytics.cli.serve import free_port
from analytics.store.projector import Projector
from compactor import SpoolSink
from tests.analytics.cli.test_cli_ui import Run
from tests.analytics.spool_helpers import run_session
from tests.analytics.store.conftest import Backend

ROOT = Path(__file__).resolve().parents[3]
STARTUP_S = 180


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "analytics.cli", *args],
        capture_output=True,
        text=True,
        timeout=STARTUP_S,
        cwd=ROOT,
        env=env or dict(os.environ),
    )


def test_stats_json_exits_0_on_a_lake_while_ui_runs_on_it(lake: Backend, tmp_path: Path) -> None:
    assert lake.selection.store and lake.selection.lake_data
    store = ["--store", lake.selection.store, "--lake-data", str(lake.selection.lake_data)]
    run_session(lake.home, SpoolSink(lake.home / "spool"), 7)
    other = tmp_path / "other-host"
    run_session(other, SpoolSink(other / "spool"), 8)
    ui = Run(
        ["ui", "--port", str(free_port()), "--no-browser", "--home", str(lake.home), *store],
        lake.home,
    )
    try:
        ui.line_with("projecting its spool every", STARTUP_S)
        stats = cli("stats", "--json", "--home", str(lake.home), *store)
        assert stats.returncode == 0, stats.stderr
        figures = json.loads(stats.stdout)
        assert figures["sessions"] == 1
        assert figures["compactions"]["total"] > 0
        ingest = cli("ingest", "--home", str(other), *store)
        assert ingest.returncode == 0, ingest.stderr
        again = cli("stats", "--json", "--home", str(lake.home), *store)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["sessions"] == 2
    finally:
        ui.process.send_signal(signal.SIGTERM)
        assert ui.stopped() == 0, ui.rest()


def test_the_store_can_be_chosen_by_environment_variables(lake: Backend) -> None:
    assert lake.selection.store and lake.selection.lake_data
    run_session(lake.home, SpoolSink(lake.home / "spool"), 9)
    env = {
        **os.environ,
        "COMPACTLENS_STORE": lake.selection.store,
        "COMPACTLENS_LAKE_DATA": str(lake.selection.lake_data),
    }
    assert cli("ingest", "--home", str(lake.home), env=env).returncode == 0
    assert not (lake.home / "compactlens.duckdb").exists()
    with lake.open() as opened:
        assert opened.counts()["sessions"] == 1
    assert any(lake.selection.lake_data.rglob("*.parquet"))


def test_rebuild_on_a_lake_recomputes_the_projections_from_every_hosts_events(
    lake: Backend, tmp_path: Path
) -> None:
    assert lake.selection.store and lake.selection.lake_data
    store = ["--store", lake.selection.store, "--lake-data", str(lake.selection.lake_data)]
    run_session(lake.home, SpoolSink(lake.home / "spool"), 11)
    other = tmp_path / "other-host"
    run_session(other, SpoolSink(other / "spool"), 12)
    with lake.open(other) as opened:  # the other host's ingest (the CLI's is tested above)
        assert Projector(opened, other / "spool").ingest().new_events > 0
    rebuilt = cli("rebuild", "--home", str(lake.home), *store)
    assert rebuilt.returncode == 0, rebuilt.stderr
    with lake.open() as opened:
        assert opened.counts()["sessions"] == 2  # the other host's session is still there
        assert opened.counts()["compactions"] > 0
