"""``compactlens ui`` and ``demo``: the real commands start the app, project the spool with no
browser open, and stop whole on Ctrl-C, SIGTERM or SIGHUP, freeing the port and the store.

Each test runs the command as a real process leading its own process group (as a service
manager or ``docker stop`` sees it), reads its output on a thread, and looks at the processes
it started through ``/proc``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.cli.serve import free_port
from analytics.store import open_store
from tests.app.fixtures import run_hostile
from tests.cli import unwrapped


class Run:
    """A command started as a real process, its output arriving line by line on a queue."""

    def __init__(self, args: list[str], home: Path) -> None:
        env = {**os.environ, "COMPACTLENS_HOME": str(home)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "analytics.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,  # its own group, as under systemd or docker
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert self.process.stdout is not None
        self.reader = threading.Thread(target=_pump, args=(self.process.stdout, self.lines))
        self.reader.daemon = True
        self.reader.start()

    def line_with(self, text: str, deadline_s: float) -> str:
        """The first line (from now on) that holds ``text``; AssertionError at the deadline."""
        deadline = time.monotonic() + deadline_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r}:\n" + "".join(self.seen[-30:]))

    def url(self, deadline_s: float = 120) -> str:
        line = self.line_with("compactlens app: http://", deadline_s)
        return line.split("compactlens app: ", 1)[1].split()[0]

    def rest(self) -> str:
        """Everything printed after what was read, once the process ended."""
        self.reader.join(10)
        return "".join(self.lines.get_nowait() for _ in range(self.lines.qsize()))

    def stopped(self) -> int:
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise


def _pump(stdout: IO[str], lines: queue.Queue[str]) -> None:
    for line in stdout:
        lines.put(line)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of ``pid`` from /proc, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1]), int(fields[2])


def _processes() -> dict[int, tuple[str, int, int]]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            found[int(entry.name)] = stat
    return found


def _family(pid: int) -> set[int]:
    """``pid`` and every live process descended from it."""
    table = _processes()
    family, grew = {pid}, True
    while grew:
        more = {p for p, (_s, ppid, _g) in table.items() if ppid in family} - family
        family |= more
        grew = bool(more)
    return family


def _alive(pids: set[int], groups: set[int]) -> list[int]:
    """Which of ``pids``, or of any process in ``groups``, still run (zombies do not count)."""
    return [
        p
        for p, (state, _ppid, group) in _processes().items()
        if (p in pids or group in groups) and state != "Z"
    ]


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _port_free(port: int) -> bool:
    """Whether a new server could listen on ``port`` (connections in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def _healthy(url: str) -> bool:
    with urllib.request.urlopen(url + "/_stcore/health", timeout=5) as reply:
        return bool(reply.status == 200 and reply.read() == b"ok")


def _kill(run: Run, family: set[int]) -> None:
    """Clean up after a failed test: only the processes this test started (the command and
    what it spawned, checked by their command line, so a pid reused since is left alone)."""
    for pid in family | _family(run.process.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"analytics.cli" in command or b"app.server" in command:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def test_ui_serves_the_store_on_localhost_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    run = Run(["ui", "--port", str(port), "--no-browser", "--home", str(tmp_path)], tmp_path)
    family: set[int] = {run.process.pid}
    try:
        url = run.url()
        family = _family(run.process.pid)
        assert url == f"http://localhost:{port}"
        assert _healthy(f"http://127.0.0.1:{port}")
        assert not any("no authentication" in line for line in run.seen)  # loopback: no warning
        os.killpg(run.process.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the group
        assert run.stopped() == 0
        assert not _alive(family, set())
    finally:
        _kill(run, family)
    assert "Traceback" not in run.rest()


@pytest.mark.parametrize(
    ("command", "signum"),
    [(["ui"], signal.SIGTERM), (["demo", "--sessions", "1"], signal.SIGHUP)],
    ids=["ui-SIGTERM", "demo-SIGHUP"],
)
def test_a_stop_signal_ends_every_process_the_command_started_and_frees_port_and_store(
    tmp_path: Path, command: list[str], signum: signal.Signals
) -> None:
    port = free_port()
    args = [*command, "--port", str(port), "--no-browser", "--home", str(tmp_path)]
    run = Run(args, tmp_path)
    family: set[int] = {run.process.pid}
    try:
        run.url(180)
        family = _family(run.process.pid)
        assert len(family) >= 2, family  # the command and the app server it started
        groups = {stat[2] for p in family if (stat := _stat(p)) is not None}

        run.process.send_signal(signum)  # to the command only, as `kill PID` does

        assert run.stopped() == 0
        _wait_for(lambda: not _alive(family, groups), 60, f"{family} and groups {groups} to end")
    finally:
        _kill(run, family)
    assert _port_free(port)
    with open_store(tmp_path):  # the store's lock is free: it opens as owner
        pass
    assert "Traceback" not in run.rest()


def test_ui_projects_what_agents_spool_with_no_browser_open(tmp_path: Path) -> None:
    port = free_port()
    run = Run(["ui", "--port", str(port), "--no-browser", "--home", str(tmp_path)], tmp_path)
    family: set[int] = {run.process.pid}
    try:
        run.url()
        family = _family(run.process.pid)

        run_hostile(tmp_path, session_id="spooled-while-serving")  # an agent appends events

        line = run.line_with("projected", 120)  # the server's own log: no page was ever opened
        assert "new events" in line
        run.process.send_signal(signal.SIGTERM)
        assert run.stopped() == 0
    finally:
        _kill(run, family)
    with open_store(tmp_path, read_only=True) as store:  # what the server stored
        found = store.query("SELECT session_id FROM sessions").to_series().to_list()
    assert found == ["spooled-while-serving"]


def test_ui_on_every_interface_warns_and_prints_the_address_others_use(tmp_path: Path) -> None:
    port = free_port("0.0.0.0")
    args = ["ui", "--host", "0.0.0.0", "--port", str(port), "--no-browser"]
    run = Run([*args, "--home", str(tmp_path)], tmp_path)
    family: set[int] = {run.process.pid}
    try:
        line = run.line_with("compactlens app: http://", 120)
        family = _family(run.process.pid)
        before = "".join(run.seen)
        assert "no authentication" in before and "--host 0.0.0.0" in before
        assert str(tmp_path) in before  # the folders the tuning form may read are named
        urls = line.split("compactlens app: ", 1)[1].split("(")[0].split()
        assert urls[0] == f"http://localhost:{port}"
        for url in urls[1:]:  # this machine's network address, when it has a route
            assert not url.startswith(("http://localhost", "http://127.")), url
            assert _healthy(url)
    finally:
        run.process.send_signal(signal.SIGTERM)
        run.stopped()
        _kill(run, family)


def test_allow_path_must_name_an_existing_folder(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        app, ["ui", "--allow-path", str(tmp_path / "nowhere"), "--home", str(tmp_path)]
    )

    assert done.exit_code == 2
    assert str(tmp_path / "nowhere") in unwrapped(done.output)
