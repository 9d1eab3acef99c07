"""Text from transcripts printed by the command line: shown as written, never read as rich markup.

A session id, a model name or a file name is data: a ``[/bold]`` in it must not close a style
(rich raised ``MarkupError``, the command exited 1), and ``:smile:`` or the ``:100:`` of
``path:100: reason`` must not become an emoji. A small Claude Code transcript with a compaction
of its own is written in a tmp dir under such a name, imported, replayed at a window too small
for it (so there are emergencies to explain, naming the tool ``Bash:fire:[/i]``) and read back
by ``postmortem``, ``stats --by model`` and ``audit``; every one exits 0 and prints the strings
literally.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.analytics.cli_helpers import run

SESSION = "[/bold]z:smile:"
MODEL = "gpt-4o[/]:thumbs_up:"
TOOL = "Bash:fire:[/i]"
FILE_NAME = "x:smile:y.jsonl"
WINDOW = "3000"
BAD_LINE = 100


def write_claude_code(
    path: Path,
    session_id: str,
    model: str,
    turns: int = 12,
    *,
    words: str = "",
    tool: str = TOOL,
    bad_line: bool = True,
) -> None:
    """A Claude Code session: a request, ``turns`` tool calls with sizeable results, one
    compact boundary with its summary halfway, and a bad line at ``BAD_LINE`` (unless not
    ``bad_line``); ``words`` join the request, the tool results and the summary's request, and
    every call is to ``tool``."""
    base = {"isSidechain": False, "sessionId": session_id, "cwd": "/w", "version": "2.0.76"}
    base["timestamp"] = "2026-01-05T15:00:00.000Z"
    rows: list[dict[str, Any]] = []
    parent: list[str | None] = [None]

    def add(uuid: str, **fields: Any) -> None:
        rows.append({**base, "parentUuid": parent[0], "uuid": uuid, **fields})
        parent[0] = uuid

    request = f"fix the bug in src/app.py {words}".strip()
    add("u0", type="user", message={"role": "user", "content": request})
    for t in range(turns):
        call = {"type": "tool_use", "id": f"t{t}", "name": tool, "input": {"command": "ls"}}
        message = {
            "model": model,
            "id": f"m{t}",
            "role": "assistant",
            "content": [{"type": "text", "text": f"step {t}"}, call],
            "usage": {"input_tokens": 1000 * (t + 1), "output_tokens": 5},
        }
        add(f"a{t}", type="assistant", message=message)
        output = f"{words}\n" + "x = 1\n" * 400 if words else "x = 1\n" * 400
        result = {"type": "tool_result", "tool_use_id": f"t{t}", "content": output}
        add(f"r{t}", type="user", message={"role": "user", "content": [result]})
        if t == turns // 2:
            meta = {"trigger": "auto", "preTokens": 50_000}
            rows.append(
                {**base, "parentUuid": None, "logicalParentUuid": parent[0], "uuid": "b1"}
                | {"type": "system", "subtype": "compact_boundary", "compactMetadata": meta}
            )
            parent[0] = "b1"
            summary = f"Summary:\n1. Primary Request and Intent: fix src/app.py {words}".strip()
            message = {"role": "user", "content": summary}
            add("s1", type="user", isCompactSummary=True, message=message)
    lines = [json.dumps(r) for r in rows]
    if bad_line:
        assert len(lines) < BAD_LINE
        lines += [""] * (BAD_LINE - 1 - len(lines)) + ['{"type": "user", "uuid": ']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-text")
    path = root / FILE_NAME
    write_claude_code(path, SESSION, MODEL)
    home = root / "home"
    imported = run("import", path, "--home", home)
    assert imported.exit_code == 1, imported.output  # the bad line is rejected, the rest kept
    replayed = run("replay", path, "--window", WINDOW, "--home", home)
    assert replayed.exit_code == 1, replayed.output
    return home


def test_a_problem_line_shows_the_file_name_and_line_number_as_written(home: Path) -> None:
    again = run("import", home.parent / FILE_NAME, "--home", home)
    assert again.exit_code == 1
    assert f"{home.parent / FILE_NAME}:{BAD_LINE}: invalid JSON" in again.output, again.output
    assert "😄" not in again.output and "💯" not in again.output


def test_postmortem_prints_a_session_id_holding_markup_and_emoji_codes_as_written(
    home: Path,
) -> None:
    done = run("postmortem", "--home", home)
    assert done.exit_code == 0, done.output
    assert f"{SESSION}@{WINDOW}#" in done.stdout
    assert f"from {TOOL})" in done.stdout  # a burst's sentence names the tool that answered
    assert "😄" not in done.stdout and "🔥" not in done.stdout


def test_stats_by_model_prints_a_model_holding_markup_as_written(home: Path) -> None:
    done = run("stats", "--by", "model", "--home", home)
    assert done.exit_code == 0, done.output
    assert MODEL in done.stdout
    assert "👍" not in done.stdout


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal wide enough that no table cell folds an id (whatever COLUMNS the run has):
    what is checked is that the text is printed as written, not how a narrow table wraps it."""
    monkeypatch.setenv("COLUMNS", "250")


def test_audit_prints_a_session_id_holding_markup_as_written(home: Path) -> None:
    done = run("audit", "--home", home)
    assert done.exit_code == 0, done.output
    assert SESSION in done.stdout
    one = run("audit", SESSION, "--home", home)
    assert one.exit_code == 0 and SESSION in one.stdout, one.output
