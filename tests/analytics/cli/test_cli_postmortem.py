"""``compactlens postmortem`` on the dev transcripts replayed at 16k: grouped, with progress.

The truth is read from the store with SQL (the effective Emergency compactions of live
sessions, per session) and from ``postmortem --json``'s per-emergency list, never from the
grouped output itself. The command runs as a real subprocess whose stdout and stderr are pipes
(as ``postmortem > file`` runs), on a copy of the replays no counterfactual was computed on, so
its replays happen in the run; a second run puts stderr on a pseudo-terminal, where the
progress is a live bar instead of lines.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from analytics.store import open_store
from tests.analytics.cli_helpers import run, subprocess_env
from tests.analytics.replayed import DevReplays

pytestmark = pytest.mark.integration

WINDOW = 16_000
COLUMNS = 80
SCREEN = 40
"""Lines a session's groups may take at 80 columns: one screen."""
PROGRESS = re.compile(r"^counterfactuals: ([\d,]+) of ([\d,]+) emergencies, session (\S+) \(")
DONE = re.compile(r"^counterfactuals: ([\d,]+) of ([\d,]+) emergencies replayed \(")
SESSION_HEAD = re.compile(r"^(\S+) — ([\d,]+) emergenc(?:y|ies)$")
GROUP_HEAD = re.compile(r"^  (\S+) × ([\d,]+) · (turns? [^·]+) · settled ([\d,]+)/([\d,]+) · ")

EMERGENCIES_SQL = """
    SELECT c.session_id, count(*) AS n FROM compactions c
    JOIN sessions s USING (session_id)
    WHERE c.tier = 4 AND coalesce(c.effective, true) AND s.deleted_at IS NULL
    GROUP BY 1
"""


def _matches(pattern: re.Pattern[str], lines: list[str]) -> list[re.Match[str]]:
    return [m for m in map(pattern.match, lines) if m is not None]


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _emergencies(home: Path) -> dict[str, int]:
    with open_store(home, read_only=True) as store:
        return {str(s): int(n) for s, n in store.query(EMERGENCIES_SQL).iter_rows()}


def _command(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "analytics.cli", "postmortem", *args, "--home", str(home)]


def _env() -> dict[str, str]:
    return {**subprocess_env(), "COLUMNS": str(COLUMNS)}


@pytest.fixture(scope="module")
def piped(dev_replays: DevReplays) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """(the home, ``postmortem`` run on it cold with stdout and stderr piped)."""
    home = dev_replays.fresh_home(WINDOW)
    # the timeout guards against a hang; it is no speed limit
    done = subprocess.run(_command(home), capture_output=True, text=True, env=_env(), timeout=1800)
    assert done.returncode == 0, done.stderr
    return home, done


@pytest.fixture(scope="module")
def every(piped: tuple[Path, subprocess.CompletedProcess[str]]) -> dict[str, Any]:
    """``postmortem --json`` after the piped run (its counterfactuals are stored by then)."""
    home, _done = piped
    result = run("postmortem", "--json", "--home", home)
    assert result.exit_code == 0, result.output
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def test_piped_postmortem_prints_progress_lines_on_stderr_while_it_replays(
    piped: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    home, done = piped
    emergencies = _emergencies(home)
    total = sum(emergencies.values())
    assert total, "no emergency at 16k: the test would prove nothing"

    lines = done.stderr.splitlines()

    steps = _matches(PROGRESS, lines)
    assert steps, done.stderr
    assert _number(steps[0][1]) == 0  # the first line comes before any replay ended
    assert {m[3] for m in steps} <= set(emergencies)  # each names a session with emergencies
    at = [_number(m[1]) for m in steps]
    assert at == sorted(at) and all(_number(m[1]) < _number(m[2]) <= total for m in steps)
    ends = _matches(DONE, lines)
    assert ends and _number(ends[-1][1]) == _number(ends[-1][2]) == total
    assert "counterfactuals:" not in done.stdout  # progress never mixes with the result


def test_the_summary_counts_the_stores_emergencies_sessions_and_causes(
    piped: tuple[Path, subprocess.CompletedProcess[str]], every: dict[str, Any]
) -> None:
    home, done = piped
    emergencies = _emergencies(home)
    causes = Counter(str(p["cause"] or "unknown") for p in every["postmortems"])
    pairs = {(p["session_id"], p["cause"]) for p in every["postmortems"]}

    text = " ".join(done.stdout.split("\n\n", 1)[0].split())  # the paragraph above the sessions

    assert (
        f"{sum(emergencies.values()):,} emergencies in {len(emergencies):,} sessions, "
        f"{len(pairs):,} groups"
    ) in text
    ranked = sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))  # ties by name
    assert "by cause: " + ", ".join(f"{c} {n:,}" for c, n in ranked) in text
    settled = sum(
        bool(p["smallest_change_verified"]) or p["window_needed"] is not None
        for p in every["postmortems"]
    )
    assert f"settled: {settled:,} of {sum(emergencies.values()):,}" in text


def _blocks(stdout: str) -> dict[str, list[str]]:
    """Each session's block of the output: its head line's session id, then its lines."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.split("\n\n", 1)[1].splitlines():
        if head := SESSION_HEAD.match(line):
            current = blocks.setdefault(head[1], [line])
        elif not line.strip():
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_each_session_is_one_screen_of_groups_by_cause(
    piped: tuple[Path, subprocess.CompletedProcess[str]], every: dict[str, Any]
) -> None:
    home, done = piped
    emergencies = _emergencies(home)
    members: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in every["postmortems"]:
        members.setdefault((p["session_id"], str(p["cause"])), []).append(p)

    blocks = _blocks(done.stdout)

    assert set(blocks) == set(emergencies)  # one block per session with emergencies
    assert max(len(b) for b in blocks.values()) <= SCREEN
    firsts = {line for b in blocks.values() for line in b[:1]}  # a session id is never cut
    assert max(len(line) for line in done.stdout.splitlines() if line not in firsts) <= COLUMNS
    for sid, block in blocks.items():
        session_head = SESSION_HEAD.match(block[0])
        assert session_head and _number(session_head[2]) == emergencies[sid]
        heads = _matches(GROUP_HEAD, block)
        assert {m[1] for m in heads} == {c for s, c in members if s == sid}
        for m in heads:
            items = members[(sid, m[1])]
            assert _number(m[2]) == _number(m[5]) == len(items)
            settled = [p["smallest_change_verified"] or p["window_needed"] for p in items]
            assert _number(m[4]) == sum(bool(s) for s in settled)
            assert m[3].strip() == _turns_text(sorted(p["turn"] for p in items))
    assert len(done.stdout.splitlines()) < len(every["postmortems"]) * 4  # was ~34 per emergency


def _turns_text(turns: list[int]) -> str:
    """The compact ranges written out here again: 2, 3, 4, 7 as "turns 2–4, 7"."""
    runs: list[list[int]] = []
    for t in turns:
        if runs and t <= runs[-1][1] + 1:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    shown = ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs)
    return f"turn{'s' if len(set(turns)) > 1 else ''} {shown}"


def test_json_keeps_each_emergency_and_adds_its_group(every: dict[str, Any]) -> None:
    found = every["postmortems"]

    groups = every["groups"]

    assert found and len(found) == sum(g["count"] for g in groups)
    by_id = {p["compaction_id"]: p for p in found}
    assert sorted(c for g in groups for c in g["compaction_ids"]) == sorted(by_id)
    for g in groups:
        assert {(by_id[c]["session_id"], by_id[c]["cause"]) for c in g["compaction_ids"]} == {
            (g["session_id"], g["cause"])
        }
        rep = by_id[g["representative"]["compaction_id"]]
        assert g["lead_up"] == rep["lead_up"] and g["fix"]["verified"] == bool(
            rep["smallest_change_verified"]
        )
    assert every["summary"]["emergencies"] == len(found)


def test_on_a_terminal_the_progress_is_a_bar_not_lines(
    dev_replays: DevReplays, every: dict[str, Any]
) -> None:
    counts = Counter(p["session_id"] for p in every["postmortems"])
    sid = min(counts, key=lambda s: (counts[s], s))  # the quickest to replay
    home = dev_replays.fresh_home(WINDOW)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        _command(home, sid, "--json"),
        stdout=subprocess.PIPE,
        stderr=follower,
        env={**_env(), "TERM": "xterm-256color"},
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        shown += chunk
    stdout, _ = proc.communicate(timeout=1800)
    os.close(leader)

    assert proc.returncode == 0, shown.decode(errors="replace")
    text = shown.decode(errors="replace")
    assert "counterfactuals" in text and f"{counts[sid]}/{counts[sid]} emergencies" in text
    assert not any(PROGRESS.match(line) for line in text.splitlines())
    assert len(json.loads(stdout)["postmortems"]) == counts[sid]


def test_each_session_fix_and_the_fleet_fix_are_said_once(
    piped: tuple[Path, subprocess.CompletedProcess[str]], every: dict[str, Any]
) -> None:
    _home, done = piped
    fixes = {s["session_id"]: s["session_fix"] for s in every.get("sessions") or []}
    assert any(f and f["verified"] for f in fixes.values()), "no session fix to check"

    blocks = _blocks(done.stdout)

    for sid, block in blocks.items():
        said = " ".join(" ".join(block).split())
        fix = fixes.get(sid)
        assert said.count("one fix for the session:") == (1 if fix else 0)
        if fix and fix["verified"]:
            assert f"one fix for the session: {fix['detail'] or fix['change']} (verified" in said
    fleet = every["summary"].get("fleet_fix")
    head = " ".join(done.stdout.split("\n\n", 1)[0].split())
    assert ("fleet fix:" in head) == bool(fleet)
    if fleet:
        assert f"of {fleet['sessions']:,} of the {fleet['of']:,} sessions" in head
