"""No command prints a secret of a store URL or an OTLP endpoint (issue 28, item 6.1).

A store that cannot be reached (a lake on 127.0.0.1 port 9, where nothing listens) is one error
line without its password, for a single ingest, a watching one and a read; ``export otlp`` to an
endpoint with ``user:password@`` names it without the password, whether the export succeeds (a
loopback receiver) or fails. A watching ingest whose PostgreSQL stops under it (a real server
this test starts) prints no password either, whatever it then does.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.store import select, selected
from compactor import SpoolSink
from tests.analytics.cli_helpers import subprocess_env
from tests.analytics.spool_helpers import ingest, run_session
from tests.analytics.store.postgres import PostgresServer, own_postgres
from tests.otlp_receiver import OtlpReceiver

SECRET = "s3cr3t-Pw"
UNREACHABLE = [
    f"ducklake:postgres:dbname=lake host=127.0.0.1 port=9 user=u password={SECRET}",
    f"ducklake:postgres:postgresql://u:{SECRET}@127.0.0.1:9/lake",
    f"ducklake:postgres:postgresql://u@127.0.0.1:9/lake?password={SECRET}",
]
COMMANDS = [["ingest"], ["ingest", "--watch"], ["stats", "--json"]]


@pytest.fixture(autouse=True)
def _store_selection_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A command given ``--store`` selects it for the process and hands it on in the
    environment (for the app server it may start): put both back after each test."""
    monkeypatch.delenv("COMPACTLENS_STORE", raising=False)
    monkeypatch.delenv("COMPACTLENS_LAKE_DATA", raising=False)
    previous = selected()
    yield
    select(previous)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
@pytest.mark.parametrize("url", UNREACHABLE, ids=["key-value", "userinfo", "query"])
def test_a_store_that_cannot_be_reached_is_one_line_without_its_password(
    tmp_path: Path, url: str, command: list[str]
) -> None:
    done = CliRunner().invoke(app, [*command, "--home", str(tmp_path / "home"), "--store", url])
    assert done.exit_code == 1, done.output
    assert SECRET not in done.output
    assert "Traceback" not in done.output
    assert done.output.startswith("error: cannot open the lake"), done.output


@pytest.fixture
def home_with_compactions(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 3)
    sink.close()
    ingest(home)
    return home


def test_export_otlp_names_its_endpoint_without_the_password(home_with_compactions: Path) -> None:
    with OtlpReceiver() as receiver:
        url = receiver.url.replace("http://", f"http://user:{SECRET}@")
        done = CliRunner().invoke(
            app,
            ["export", "otlp", "--endpoint", url, "--home", str(home_with_compactions)],
        )
    assert done.exit_code == 0, done.output
    assert SECRET not in done.output
    assert f"to http://user:***@127.0.0.1:{receiver.port}/v1/traces" in done.output


def test_a_failed_export_otlp_names_its_endpoint_without_the_password(
    home_with_compactions: Path,
) -> None:
    url = f"http://user:{SECRET}@127.0.0.1:9/v1/traces?token={SECRET}"
    # a refused connection fails at once; --timeout 2 lets the exporter retry once (after a
    # backoff of 0.8-1.2 s) instead of for 7 s or more at the default 10 s
    done = CliRunner().invoke(
        app,
        [
            "export",
            "otlp",
            "--endpoint",
            url,
            "--timeout",
            "2",
            "--home",
            str(home_with_compactions),
        ],
    )
    assert done.exit_code == 1, done.output
    assert SECRET not in done.output
    assert "http://user:***@127.0.0.1:9/v1/traces" in done.output


def test_an_endpoint_refused_as_no_url_is_named_without_its_password(tmp_path: Path) -> None:
    url = f"http://user:{SECRET}@127.0.0.1:port/v1/traces"  # a port that is not a number
    done = CliRunner().invoke(
        app, ["export", "otlp", "--endpoint", url, "--home", str(tmp_path / "home")]
    )
    assert done.exit_code == 2, done.output
    assert SECRET not in done.output


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    with own_postgres() as server:
        yield server


WATCH_DEADLINE_S = 120.0


@pytest.mark.parametrize("form", ["key-value", "userinfo"])
def test_a_watcher_whose_postgres_stops_prints_no_password(
    tmp_path: Path, postgres: PostgresServer, form: str
) -> None:
    conninfo = postgres.database()  # trust authentication: the password is sent, not checked
    dbname = conninfo.split()[0].removeprefix("dbname=")
    url = (
        f"ducklake:postgres:{conninfo} password={SECRET}"
        if form == "key-value"
        else f"ducklake:postgres:postgresql://postgres:{SECRET}@127.0.0.1:{postgres.port}/{dbname}"
    )
    home = tmp_path / "home"
    (home / "spool").mkdir(parents=True)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        command = ["ingest", "--watch", "--interval", "0.2", "--home", str(home)]
        watcher = subprocess.Popen(
            [sys.executable, "-m", "analytics.cli.main", *command, "--store", url],
            stdout=stdout,
            stderr=stderr,
            env=subprocess_env(),
        )
        try:
            deadline = time.monotonic() + WATCH_DEADLINE_S
            while "watching" not in err.read_text() and watcher.poll() is None:
                assert time.monotonic() < deadline, err.read_text()
                time.sleep(0.05)
            said = len(err.read_text())
            postgres.stop()  # PostgreSQL goes away under the watcher
            while watcher.poll() is None and len(err.read_text()) == said:
                assert time.monotonic() < deadline, err.read_text()
                time.sleep(0.05)  # until the watcher says something or ends
        finally:
            if watcher.poll() is None:
                watcher.terminate()
            watcher.wait(timeout=60)
    printed = out.read_text() + err.read_text()
    assert len(err.read_text()) > said, printed  # it said something about the failure
    assert SECRET not in printed, printed
