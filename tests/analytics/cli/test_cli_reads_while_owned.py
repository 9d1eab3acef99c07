"""While ``compactlens ui`` owns a home's store, the reading commands still answer (issue 29).

The app holds the DuckDB file for its life; a reading command borrows the store from it (the
owner closes it, the reader opens it as on an idle home, hands it back) instead of being refused
with "database locked". The figures must be the ones the same command gives once the app has
stopped; a writer is still refused, naming the owner; a reader killed while it holds the loan
hands the store back. Every command here is a real process, as a user's terminal runs it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analytics.cli.serve import free_port
from analytics.store import DB_NAME
from analytics.store.lending import socket_path
from tests.analytics.cli.test_cli_ui import Run
from tests.cli import invoke_ok
from tests.transcripts import CTF

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not CTF.is_dir(), reason=f"no transcripts at {CTF}"),
]

READS = (("stats", "--json"), ("retention", "--json"), ("postmortem", "--json"))


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "analytics.cli", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "COLUMNS": "160"},
    )


def _answers(home: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for args in READS:
        done = _cli(home, *args)
        assert done.returncode == 0, f"{args}: {done.stderr[-1500:]}"
        out[args[0]] = json.loads(done.stdout)
    return out


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("owned")
    invoke_ok("replay", str(CTF), "--window", "4000", "--home", str(root))
    return root


class AppOwner:
    """``compactlens ui`` owning a home's store, shared by the tests of this module: starting
    the app costs seconds, so a test reuses the one still running; the one that must see it
    stop stops it, and whichever stops it asserts that it exited 0."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.run: Run | None = None

    def running(self) -> Run:
        """The app, ready (its URL printed): the one still running, else a new one."""
        if self.run is None or self.run.process.poll() is not None:
            port = str(free_port())
            self.run = Run(
                ["ui", "--port", port, "--no-browser", "--home", str(self.home)], self.home
            )
            self.run.url()
        return self.run

    def stop(self) -> None:
        """Stop the app if it runs (SIGINT, as Ctrl-C); it must exit 0."""
        if self.run is not None and self.run.process.poll() is None:
            self.run.process.send_signal(signal.SIGINT)
            assert self.run.stopped() == 0


@pytest.fixture(scope="module")
def app_owner(home: Path) -> Iterator[AppOwner]:
    owner = AppOwner(home)
    yield owner
    owner.stop()


def test_a_reader_killed_holding_the_loan_hands_the_store_back(
    home: Path, app_owner: AppOwner
) -> None:
    app_owner.running()  # left running for the next test; whoever stops it asserts exit 0
    # a reader that borrows the store and is killed before it gives it back
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from analytics.store.lending import reading_store\n"
        "with reading_store(Path(sys.argv[1]), 'hostile', read_only=True) as store:\n"
        "    print('borrowed', flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", code, str(home)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL and "borrowed" in killed.stdout
    stats = _cli(home, "stats", "--json")  # the owner took the store back and lends again
    assert stats.returncode == 0, stats.stderr[-1500:]
    assert json.loads(stats.stdout)["sessions"] == len(list(CTF.rglob("*.traj")))


def test_reads_answer_while_the_app_owns_the_store_with_the_figures_of_an_idle_store(
    home: Path, app_owner: AppOwner
) -> None:
    run = app_owner.running()
    try:
        refused = _cli(home, "ingest")  # a writer is refused, and told who owns the store
        assert refused.returncode != 0
        assert "held by PID" in refused.stderr
        while_owned = _answers(home)
        assert socket_path(home / DB_NAME).exists()
    finally:
        run.process.send_signal(signal.SIGINT)
        assert run.stopped() == 0
    assert not socket_path(home / DB_NAME).exists()
    after = _answers(home)
    assert while_owned == after
    assert after["stats"]["sessions"] == len(list(CTF.rglob("*.traj")))


def test_reads_answer_while_ingest_watch_owns_the_store(home: Path, app_owner: AppOwner) -> None:
    app_owner.stop()  # the watcher is to own the store, not an app a test left running
    run = Run(["ingest", "--watch", "--interval", "0.2", "--home", str(home)], home)
    try:
        run.line_with("watching", 120)
        answered = _cli(home, "stats", "--json")
        assert answered.returncode == 0, answered.stderr[-1500:]
        assert json.loads(answered.stdout)["sessions"] == len(list(CTF.rglob("*.traj")))
        assert run.process.poll() is None  # the watcher goes on after the loan
    finally:
        run.process.send_signal(signal.SIGINT)
        assert run.stopped() == 0
