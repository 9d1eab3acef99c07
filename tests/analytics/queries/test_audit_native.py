"""``compactlens audit`` on the real Claude Code sessions that compacted themselves.

The truth is read here from the raw JSONL lines: the ``compact_boundary`` lines of the main
chain, in file order, and the ``Read`` tool calls before and after each. For each native
compaction, every file read before it and read again after it (before the next one) is among
its ``re_reads``; no artifact is reported lost that the summary (the raw ``isCompactSummary``
line's text) names: by the path, a tail of two or more of its segments or its file name that no
other reported path has, each as a whole (``names`` in ``tests/analytics/jobs/native_audit.py``;
issue 27: ``test.go`` is not named by ``checkpoint_test.go``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.importers import import_path
from tests.analytics.jobs.native_audit import names
from tests.transcripts import NATIVE

CLAUDE = sorted((NATIVE / "claude-code").rglob("*.jsonl")) if NATIVE.is_dir() else []
needs_data = pytest.mark.skipif(not CLAUDE, reason=f"{NATIVE} not present")


def _raw(path: Path) -> tuple[list[set[str]], list[str]]:
    """(files read by the Read tool between boundaries: one set per stretch, summaries)."""
    stretches: list[set[str]] = [set()]
    summaries: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("isSidechain"):
            continue
        if row.get("type") == "system" and row.get("subtype") == "compact_boundary":
            stretches.append(set())
        elif row.get("isCompactSummary"):
            content = row["message"]["content"]
            text = (
                content
                if isinstance(content, str)
                else " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            )
            summaries.append(text)
        elif row.get("type") == "assistant":
            for part in row["message"].get("content") or []:
                read = isinstance(part, dict) and part.get("name") == "Read"
                if read and part.get("type") == "tool_use" and part["input"].get("file_path"):
                    stretches[-1].add(part["input"]["file_path"])
    return stretches, summaries


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    home = tmp_path_factory.mktemp("native")
    runner = CliRunner()
    done = runner.invoke(app, ["import", *map(str, CLAUDE), "--home", str(home)])
    assert done.exit_code == 0, done.output
    found = json.loads(runner.invoke(app, ["audit", "--json", "--home", str(home)]).stdout)
    by_session: dict[str, list[dict[str, Any]]] = {}
    for entry in found["compactions"]:
        by_session.setdefault(entry["session_id"], []).append(entry)
    return {sid: sorted(v, key=lambda e: e["history_at"]) for sid, v in by_session.items()}


def _main_session(path: Path) -> str:
    sessions, _issues = import_path(path)
    (main,) = [s for s in sessions if s.parent_session_id is None]
    return main.session_id


@needs_data
@pytest.mark.parametrize("path", CLAUDE, ids=[p.parent.parent.name for p in CLAUDE])
def test_every_file_read_before_and_after_a_compaction_is_a_re_read(
    path: Path, audited: dict[str, list[dict[str, Any]]]
) -> None:
    stretches, _summaries = _raw(path)
    entries = audited[_main_session(path)]
    assert len(entries) == len(stretches) - 1  # one audit entry per boundary
    for k, entry in enumerate(entries):
        before = set().union(*stretches[: k + 1])
        expected = before & stretches[k + 1]
        assert expected <= set(entry["re_reads"]), (k, expected - set(entry["re_reads"]))
        assert entry["harness"] == "claude-code" and entry["tokens_before_source"] == "harness"


@needs_data
@pytest.mark.parametrize("path", CLAUDE, ids=[p.parent.parent.name for p in CLAUDE])
def test_no_artifact_is_reported_lost_that_the_summary_names(
    path: Path, audited: dict[str, list[dict[str, Any]]]
) -> None:
    _stretches, summaries = _raw(path)
    entries = audited[_main_session(path)]
    assert len(entries) == len(summaries)
    for entry, summary in zip(entries, summaries, strict=True):
        every = entry["artifacts"]["kept"] + entry["artifacts"]["lost"]
        paths = [a for a in every if not any(c.isspace() for c in a)]
        for artifact in entry["artifacts"]["lost"]:
            assert not names(summary, artifact, paths), artifact
        assert entry["artifacts"]["kept"], "a summary names none of what it replaced?"
