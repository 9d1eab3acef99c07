"""Spool files another user wrote, or could write, are not read (issue 28 item 6.11).

Events in the spool become the store's truth, so a spool file is read only when it is this
user's own and nobody else may write to it: one owned by another user (``chown nobody``, which
needs root: skipped otherwise), or one its group or everyone may write (``chmod o+w``; another
user could append events to it), is skipped with one line naming the file and why, every other
file is stored, and it is read on a later pass once it is private again. The spool folder an
agent's ``SpoolSink`` creates is private (0700). Everything is real: files, modes, owners, the
projector and the ``compactlens ingest`` command.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.store import open_store
from analytics.store.projector import Projector
from compactor import SpoolSink
from compactor.events import EventFactory, UsageReported
from tests.analytics.spool_helpers import NOBODY, usage_lines, write_lines

ROOT = Path(__file__).resolve().parents[3]


def _events(home: Path) -> int:
    with open_store(home) as store:
        return int(store.counts()["events"])


def _ingest(home: Path) -> list[str]:
    with open_store(home) as store:
        return Projector(store, home / "spool").ingest().skipped


def _cli_ingest(home: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "analytics.cli", "ingest", "--home", str(home)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("mode", [0o646, 0o666, 0o664, 0o620], ids=oct)
def test_a_spool_file_others_may_write_is_skipped_with_a_line_and_the_rest_stored(
    tmp_path: Path, mode: int
) -> None:
    spool = tmp_path / "spool"
    write_lines(spool / "mine.jsonl", usage_lines("mine", 3))
    shared = spool / "shared.jsonl"
    write_lines(shared, usage_lines("shared", 4))
    shared.chmod(mode)

    done = _cli_ingest(tmp_path)

    assert done.returncode == 1, done.stderr
    said = [line for line in done.stderr.splitlines() if "shared.jsonl" in line]
    assert len(said) == 1, done.stderr
    who = "other users" if mode & stat.S_IWOTH else "its group"
    assert f"writable by {who} (mode {mode:04o})" in said[0] and "not read" in said[0]
    assert _events(tmp_path) == 3

    shared.chmod(0o600)  # private again: read on the next pass
    assert _ingest(tmp_path) == []
    assert _events(tmp_path) == 3 + 4


def test_lines_another_user_appends_to_a_file_made_world_writable_are_not_read(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    path = spool / "agent.jsonl"
    write_lines(path, usage_lines("agent", 2))
    assert _ingest(tmp_path) == [] and _events(tmp_path) == 2

    path.chmod(0o666)  # then anyone may append, and someone does
    write_lines(path, usage_lines("agent", 3, start_seq=2))

    (line,) = _ingest(tmp_path)
    assert line.startswith("agent.jsonl: writable by other users (mode 0666)")
    assert _events(tmp_path) == 2


def _root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("making a file another user's needs root (chown)")


def test_a_spool_file_owned_by_another_user_is_skipped_even_when_readable(
    tmp_path: Path,
) -> None:
    _root_only()
    spool = tmp_path / "spool"
    write_lines(spool / "mine.jsonl", usage_lines("mine", 3))
    other = spool / "other.jsonl"
    factory = EventFactory("planted")
    planted = factory.make(UsageReported(estimated_input_tokens=1, input_tokens=1, turn=0))
    write_lines(other, [planted.to_json_line()])
    os.chown(other, NOBODY, NOBODY)
    other.chmod(0o644)  # readable by this process: only its owner says it is not ours

    done = _cli_ingest(tmp_path)

    assert done.returncode == 1, done.stderr
    assert f"other.jsonl: owned by another user (uid {NOBODY}" in done.stderr, done.stderr
    with open_store(tmp_path) as store:
        assert store.counts()["events"] == 3
        assert store.query("SELECT count(*) FROM events WHERE session_id = 'planted'").item() == 0

    os.chown(other, os.geteuid(), os.getegid())  # this user's now: read on the next pass
    assert _ingest(tmp_path) == []
    assert _events(tmp_path) == 4


def test_the_spool_folder_an_agent_creates_is_private(tmp_path: Path) -> None:
    spool = tmp_path / "home" / "spool"
    sink = SpoolSink(spool)
    sink.emit(EventFactory("s").make(UsageReported(estimated_input_tokens=1, input_tokens=1)))
    sink.close()

    assert stat.S_IMODE(spool.stat().st_mode) == 0o700
    (file,) = spool.glob("*.jsonl")
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
