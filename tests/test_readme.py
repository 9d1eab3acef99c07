"""The README's agent-loop example runs as written, against a scripted model."""

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


def _layout_block() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Layout", 1)[1]
    match = re.search(r"```\n(.*?)```", section, re.DOTALL)
    assert match, "the README lost its layout picture"
    return match.group(1)


ANALYTICS = README.parent / "analytics"


@pytest.mark.parametrize(
    "room", sorted(p.name for p in ANALYTICS.iterdir() if (p / "__init__.py").exists())
)
def test_the_layout_picture_names_every_analytics_room_and_its_modules(room: str) -> None:
    block = _layout_block()
    line = re.search(rf"^  {room}/ .*(?:\n {{18}}.*)*", block, re.MULTILINE)
    assert line, f"README's layout has no line for analytics/{room}/"
    modules = {p.stem for p in (ANALYTICS / room).glob("*.py") if not p.stem.startswith("__")}
    missing = sorted(m for m in modules if not re.search(rf"\b{m}\b", line.group(0)))
    assert not missing, f"README's layout line for {room}/ misses {missing}"


def test_the_layout_picture_names_no_analytics_module_that_is_gone() -> None:
    block = _layout_block()
    named = set(re.findall(r"\b([a-z_]+)\.py\b", block.split("app/ ", 1)[0]))
    existing = {p.stem for p in (README.parent / "analytics").rglob("*.py")}
    existing |= {p.stem for p in (README.parent / "compactor").rglob("*.py")}
    assert named <= existing, sorted(named - existing)
