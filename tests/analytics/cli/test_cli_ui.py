"""``compactlens ui`` and ``demo``: the real commands start the app and stop on Ctrl-C."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO

from analytics.cli.serve import free_port


def _start(args: list[str], home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "COMPACTLENS_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "analytics.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _pump(stdout: IO[str], lines: queue.Queue[str]) -> None:
    for line in stdout:
        lines.put(line)


def _url_line(
    process: subprocess.Popen[str], deadline_s: float
) -> tuple[str, queue.Queue[str], threading.Thread]:
    """The line with the app's URL, and the queue the rest of the output arrives on; output is
    read on a thread, so a hung app fails the test at the deadline instead of blocking it."""
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
    reader.start()
    deadline = time.monotonic() + deadline_s
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=min(left, 1.0))
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        seen.append(line)
        if "compactlens app: http://" in line:
            return line, lines, reader
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
        line, rest, reader = _url_line(process, 120)
        url = line.split("compactlens app: ", 1)[1].split()[0]
        assert url == f"http://localhost:{port}"
        assert _healthy(f"http://127.0.0.1:{port}")
    finally:
        process.send_signal(signal.SIGINT)
        code = _stopped(process)
    assert code == 0
    reader.join(10)  # the output ends when the process does
    tail = "".join(rest.get_nowait() for _ in range(rest.qsize()))
    assert "Traceback" not in tail


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
