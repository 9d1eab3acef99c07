"""One bad number in a transcript costs that number, never the file.

A token count or context window too large for any model (``10**30``: past the 64-bit integers
the events hold, so an event built from it failed validation and the import died with a
traceback, 0 sessions from the file), a float where a count belongs, or a figure that is no
number: each becomes null with one issue naming the file, the line and the field, and the rest
of the record (the other figures of the same usage, the compaction, every message) still
arrives, through the events the store is fed. Each format that reads such figures is written
here in a tmp dir, once per way of being bad.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analytics.importers import ImportedSession, ImportIssue, import_path
from analytics.importers.events import session_events
from analytics.importers.reading import MAX_COUNT
from tests.analytics.cli.test_cli_hostile_text import write_claude_code
from tests.analytics.cli_helpers import count, run
from tests.analytics.importers.test_native_bad_input import _conversation, _rollout

BIG = 10**30
BAD = [BIG, 1e30, MAX_COUNT + 1, "many", -3, True]
IDS = ["huge-int", "float", "just-past-the-bound", "text", "negative", "boolean"]


def _imported(path: Path) -> tuple[ImportedSession, list[ImportIssue]]:
    """The file's one session, after checking its events can be built (what ``import`` does
    with it next: a figure past 64 bits failed there)."""
    sessions, issues = import_path(path)
    [session] = sessions
    for event in session_events(session, "full"):
        assert event.type
    return session, issues


def _set(path: Path, old: str, new: object) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, old
    path.write_text(text.replace(old, json.dumps(new), 1), encoding="utf-8")


def _line_of(path: Path, needle: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, text in enumerate(lines, start=1) if needle in text)


# ---------------------------------------------------------------- Claude Code


@pytest.mark.parametrize("bad", BAD, ids=IDS)
def test_a_bad_claude_code_pre_tokens_keeps_the_compaction_with_its_size_estimated(
    tmp_path: Path, bad: object
) -> None:
    path = tmp_path / "cc.jsonl"
    write_claude_code(path, "s1", "claude-x")
    _set(path, "50000", bad)

    session, issues = _imported(path)

    [issue] = [i for i in issues if "preTokens" in i.reason]
    assert (issue.path, issue.line) == (str(path), _line_of(path, "compact_boundary"))
    assert "compactMetadata.preTokens" in issue.reason
    [compaction] = session.compactions
    assert compaction.tokens_before_source == "estimated" and compaction.tokens_before > 0
    assert len(session.messages) == 1 + 2 * 12


@pytest.mark.parametrize("bad", BAD, ids=IDS)
def test_a_bad_claude_code_usage_figure_is_null_and_the_other_figures_kept(
    tmp_path: Path, bad: object
) -> None:
    path = tmp_path / "cc.jsonl"
    write_claude_code(path, "s1", "claude-x")
    _set(path, "3000", bad)  # the third call's input_tokens

    session, issues = _imported(path)

    [issue] = [i for i in issues if "usage" in i.reason]
    assert (issue.path, issue.line) == (str(path), _line_of(path, '"id": "m2"'))
    assert "message.usage.input_tokens" in issue.reason and "left empty" in issue.reason
    third = session.turns[2]
    usage = session.usage_at(third)
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (None, 5)
    assert len(session.usage) == 12 and len(session.compactions) == 1


def test_a_claude_code_file_with_a_huge_figure_imports_and_replays_through_the_cli(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cc.jsonl"
    write_claude_code(path, "s1", "claude-x")
    _set(path, "50000", BIG)
    _set(path, "3000", BIG)
    home = tmp_path / "home"

    imported = run("import", path, "--home", home)
    replayed = run("replay", path, "--window", "16000", "--home", home)

    usage_line, boundary = _line_of(path, '"id": "m2"'), _line_of(path, "compact_boundary")
    for done in (imported, replayed):
        assert done.exit_code == 1, done.output  # the bad figures are named, nothing else
        said = f"{path}:{usage_line}: message.usage.input_tokens: expected a whole number"
        assert said in done.output and f"(lines {boundary}, 100)" in done.output, done.output
    assert count(home, "SELECT count(*) FROM sessions") == 2  # the import and its replay
    assert count(home, "SELECT count(*) FROM compactions WHERE origin = 'native'") == 1


# ---------------------------------------------------------------- Codex


@pytest.mark.parametrize("bad", BAD, ids=IDS)
def test_a_bad_codex_token_count_figure_is_null_and_the_rest_of_the_line_kept(
    tmp_path: Path, bad: object
) -> None:
    path = _rollout(tmp_path / "rollout.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[5] = lines[5].replace('"output_tokens": 10', f'"output_tokens": {json.dumps(bad)}')
    window = f'"model_context_window": {json.dumps(bad)}'
    lines[5] = lines[5].replace('"model_context_window": 200000', window)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    session, issues = _imported(path)

    [issue] = issues
    assert (issue.path, issue.line) == (str(path), 6)
    assert "payload.info.last_token_usage.output_tokens" in issue.reason
    assert "payload.info.model_context_window" in issue.reason
    assert [(u.message_index, u.input_tokens, u.output_tokens) for u in session.usage] == [
        (1, 1200, 10),
        (3, 1500, None),
    ]
    [compaction] = session.compactions
    assert (compaction.tokens_before, compaction.context_window) == (9000, 200_000)


@pytest.mark.parametrize("bad", BAD, ids=IDS)
def test_a_bad_codex_prompt_figure_still_counts_the_call(tmp_path: Path, bad: object) -> None:
    path = _rollout(tmp_path / "rollout.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[7] = lines[7].replace('"input_tokens": 9000', f'"input_tokens": {json.dumps(bad)}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    session, issues = _imported(path)

    [issue] = issues
    assert issue.line == 8 and "payload.info.last_token_usage.input_tokens" in issue.reason
    [compaction] = session.compactions  # the size Codex compacted is unknown: estimated
    assert compaction.tokens_before_source == "estimated" and compaction.tokens_before > 0
    assert [(u.message_index, u.input_tokens) for u in session.usage] == [(1, 1200), (3, 1500)]


# ---------------------------------------------------------------- OpenHands


@pytest.mark.parametrize("bad", BAD, ids=IDS)
def test_a_bad_openhands_sdk_context_size_or_usage_is_null_and_named(
    tmp_path: Path, bad: object
) -> None:
    root = tmp_path / "conv"
    _conversation(root)
    state_file = root / "event_service" / "base_state.json"
    state = json.loads(state_file.read_text(encoding="utf-8"))
    state["agent"]["llm"]["max_input_tokens"] = bad
    usage = {"response_id": "resp1", "prompt_tokens": bad, "completion_tokens": 7}
    usage |= {"cache_read_tokens": 5}
    state["stats"] = {"service_to_metrics": {"agent": {"token_usages": [usage]}}}
    state_file.write_text(json.dumps(state), encoding="utf-8")

    session, issues = _imported(tmp_path)

    assert {i.path for i in issues} == {str(state_file)}
    reasons = " ".join(i.reason for i in issues)
    assert "agent.llm.max_input_tokens" in reasons and "prompt_tokens" in reasons
    [compaction] = session.compactions
    assert compaction.context_window == 0
    assert [(u.input_tokens, u.output_tokens) for u in session.usage] == [(None, 7)]
    assert len(session.messages) == 8


def _v0(path: Path, bad: object) -> Path:
    usage = {"prompt_tokens": bad, "completion_tokens": 4}
    response = {"id": "r1", "model": "m", "usage": usage, "choices": []}
    meta = {"tool_call_id": "c1", "function_name": "bash", "model_response": response}
    metrics = {"accumulated_token_usage": {"context_window": bad}}
    events: list[dict[str, Any]] = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
        {"id": 2, "source": "agent", "action": "run", "tool_call_metadata": meta}
        | {"args": {"command": "ls", "thought": "look"}, "llm_metrics": metrics},
        {"id": 3, "source": "agent", "observation": "run", "content": "a.py"}
        | {"tool_call_metadata": {"tool_call_id": "c1"}},
        {"id": 4, "source": "agent", "action": "condensation"}
        | {"args": {"forgotten_event_ids": [2, 3], "summary": "looked", "summary_offset": 1}},
        {"id": 5, "source": "user", "action": "message", "args": {"content": "go on"}},
    ]
    path.write_text(json.dumps(events, indent=1), encoding="utf-8")
    return path


@pytest.mark.parametrize("bad", BAD, ids=IDS)
def test_a_bad_openhands_v0_figure_is_null_and_named_with_its_event(
    tmp_path: Path, bad: object
) -> None:
    path = _v0(tmp_path / "trajectory.json", bad)

    session, issues = _imported(path)

    assert {i.path for i in issues} == {str(path)}
    reasons = " ".join(i.reason for i in issues)
    assert "event [1] (id 2)" in reasons
    assert "context_window" in reasons and "prompt_tokens" in reasons
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "user"]
    assert [(u.input_tokens, u.output_tokens) for u in session.usage] == [(None, 4)]
    [compaction] = session.compactions
    assert compaction.context_window == 0 and compaction.summary_text == "looked"


# ---------------------------------------------------------------- mini-swe-agent, aider


@pytest.mark.parametrize("bad", BAD, ids=IDS)
def test_a_bad_mini_swe_agent_usage_figure_is_null_and_the_others_kept(
    tmp_path: Path, bad: object
) -> None:
    usage = {"prompt_tokens": bad, "completion_tokens": 3}
    doc = {
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": "x",
        "info": {},
        "messages": [
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "hi", "extra": {"response": {"usage": usage}}},
            {"role": "exit", "content": "", "extra": {"exit_status": "done"}},
        ],
    }
    path = tmp_path / "x.traj.json"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")

    session, issues = _imported(path)

    [issue] = issues
    assert "messages[1].extra.response.usage.prompt_tokens" in issue.reason
    assert [(u.input_tokens, u.output_tokens) for u in session.usage] == [(None, 3)]


@pytest.mark.parametrize(
    "sent", ["1.2.3", "9" * 400, f"{MAX_COUNT // 1000 + 1}k"], ids=["two-dots", "400-digits", "k"]
)
def test_a_bad_aider_token_figure_is_null_and_named_with_its_line(
    tmp_path: Path, sent: str
) -> None:
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(
        "# aider chat started at 2025-01-01 10:00:00\n\n#### fix it\n\nDone.\n\n"
        f"> Tokens: {sent} sent, 12 received.\n",
        encoding="utf-8",
    )

    session, issues = _imported(path)

    [issue] = issues
    assert (issue.path, issue.line) == (str(path), 7) and "sent" in issue.reason
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert [(u.input_tokens, u.output_tokens) for u in session.usage] == [(None, 12)]


def test_the_bound_is_far_above_any_real_figure_and_sums_of_a_million_fit_64_bits() -> None:
    assert MAX_COUNT > 100_000_000 and MAX_COUNT * 1_000_000 < 2**63
