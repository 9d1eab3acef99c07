"""Claude Code's ``compactMetadata.postTokens`` (newer versions): its own count of the
conversation a compaction left is the compaction's ``tokens_after``, marked as the harness's;
without it (older versions) the size after is estimated from the summary, as before; a figure
that is not a count is named where it is and the compaction kept, its size after estimated.

Each file is written as Claude Code writes it, imported and audited through the command line,
and the figures are checked against the file's own boundary line and summary, read here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compactor import Message, estimate_tokens
from tests.analytics.cli.test_cli_hostile_text import write_claude_code
from tests.analytics.cli_helpers import run


def _written(path: Path, post_tokens: object) -> dict[str, Any]:
    """A Claude Code session with one compaction whose boundary says ``postTokens`` (left out
    when None); the file's compact summary line, as written."""
    write_claude_code(path, "s1", "claude-x", bad_line=False)
    rows: list[dict[str, Any]] = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
    ]
    for row in rows:
        if row.get("subtype") == "compact_boundary" and post_tokens is not None:
            row["compactMetadata"]["postTokens"] = post_tokens
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (summary,) = [r for r in rows if r.get("isCompactSummary")]
    return summary


def _audited(path: Path, home: Path) -> tuple[int, str, dict[str, Any]]:
    done = run("import", path, "--home", home)
    audit = run("audit", "--json", "--home", home)
    assert audit.exit_code == 0, audit.output
    (entry,) = json.loads(audit.stdout)["compactions"]
    return done.exit_code, done.output, entry


def test_post_tokens_is_the_size_after_as_the_harness_counted_it(tmp_path: Path) -> None:
    _written(tmp_path / "cc.jsonl", 3_456)

    code, output, entry = _audited(tmp_path / "cc.jsonl", tmp_path / "home")

    assert code == 0, output
    assert (entry["tokens_after"], entry["tokens_after_source"]) == (3_456, "harness")
    assert (entry["tokens_before"], entry["tokens_before_source"]) == (50_000, "harness")


def test_without_post_tokens_the_size_after_is_the_summary_s_estimate(tmp_path: Path) -> None:
    summary = _written(tmp_path / "cc.jsonl", None)

    code, output, entry = _audited(tmp_path / "cc.jsonl", tmp_path / "home")

    assert code == 0, output
    text = summary["message"]["content"]
    assert entry["tokens_after"] == estimate_tokens([Message(role="user", content=text)])
    assert entry["tokens_after_source"] == "estimated"


@pytest.mark.parametrize("bad", ["many", -5, 1.5e30, True])
def test_a_post_tokens_that_is_no_count_is_named_and_the_compaction_kept(
    tmp_path: Path, bad: object
) -> None:
    path = tmp_path / "cc.jsonl"
    summary = _written(path, bad)
    boundary = next(
        n
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if "compact_boundary" in line
    )

    code, output, entry = _audited(path, tmp_path / "home")

    assert code == 1, output  # a problem was reported
    said = " ".join(output.split())
    assert f"cc.jsonl:{boundary}" in said and "compactMetadata.postTokens" in said
    assert "its size after estimated" in said
    text = summary["message"]["content"]
    assert entry["tokens_after"] == estimate_tokens([Message(role="user", content=text)])
    assert entry["tokens_after_source"] == "estimated"
