"""The README: its agent-loop example runs as written (against a scripted model), it stays
short, and its links lead to files that exist. The layout picture moved to the docs
(tests/test_docs.py checks it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compactor.events import parse_event
from tests.readme_driver import run_agent_loop

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_agent_loop_runs_compacts_and_spools_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    model, namespace = run_agent_loop(README, turns=60)

    assert len(model.views) == 60
    printed = capsys.readouterr().out
    assert "Context compacted" in printed
    window = namespace["compactor"].context_window  # type: ignore[attr-defined]
    assert max(sum(len(m.content) for m in v) // 4 for v in model.views) < window
    records = (tmp_path / ".compactlens" / "records" / "session-1.jsonl").read_text()
    assert records.count("\n") >= 1
    offloads = tmp_path / ".compactlens" / "tool_results" / "session-1"
    assert any(offloads.iterdir())
    lines = [
        line
        for f in (tmp_path / "data" / "spool").glob("*.jsonl")
        for line in open(f)  # noqa: SIM115
    ]
    types = {parse_event(line).type for line in lines}
    assert {"session_started", "message_appended", "compaction_recorded"} <= types


def test_the_readme_stays_under_150_lines() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < 150, f"README.md has {lines} lines: move detail to docs/"


def test_the_readme_links_only_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(((?!https?://)[^)#]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links to no docs page"
    missing = sorted(t for t in targets if not (README.parent / t).exists())
    assert not missing, f"README.md links to missing files: {missing}"
