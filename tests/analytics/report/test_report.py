"""``compactlens report FILE.html``: one self-contained file that opens offline, text escaped."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.replay.synthetic import generate_session
from compactor import Message, SpoolSink
from tests.analytics.spool_helpers import ingest, run_session

HOSTILE = "<script>alert('pwned')</script><img src=x onerror=alert(1)>"


def test_the_report_is_self_contained_and_escapes_content(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sink = SpoolSink(home / "spool")
    session = generate_session(3)
    hostile = [session[0], Message(role="user", content=HOSTILE), *session[2:]]
    run_session(home, sink, 3, messages=hostile)
    sink.close()
    ingest(home)
    out = tmp_path / "out" / "report.html"

    done = CliRunner().invoke(app, ["report", str(out), "--home", str(home)])

    assert done.exit_code == 0, done.output
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # plotly.js is inlined once, and nothing is fetched from the network
    assert page.count("plotly.js v") == 1
    assert not re.search(r"<script[^>]+src=", page)
    assert not re.search(r"<link[^>]+href=\"http", page)
    assert HOSTILE not in page
    assert len(re.findall(r'class="plotly-graph-div"', page)) == 5
    stats = json.loads(CliRunner().invoke(app, ["stats", "--json", "--home", str(home)]).stdout)
    assert f"<th>effective compactions</th><td>{stats['compactions']['total']:,}</td>" in page


def test_a_report_of_a_store_without_sessions_is_written_with_empty_figures(
    tmp_path: Path,
) -> None:
    """A new store, or one whose spool held nothing valid: the jobs never wrote a table."""
    home = tmp_path / "home"
    (home / "spool").mkdir(parents=True)
    (home / "spool" / "only.jsonl").write_text("not an event\n", encoding="utf-8")
    ingest(home)
    out = tmp_path / "report.html"

    done = CliRunner().invoke(app, ["report", str(out), "--home", str(home)])

    assert done.exit_code == 0, done.output
    assert done.exception is None
    page = out.read_text(encoding="utf-8")
    assert len(re.findall(r'class="plotly-graph-div"', page)) == 5


def test_the_report_lists_the_postmortems_cause_first_and_the_newest_recommendation(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    sink = SpoolSink(home / "spool")
    for seed in range(6):
        run_session(home, sink, seed)
    sink.close()
    ingest(home)
    runner = CliRunner()
    found = json.loads(runner.invoke(app, ["postmortem", "--json", "--home", str(home)]).stdout)
    (home / "tuning").mkdir()
    old = home / "tuning" / "old-recommended.toml"
    old.write_text("warn = 0.5\n", encoding="utf-8")
    os.utime(old, (1_000_000_000, 1_000_000_000))  # written long before the newest run
    newest = home / "tuning" / "run2-recommended.toml"
    newest.write_text("# chosen on 4 sessions\nwarn = 0.55\n", encoding="utf-8")
    out = tmp_path / "report.html"

    done = runner.invoke(app, ["report", str(out), "--home", str(home)])

    assert done.exit_code == 0, done.output
    page = out.read_text(encoding="utf-8")
    postmortems = found["postmortems"]
    assert postmortems, "the synthetic sessions were meant to reach Emergency"
    sessions = Counter(p["session_id"] for p in postmortems)
    said = f"{len(sessions):,} session{'s' * (len(sessions) != 1)}"
    assert f"<p>{len(postmortems):,} emergencies in {said}" in page
    for sid, _n in sessions.most_common(10):  # no more than ten: each is in the sample
        causes = Counter(p["cause"] for p in postmortems if p["session_id"] == sid)
        most = max(causes.values())
        assert f"<td>{sid}</td>" in page
        assert any(f"<td>{c}</td>" in page for c, n in causes.items() if n == most)
    assert str(newest) in page and "warn = 0.55" in page and "warn = 0.5\n" not in page


def test_the_report_audits_the_harness_compactions_it_holds(tmp_path: Path) -> None:
    from tests.transcripts import NATIVE

    claude = sorted((NATIVE / "claude-code").rglob("*.jsonl"))
    if not claude:
        pytest.skip(f"{NATIVE} not present")
    home = tmp_path / "home"
    runner = CliRunner()
    assert runner.invoke(app, ["import", str(claude[0]), "--home", str(home)]).exit_code == 0
    found = json.loads(runner.invoke(app, ["audit", "--json", "--home", str(home)]).stdout)
    out = tmp_path / "report.html"

    done = runner.invoke(app, ["report", str(out), "--home", str(home)])

    assert done.exit_code == 0, done.output
    page = out.read_text(encoding="utf-8")
    assert found["compactions"]
    assert page.count("<td>claude-code ") == len(found["compactions"])
