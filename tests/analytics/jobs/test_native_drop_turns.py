"""A harness's compactions in ``retention``: each silent drop names the turn it happened at,
counted from the raw transcript in this test (the model calls before the compaction), and no
drop is put down to "its cap" (a Claude Code summary has no cap we know of)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app

pytestmark = pytest.mark.integration

SESSION = Path("../shared/data/transcripts/native/claude-code/44/785715c3f5/2/full.jsonl")


def _raw_compaction_turns(path: Path) -> list[int]:
    """For each compact boundary: 1 + the model calls of the main thread before it (one call
    is one API message id, however many records its content blocks take)."""
    calls: set[str] = set()
    found = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") == "system" and record.get("subtype") == "compact_boundary":
            found.append(len(calls) + 1)
        elif record.get("type") == "assistant" and not record.get("isSidechain"):
            calls.add(str(record["message"]["id"]))
    return found


def _cli(home: Path, *args: str) -> str:
    done = CliRunner().invoke(app, [*args, "--home", str(home)])
    assert done.exit_code == 0, done.output
    return done.stdout


def test_native_silent_drops_have_the_turns_of_the_raw_file_and_no_cap(tmp_path: Path) -> None:
    if not SESSION.exists():
        pytest.skip(f"{SESSION} is not here")
    expected = _raw_compaction_turns(SESSION)
    assert len(expected) >= 2, "the test needs a drop between two compactions"
    _cli(tmp_path, "import", str(SESSION))
    drops: list[dict[str, Any]] = json.loads(_cli(tmp_path, "retention", "--json"))["silent_drops"]
    assert drops, "no silent drop: the test would prove nothing"
    for drop in drops:
        assert drop["introduced_turn"] in expected, drop
        assert drop["dropped_turn"] in expected, drop
        assert drop["dropped_turn"] > drop["introduced_turn"], drop
        assert drop["reason"] != "cap", drop
