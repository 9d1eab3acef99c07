"""``analytics.cli.serve``: the URL shown, a free port, a server that never comes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from analytics.cli.serve import APP_MAIN, app_url, app_urls, exposed, free_port, wait_until_ready


def test_the_app_entry_script_is_found_beside_the_package() -> None:
    assert APP_MAIN.is_file() and APP_MAIN.parent.name == "app"


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://localhost:8501"),
        ("0.0.0.0", "http://localhost:8501"),
        ("10.1.2.3", "http://10.1.2.3:8501"),
    ],
)
def test_app_url(host: str, url: str) -> None:
    assert app_url(host, 8501) == url


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", False),
        ("127.0.0.2", False),
        ("localhost", False),
        ("::1", False),
        ("0.0.0.0", True),
        ("::", True),
        ("10.1.2.3", True),
        ("myhost.example", True),
    ],
)
def test_every_address_but_loopback_is_exposed(host: str, expected: bool) -> None:
    assert exposed(host) is expected


def test_a_wildcard_bind_lists_the_local_url_first_then_a_network_one() -> None:
    urls = app_urls("0.0.0.0", 8501)

    assert urls[0] == "http://localhost:8501"
    assert all(not u.startswith("http://127.") for u in urls[1:])
    assert app_urls("fd00::5", 8501) == ["http://[fd00::5]:8501"]


def test_waiting_on_a_port_nobody_serves_times_out() -> None:
    with pytest.raises(TimeoutError, match="did not answer"):
        wait_until_ready(f"http://127.0.0.1:{free_port()}", 0.5)


def test_waiting_stops_when_the_server_process_exits() -> None:
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()

    with pytest.raises(RuntimeError, match="exited with code 3"):
        wait_until_ready(f"http://127.0.0.1:{free_port()}", 10, process=process)
