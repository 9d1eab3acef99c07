"""``compactlens ui`` and ``demo``: the real commands start the app and stop on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from analytics.serve import free_port


def _start(args: list[str], home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "COMPACTLENS_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "analytics.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _url_line(process: subprocess.Popen[str], deadline_s: float) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + deadline_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        seen.append(line)
        if "compactlens app: http://" in line:
            return line
    raise AssertionError("no URL printed:\n" + "".join(seen[-20:]))


def _stopped(process: subprocess.Popen[str]) -> int:
    try:
        return process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


def _healthy(url: str) -> bool:
    with urllib.request.urlopen(url + "/_stcore/health", timeout=5) as reply:
        return bool(reply.status == 200 and reply.read() == b"ok")


def test_ui_serves_the_store_on_localhost_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    process = _start(["ui", "--port", str(port), "--no-browser", "--home", str(tmp_path)], tmp_path)
    try:
        line = _url_line(process, 120)
        url = line.split("compactlens app: ", 1)[1].split()[0]
        assert url == f"http://localhost:{port}"
        assert _healthy(f"http://127.0.0.1:{port}")
    finally:
        process.send_signal(signal.SIGINT)
        code = _stopped(process)
    assert code == 0
    assert process.stdout is not None and "Traceback" not in process.stdout.read()


def test_demo_loads_its_sessions_then_serves_them(tmp_path: Path) -> None:
    port = free_port()
    process = _start(
        ["demo", "--sessions", "1", "--port", str(port), "--no-browser", "--home", str(tmp_path)],
        tmp_path,
    )
    try:
        _url_line(process, 180)
        assert _healthy(f"http://127.0.0.1:{port}")
        assert (tmp_path / "compactlens.duckdb").exists()
    finally:
        process.send_signal(signal.SIGINT)
        _stopped(process)
