"""``compactlens ingest`` and ``rebuild``, and every command on a locked or corrupt database.

Where a separate process matters it is real: a subprocess holding the database open (killed in
a ``finally``), a watching ``ingest`` stopped by SIGTERM, imports made while it watches. Spools
come from synthetic sessions run through ``CompactionSession`` with a ``SpoolSink``; real
DuckDB files, nothing mocked.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from analytics.cli.commands import run_import
from analytics.store import DB_NAME, open_store
from compactor import SpoolSink
from tests.analytics.cli_helpers import (
    MINI_FILE,
    SWE_FILE,
    count,
    run,
    spool_bytes,
    subprocess_env,
)
from tests.analytics.spool_helpers import (
    assert_same_tables,
    run_session,
    snapshot_home,
    spool_line_count,
)

WATCH = ("--watch", "--interval", "0.2")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


# ------------------------------------------------------------------ the database's bad days


@pytest.fixture
def holder(home: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the database open, until killed."""
    code = (
        "import sys, time\n"
        "from analytics.store import open_store\n"
        "store = open_store(sys.argv[1])\n"
        "print('ready', flush=True)\n"
        "time.sleep(3600)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(home)],
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_locked_database_is_one_line_with_advice_and_the_spool_untouched(
    home: Path, holder: subprocess.Popen[str]
) -> None:
    run_session(home, SpoolSink(home / "spool"), 3)
    spool = spool_bytes(home)
    for args in (["ingest"], ["rebuild"], ["stats"]):
        result = run(*args, "--home", home)
        assert result.exit_code == 1, (args, result.output)
        line = result.output.strip()
        assert len(line.splitlines()) == 1 and "lock" in line and "Stop that process" in line
        assert spool_bytes(home) == spool
    assert (home / DB_NAME).exists() and not list(home.glob(f"{DB_NAME}.bak-*"))
    assert holder.poll() is None


def test_a_corrupt_database_says_rebuild_and_rebuild_restores_it(home: Path) -> None:
    run_session(home, SpoolSink(home / "spool"), 5)
    assert run("import", SWE_FILE, "--home", home).exit_code == 0
    before = snapshot_home(home)
    spool = spool_bytes(home)
    (home / DB_NAME).write_bytes(b"this is no database " * 500)
    for args in (["ingest"], ["stats", "--json"], ["import", str(SWE_FILE)]):
        result = run(*args, "--home", home)
        assert result.exit_code == 1, result.output
        assert "compactlens rebuild" in result.output and result.stdout == ""
        assert spool_bytes(home) == spool
    rebuilt = run("rebuild", "--home", home)
    assert rebuilt.exit_code == 0, rebuilt.output
    (backup,) = home.glob(f"{DB_NAME}.bak-*")
    assert str(backup) in rebuilt.output.replace("\n", "")
    assert backup.read_bytes().startswith(b"this is no database")
    assert_same_tables(snapshot_home(home), before)


# ------------------------------------------------------------------ ingest


def test_ingest_projects_the_spool_and_a_second_run_adds_nothing(home: Path) -> None:
    run_session(home, SpoolSink(home / "spool"), 7)
    assert run("ingest", "--home", home).exit_code == 0
    assert count(home, "SELECT count(*) FROM events") == spool_line_count(home)
    again = run("ingest", "--home", home)
    assert again.exit_code == 0
    assert count(home, "SELECT count(*) FROM events") == spool_line_count(home)


def test_ingest_lists_quarantined_lines_and_exits_1(home: Path) -> None:
    spool = home / "spool"
    spool.mkdir(parents=True)
    (spool / "broken.jsonl").write_text('{"not": "an event"}\nnot json\n')
    result = run("ingest", "--home", home)
    assert result.exit_code == 1
    lines = [t for t in result.output.splitlines() if t.startswith("quarantined: broken.jsonl:")]
    assert len(lines) == 2
    assert count(home, "SELECT count(*) FROM quarantine") == 2


def _watch_two_sessions(home: Path, *extra: str) -> tuple[str, list[str]]:
    """``ingest --watch`` while a session is spooled before it starts and one after its first
    pass with lines; stopped with SIGTERM once it has reported the second: (stdout, stderr
    lines)."""
    run_session(home, SpoolSink(home / "spool"), 11)
    proc = subprocess.Popen(
        [sys.executable, "-m", "analytics.cli", "ingest", "--home", str(home), *WATCH, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        assert proc.stderr is not None
        seen = [proc.stderr.readline()]
        assert seen[0].startswith("watching "), seen
        for session in (12, None):
            while not (line := proc.stderr.readline()).startswith("+"):
                assert line, f"the watcher ended early: {seen}"
                seen.append(line)
            seen.append(line)
            if session is not None:
                run_session(home, SpoolSink(home / "spool"), session)  # while it watches
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in out + err and "new events" in out
    assert count(home, "SELECT count(*) FROM events") == spool_line_count(home)
    assert count(home, "SELECT count(*) FROM sessions") == 2
    return out, [line.rstrip("\n") for line in [*seen, *err.splitlines()]]


def _maintenance_runs(out: str) -> int:
    found = re.search(r"store maintenance runs\D*(\d+)", out)
    assert found, out
    return int(found.group(1))


def test_ingest_watch_stops_on_sigterm_with_everything_projected(home: Path) -> None:
    out, err = _watch_two_sessions(home)
    passes = [line for line in err if line.startswith("+")]
    # a local file: maintenance once, when the watcher stops (after the last pass, which may
    # still have found lines of the session being written when SIGTERM came)
    assert len(passes) >= 2 and not any("maintenance" in line for line in passes[:-1])
    assert _maintenance_runs(out) == 1


def test_ingest_watch_runs_maintenance_as_its_options_say(home: Path) -> None:
    out, err = _watch_two_sessions(home, "--maintain-commits", "1", "--maintain-every", "0")
    passes = [line for line in err if line.startswith("+")]
    assert len(passes) >= 2
    assert all(line.endswith("then the store's maintenance") for line in passes), passes
    assert _maintenance_runs(out) == len(passes)  # after every pass that committed, not again


def test_maintenance_options_without_watch_are_refused(home: Path) -> None:
    run_session(home, SpoolSink(home / "spool"), 11)
    result = run("ingest", "--home", home, "--maintain-commits", "5")
    assert result.exit_code == 2 and "only with --watch" in result.output
    assert not (home / DB_NAME).exists(), "nothing was projected"


def _watcher(home: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "analytics.cli", "ingest", "--home", str(home), *WATCH],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith("watching "), "the watcher did not start"
    return proc


def _stored_messages(home: Path) -> set[tuple[str, int, str]]:
    sql = """SELECT m.session_id, m.idx, m.sha256 FROM messages m
             JOIN sessions s USING (session_id) WHERE s.deleted_at IS NULL"""
    with open_store(home, read_only=True) as store:
        return {(str(s), int(i), str(h)) for s, i, h in store.query(sql).iter_rows()}


def test_an_import_while_ingest_watch_owns_the_database_is_spooled_and_projected_by_it(
    home: Path, tmp_path: Path
) -> None:
    """Before: the import failed with "database locked … the events wait in the spool" and
    wrote no spool at all. Now it appends to the spool, says so, and the watcher projects it."""
    clean = tmp_path / "clean"
    assert run("import", SWE_FILE, MINI_FILE, "--home", clean).exit_code == 0
    expected = _stored_messages(clean)
    sessions = count(clean, "SELECT count(*) FROM sessions")
    run_session(home, SpoolSink(home / "spool"), 13)
    proc = _watcher(home)
    try:
        report = run_import([SWE_FILE, MINI_FILE], home)
        assert report.owner == str(home / DB_NAME) and not report.rejected
        assert report.spool_file is not None and report.spool_file.parent == home / "spool"
        written = report.spool_file.read_text(encoding="utf-8").splitlines()
        assert report.events_written == len(written) == sessions + len(expected)
        note = report.notes()[-1]
        assert str(report.spool_file) in note and f"{len(written):,} events" in note
        spool = spool_bytes(home)
        again = run("import", SWE_FILE, MINI_FILE, "--home", home)  # read from the spool
        assert again.exit_code == 0, again.output
        assert spool_bytes(home) == spool, "an unchanged re-import writes nothing"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert _stored_messages(home) >= expected
    imported = {sid for sid, _i, _h in expected}
    assert {m for m in _stored_messages(home) if m[0] in imported} == expected
    assert count(home, "SELECT count(*) FROM events") == spool_line_count(home)
