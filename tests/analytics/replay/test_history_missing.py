"""Transcripts that start mid-session: marked, and their history never taken for a fixed prompt.

Issue 26 item 2. A Claude Code file cut after its first N lines (as a resumed session's file
begins) and the dev file that really starts mid-conversation are imported and replayed; every
figure they are checked against (the prompts the provider reported, whether the first line's
parent is in the file) is read from the raw JSONL lines here, not from the importer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analytics.importers import import_path
from analytics.importers.history import missing_history_tokens
from tests.analytics.cli_helpers import count, run
from tests.transcripts import NATIVE

COMPLETE = NATIVE / "claude-code/98/78b713483d/0/full.jsonl"
"""Starts at its beginning (its first line has no parent), compacts twice."""
MID = NATIVE / "claude-code/44/785715c3f5/2/full.jsonl"
"""Starts mid-conversation: its first prompt was 114,891 tokens, its messages a few hundred."""

pytestmark = pytest.mark.skipif(not COMPLETE.is_file(), reason=f"no transcript at {COMPLETE}")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _reported_prompts(lines: list[dict[str, Any]]) -> list[int]:
    """Every main-chain prompt the provider counted: input + cache writes + cache reads."""
    out = []
    for obj in lines:
        usage = (obj.get("message") or {}).get("usage") if obj.get("type") == "assistant" else None
        if usage and not obj.get("isSidechain"):
            out.append(
                sum(
                    int(usage.get(k) or 0)
                    for k in (
                        "input_tokens",
                        "cache_creation_input_tokens",
                        "cache_read_input_tokens",
                    )
                )
            )
    return out


def _cut(tmp_path: Path, n: int) -> Path:
    """The complete file without its first ``n`` lines, at a path of its own."""
    out = tmp_path / f"cut-{n}" / "session.jsonl"
    out.parent.mkdir(parents=True)
    text = COMPLETE.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text("".join(text[n:]), encoding="utf-8")
    return out


def _main(path: Path) -> Any:
    found, _issues = import_path(path)
    return next(s for s in found if not s.metadata.get("sidechain"))


def test_a_session_that_starts_at_its_beginning_is_not_marked() -> None:
    assert _lines(COMPLETE)[0].get("parentUuid") is None
    assert missing_history_tokens(_main(COMPLETE)) == 0


@pytest.mark.parametrize("n", [40, 120])
def test_a_session_cut_mid_way_is_marked(tmp_path: Path, n: int) -> None:
    cut = _cut(tmp_path, n)
    lines = _lines(cut)
    uuids = {obj.get("uuid") for obj in lines}
    first_parent = next(o["parentUuid"] for o in lines if "parentUuid" in o and o.get("uuid"))
    assert first_parent is not None and first_parent not in uuids  # the raw file says: cut
    assert _reported_prompts(lines)  # it still reports prompts to tell the size by
    assert missing_history_tokens(_main(cut)) > 0


@pytest.mark.parametrize("which", ["cut", "mid"])
def test_no_post_mortem_claims_a_fixed_prompt_over_the_smallest_reported_prompt(
    tmp_path: Path, which: str
) -> None:
    path = _cut(tmp_path, 120) if which == "cut" else MID
    smallest = min(_reported_prompts(_lines(path)))
    home = tmp_path / "home"
    replayed = run("replay", path, "--window", "16000", "--home", home)
    assert replayed.exit_code == 0, replayed.output
    marked = count(home, "SELECT count(*) FROM sessions WHERE history_missing_tokens > 0")
    assert marked >= 1
    found = run("postmortem", "--json", "--no-counterfactuals", "--home", home)
    assert found.exit_code == 0, found.output
    postmortems = json.loads(found.output)["postmortems"]
    assert postmortems  # a 16k window is far below these sessions: there are emergencies
    for pm in postmortems:
        assert pm["fixed_tokens"] is None or pm["fixed_tokens"] <= smallest, pm
        if pm["cause"] == "fixed_prompt":
            assert pm["window_needed"] <= smallest / 0.6 + 1, pm
