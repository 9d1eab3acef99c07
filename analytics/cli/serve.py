"""Start the Streamlit app on a compactlens home, as a child process, and stop it whole.

``serve_app`` runs ``python -m app.server run app/main.py -- --home HOME`` headless on the given
address (127.0.0.1 unless told otherwise) in a process group of its own and returns the process;
``app.server`` opens the store and starts the projector before Streamlit serves, so the spool is
projected with no browser open. ``wait_until_ready`` polls Streamlit's health endpoint;
``stop_app`` ends the app's whole process group (SIGTERM, then SIGKILL after a grace period),
so nothing it started keeps the port or the store's lock. ``app_urls`` and ``exposed`` say where
the app can be reached and whether more than this machine can reach it. Nothing here imports
the app or Streamlit: the app's entry script is found beside this package.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import webbrowser
from collections.abc import Sequence
from pathlib import Path
from typing import IO

APP_MAIN = Path(__file__).resolve().parents[2] / "app" / "main.py"
"""The app's entry script (installed beside ``analytics``)."""
APP_SERVER = "app.server"
"""The module that opens the store, then runs Streamlit on ``APP_MAIN``."""
WILDCARDS = ("0.0.0.0", "::", "")
STOP_GRACE_S = 10.0


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def exposed(host: str) -> bool:
    """Whether ``host`` lets other machines connect (anything but loopback and ``localhost``)."""
    if host.lower() == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return True


def _outward_address(ipv6: bool) -> str | None:
    """This machine's address on its default route (a UDP "connect" sends no packet), or None
    without a route."""
    family, probe = (socket.AF_INET6, "2001:db8::1") if ipv6 else (socket.AF_INET, "192.0.2.1")
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((probe, 9))
            return str(sock.getsockname()[0])
    except OSError:
        return None


def app_urls(host: str, port: int) -> list[str]:
    """Where the app answers, the first the one to open here: loopback binds give
    ``http://localhost:PORT``; a wildcard bind (0.0.0.0, ::) that URL and this machine's network
    address; any other address itself."""
    if host in WILDCARDS:
        outward = _outward_address(ipv6=host == "::")
        return [_url("localhost", port), *([_url(outward, port)] if outward else [])]
    if not exposed(host):
        return [_url("localhost", port)]
    return [_url(host, port)]


def app_url(host: str, port: int) -> str:
    """The URL to open on this machine (``app_urls``' first)."""
    return app_urls(host, port)[0]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (for tests and ``--port 0``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def serve_app(
    home: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8501,
    open_browser: bool = True,
    output: int | IO[bytes] | None = None,
    allow_paths: Sequence[Path] = (),
) -> subprocess.Popen[bytes]:
    """Start the app on ``home`` at ``host:port``; with ``open_browser``, open it in the default
    browser once it answers. ``output`` receives the server's stdout and stderr (inherited when
    None). The tuning form reads transcripts only under ``home`` and ``allow_paths``. The
    server leads a process group of its own: stop it with ``stop_app``."""
    home = Path(home).resolve()
    cmd = [
        sys.executable,
        "-m",
        APP_SERVER,
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
    for folder in allow_paths:
        cmd += ["--allow-path", str(Path(folder).resolve())]
    env = {**os.environ, "COMPACTLENS_HOME": str(home)}
    stderr = subprocess.STDOUT if output is not None else None
    # its own group: a terminal's Ctrl-C reaches only the command, which stops the group whole
    process = subprocess.Popen(cmd, env=env, stdout=output, stderr=stderr, start_new_session=True)
    if open_browser:
        url = app_url(host, port)
        threading.Thread(
            target=_open_when_ready, args=(url, process), name="compactlens-browser", daemon=True
        ).start()
    return process


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """``signum`` to the app's process group (led by the app: ``serve_app`` made it so)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(process.pid, signum)


def _exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the app has exited, without reaping it: while it is a zombie its pid (and so
    its group id) cannot be reused, so the group can still be signalled safely."""
    try:
        found = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped already (by a poll() elsewhere)
        return True
    return found is not None


def stop_app(process: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """Stop the app and everything in its process group: SIGTERM (Streamlit shuts down and
    the store is closed), then SIGKILL after ``grace_s`` seconds or on a second Ctrl-C."""
    _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    try:
        while not _exited(process) and time.monotonic() < deadline:
            time.sleep(0.05)
    except KeyboardInterrupt:
        pass
    _signal_group(process, signal.SIGKILL)  # what did not stop, and what outlived the server
    process.wait()


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
