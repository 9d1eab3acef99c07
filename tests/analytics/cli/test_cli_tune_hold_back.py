"""``tune --hold-back``: the files a user names are the held-back side, whatever their names, and
a name that is not among the transcripts, or one that leaves nothing to tune on, is refused
before anything is replayed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.analytics.cli.test_cli_hostile_text import write_claude_code
from tests.analytics.cli_helpers import run

GRID = "warn = [0.6]\n"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Four small Claude Code sessions, one per project folder."""
    for k in range(4):
        (tmp_path / "t" / f"p{k}").mkdir(parents=True)
        write_claude_code(
            tmp_path / "t" / f"p{k}" / "s.jsonl", f"s{k}", "claude", 4 + k, bad_line=False
        )
    (tmp_path / "grid.toml").write_text(GRID, encoding="utf-8")
    return tmp_path


def _tune(folder: Path, *extra: str | Path) -> tuple[int, str]:
    """``tune --json`` of the four sessions with one small config; its exit code and output."""
    done = run(
        *("tune", folder / "t", "--window", "3000", "--workers", "0", "--json"),
        *("--strategies", "progressive", "--grid", folder / "grid.toml"),
        *("--home", folder / "home", *extra),
    )
    return done.exit_code, done.stdout if done.exit_code == 0 else done.output


@pytest.mark.parametrize("names", [["p0"], ["p1", "p3"]])
def test_the_named_files_and_folders_are_the_held_back_side(folder: Path, names: list[str]) -> None:
    code, out = _tune(folder, *(a for n in names for a in ("--hold-back", folder / "t" / n)))
    assert code == 0, out
    found = json.loads(out)

    held = found["recommended"]["held_back_sessions"]
    assert sorted(Path(p).parent.name for p in held) == sorted(names)
    assert found["recommended"]["held_back"]["sessions"] == len(names)


def test_a_hold_back_path_outside_the_transcripts_is_named_and_nothing_is_replayed(
    folder: Path,
) -> None:
    stray = folder / "elsewhere.jsonl"
    write_claude_code(stray, "x", "claude", 4)
    code, out = _tune(folder, "--hold-back", stray)

    assert code == 1, out
    assert stray.name in out
    assert "no session of the transcripts given comes from it" in " ".join(out.split())
    assert not (folder / "home" / "tuning").exists()  # refused before any trial


def test_holding_back_every_file_is_refused(folder: Path) -> None:
    code, out = _tune(folder, "--hold-back", folder / "t")

    assert code == 1, out
    assert "holds back all 4 transcript file(s)" in " ".join(out.split())
