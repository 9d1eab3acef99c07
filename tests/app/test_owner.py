"""``app.owner``: the app's store owner finds its home, projects the spool on a timer, and a
second owner of the same store is refused with the store's one-line message."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from analytics.errors import StoreLockedError
from app.owner import (
    StoreOwner,
    allowed_roots,
    home_from,
    release_all,
    release_owner,
    shared_owner,
)
from tests.app.fixtures import run_hostile


@pytest.mark.parametrize(
    ("argv", "environ", "expected"),
    [
        (["--home", "/h1"], {"COMPACTLENS_HOME": "/h2"}, "/h1"),
        (["--home=/h3"], {}, "/h3"),
        ([], {"COMPACTLENS_HOME": "/h2"}, "/h2"),
        ([], {}, "data"),
        (["--home"], {}, "data"),
    ],
)
def test_home_from_flag_then_environment_then_default(
    argv: list[str], environ: dict[str, str], expected: str
) -> None:
    assert home_from(argv, environ) == Path(expected)


def test_spooled_events_are_projected_by_the_timer(tmp_path: Path) -> None:
    owner = StoreOwner.open(tmp_path, interval_s=0.1)
    try:
        assert owner.events == 0
        version = owner.version

        run_hostile(tmp_path, session_id="late")

        deadline = time.monotonic() + 60  # a generous bound on a hang, not a speed check
        while owner.version == version and time.monotonic() < deadline:
            time.sleep(0.05)
        assert owner.version > version
        sessions = owner.read(lambda s: s.query("SELECT session_id FROM sessions"))
        assert sessions.get_column("session_id").to_list() == ["late"]
        assert owner.last_error is None
    finally:
        owner.close()


def test_one_owner_per_home_is_shared_until_released(tmp_path: Path) -> None:
    first = shared_owner(tmp_path)
    try:
        assert shared_owner(tmp_path / ".") is first  # what the server opened, pages reuse
        release_owner(first)
        assert first.stop.is_set()
        second = shared_owner(tmp_path)  # reopened after a release (the cache was cleared)
        assert second is not first
    finally:
        release_all()


def test_the_allowed_roots_are_the_home_then_each_allow_path(tmp_path: Path) -> None:
    argv = ["--home", str(tmp_path), "--allow-path", "/srv/a", "--allow-path=/srv/b"]

    assert allowed_roots(argv) == [tmp_path.resolve(), Path("/srv/a"), Path("/srv/b")]


def test_a_second_owner_is_refused_with_one_line(tmp_path: Path) -> None:
    owner = StoreOwner.open(tmp_path, interval_s=60)
    try:
        with pytest.raises(StoreLockedError) as refused:
            StoreOwner.open(tmp_path)
        assert "\n" not in str(refused.value) and "another process" in str(refused.value)
    finally:
        owner.close()
