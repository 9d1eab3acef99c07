"""Start the Streamlit app on a compactlens home, as a child process, and wait until it answers.

``serve_app`` runs ``python -m streamlit run app/main.py -- --home HOME`` headless on the given
address (127.0.0.1 unless told otherwise) and returns the process; ``wait_until_ready`` polls
Streamlit's health endpoint. The app process then owns the store (it projects the spool itself),
so callers must not hold the database open while it runs. Nothing here imports the app or
Streamlit: the app's entry script is found beside this package.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import webbrowser
from pathlib import Path
from typing import IO

APP_MAIN = Path(__file__).resolve().parents[2] / "app" / "main.py"
"""The app's entry script (installed beside ``analytics``)."""


def app_url(host: str, port: int) -> str:
    shown = "localhost" if host in ("127.0.0.1", "0.0.0.0", "::") else host
    return f"http://{shown}:{port}"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (for tests and ``--port 0``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def serve_app(
    home: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8501,
    open_browser: bool = True,
    output: int | IO[bytes] | None = None,
) -> subprocess.Popen[bytes]:
    """Start the app on ``home`` at ``host:port``; with ``open_browser``, open it in the default
    browser once it answers. ``output`` receives the server's stdout and stderr (inherited when
    None). Stop it with ``terminate()``."""
    home = Path(home).resolve()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP_MAIN),
        "--server.headless=true",
        f"--server.address={host}",
        f"--server.port={port}",
        "--server.fileWatcherType=none",
        "--browser.gatherUsageStats=false",
        "--server.runOnSave=false",
        "--runner.magicEnabled=false",
        "--client.toolbarMode=minimal",
        "--",
        "--home",
        str(home),
    ]
    env = {**os.environ, "COMPACTLENS_HOME": str(home)}
    stderr = subprocess.STDOUT if output is not None else None
    process = subprocess.Popen(cmd, env=env, stdout=output, stderr=stderr)
    if open_browser:
        url = app_url(host, port)
        threading.Thread(
            target=_open_when_ready, args=(url, process), name="compactlens-browser", daemon=True
        ).start()
    return process


def _open_when_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    try:
        wait_until_ready(url, 60.0, process=process)
    except (TimeoutError, RuntimeError):
        return
    webbrowser.open(url)


def wait_until_ready(
    url: str, timeout: float = 30.0, *, process: subprocess.Popen[bytes] | None = None
) -> None:
    """Poll ``url``'s health endpoint until it answers ``ok``. ``TimeoutError`` after
    ``timeout`` seconds; ``RuntimeError`` when ``process`` exits first."""
    health = url.rstrip("/") + "/_stcore/health"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the app exited with code {process.returncode} before answering")
        try:
            with urllib.request.urlopen(health, timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the app did not answer at {health} within {timeout:.0f} s")
