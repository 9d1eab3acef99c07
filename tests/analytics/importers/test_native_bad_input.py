"""Bad native transcripts: a clear issue naming the file and line, the rest still imported.

Small Codex rollouts and OpenHands conversation folders are written here in tmp dirs (the real
files are only read in place, elsewhere); each is broken in one way and the test checks both
the issue and that everything valid beside it came through, its compaction included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analytics.importers import TranscriptError, detect_format, import_path, iter_sessions
from analytics.importers.events import session_events
from analytics.importers.reading import check_readable
from compactor.events import CompactionRecorded


def _item(kind: str, payload: dict[str, Any], at: str = "2026-02-04T17:12:33.000Z") -> str:
    return json.dumps({"timestamp": at, "type": kind, "payload": payload})


def _text(role: str, text: str) -> str:
    kind = "output_text" if role == "assistant" else "input_text"
    content = [{"type": kind, "text": text}]
    return _item("response_item", {"type": "message", "role": role, "content": content})


def _tokens(prompt: int, total: int) -> str:
    usage = {"input_tokens": prompt, "cached_input_tokens": 0, "output_tokens": 10}
    info = {
        "total_token_usage": {"total_tokens": total},
        "last_token_usage": usage,
        "model_context_window": 200_000,
    }
    return _item("event_msg", {"type": "token_count", "info": info})


def _rollout(path: Path, cut_line: int | None = None) -> Path:
    lines = [
        _item("session_meta", {"id": "rollout-1", "cwd": "/w", "cli_version": "0.58.0"}),
        _text("user", "## My request for Codex:\nfix the failing cache test"),
        _tokens(1200, 1),
        _item(
            "response_item",
            {
                "type": "function_call",
                "name": "shell",
                "arguments": '{"command":["ls"]}',
                "call_id": "c1",
            },
        ),
        _item("response_item", {"type": "function_call_output", "call_id": "c1", "output": "a.py"}),
        _tokens(1500, 2),
        _text("assistant", "I will edit a.py next."),
        _tokens(9000, 3),
        _item("compacted", {"message": "**Next Steps**\n- edit a.py\n- rerun the tests"}),
        _text("user", "## My request for Codex:\ncontinue"),
    ]
    if cut_line is not None:
        lines[cut_line - 1] = lines[cut_line - 1][:40]  # the write stopped mid-line
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_truncated_codex_line_is_one_issue_naming_file_and_line_and_the_rest_imports(
    tmp_path: Path,
) -> None:
    path = _rollout(tmp_path / "rollout.jsonl", cut_line=7)
    sessions, issues = import_path(path)

    [issue] = issues
    assert (issue.path, issue.line) == (str(path), 7)
    assert "cut short" in issue.reason and "line skipped" in issue.reason
    [session] = sessions
    assert session.format == "codex"
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "user"]
    assert session.messages[1].tool_calls[0].id == "c1"
    [compaction] = session.compactions
    assert (compaction.at, compaction.tokens_before) == (3, 9000)
    assert compaction.tokens_before_source == "harness"
    next_steps = [a for a in compaction.anchors if a.type == "next_step"]
    assert next_steps[0].items == ["edit a.py", "rerun the tests"]


def test_an_intact_codex_rollout_keeps_the_tool_result_and_usage(tmp_path: Path) -> None:
    path = _rollout(tmp_path / "rollout.jsonl")
    assert detect_format(path) == "codex"
    [session] = iter_sessions(path)
    assert [m.role for m in session.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert [(u.message_index, u.input_tokens, u.prompt) for u in session.usage] == [
        (1, 1200, "history"),
        (3, 1500, "history"),
    ]


# ---------------------------------------------------------------- OpenHands SDK folders


def _event(kind: str, n: int, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "id": f"e{n}", "timestamp": f"2025-09-25T19:00:{n:02d}", **fields}


def _action(n: int, call: str, response: str) -> dict[str, Any]:
    tool_call = {"id": call, "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    return _event(
        "ActionEvent",
        n,
        source="agent",
        thought=[{"type": "text", "text": f"step {n}"}],
        action={"kind": "ExecuteBashAction", "command": "ls"},
        tool_name="bash",
        tool_call_id=call,
        tool_call=tool_call,
        llm_response_id=response,
    )


def _observation(n: int, call: str) -> dict[str, Any]:
    observation = {
        "kind": "ExecuteBashObservation",
        "output": f"out {n}",
        "metadata": {"exit_code": 0},
    }
    return _event(
        "ObservationEvent", n, source="environment", tool_call_id=call, observation=observation
    )


def _conversation(root: Path) -> list[dict[str, Any]]:
    """System, task, three call/result pairs, then a condensation forgetting the first two."""
    events = [
        _event(
            "SystemPromptEvent", 0, source="agent", system_prompt={"type": "text", "text": "sys"}
        ),
        _event(
            "MessageEvent",
            1,
            source="user",
            llm_message={"role": "user", "content": [{"type": "text", "text": "fix the bug"}]},
        ),
    ]
    for k in range(3):
        events += [_action(2 + 2 * k, f"call{k}", f"resp{k}"), _observation(3 + 2 * k, f"call{k}")]
    events.append(
        _event(
            "Condensation",
            8,
            source="environment",
            forgotten_event_ids=["e2", "e3", "e4", "e5"],
            summary="USER_CONTEXT: fix the bug\nPENDING:\n- run the tests",
            summary_offset=2,
        )
    )
    service = root / "event_service"
    (service / "events").mkdir(parents=True)
    state = {"id": "conv-1", "agent": {"llm": {"model": "m", "max_input_tokens": 100_000}}}
    (service / "base_state.json").write_text(json.dumps(state), encoding="utf-8")
    for n, event in enumerate(events):
        name = f"event-{n:05d}-{event['id']}.json"
        (service / "events" / name).write_text(json.dumps(event), encoding="utf-8")
    return events


def test_an_openhands_folder_is_one_session_with_its_condensation(tmp_path: Path) -> None:
    _conversation(tmp_path / "conv")
    sessions, issues = import_path(tmp_path)

    assert issues == []
    [session] = sessions
    assert (session.format, session.session_id) == ("openhands-sdk", "conv-1")
    roles = ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert [m.role for m in session.messages] == roles
    [compaction] = session.compactions
    summary = compaction.after[2]
    assert compaction.after[:2] == [0, 1] and compaction.after[3:] == [6, 7]
    assert not isinstance(summary, int) and summary.content.startswith("USER_CONTEXT")
    assert compaction.replaced == [2, 3, 4, 5]
    [event] = [e for e in session_events(session, "full") if e.type == "compaction_recorded"]
    assert isinstance(event.payload, CompactionRecorded)
    statuses = [v.status for v in event.payload.before]
    assert statuses == ["system", "kept", *["summarized"] * 4, "kept", "kept"]


def test_a_missing_and_a_garbled_openhands_event_file_are_issues_naming_them(
    tmp_path: Path,
) -> None:
    root = tmp_path / "conv"
    _conversation(root)
    events = root / "event_service" / "events"
    garbled = next(events.glob("event-00003-*.json"))
    garbled.write_text(
        '{"kind": "ObservationEvent",\n "id": "e3", "tool_call_id": ', encoding="utf-8"
    )
    next(events.glob("event-00006-*.json")).unlink()

    sessions, issues = import_path(tmp_path)

    by_path = {i.path: i for i in issues}
    assert set(by_path) == {str(garbled), str(root)}
    assert by_path[str(garbled)].line == 2 and "event skipped" in by_path[str(garbled)].reason
    gap = by_path[str(root)].reason
    assert "event-00006-*.json missing" in gap and "event-00007" in gap
    [session] = sessions
    roles = ["system", "user", "assistant", "assistant", "tool", "tool"]
    assert [m.role for m in session.messages] == roles
    assert len(session.compactions) == 1


def test_one_event_file_named_alone_says_to_import_its_conversation_folder(
    tmp_path: Path,
) -> None:
    root = tmp_path / "conv"
    _conversation(root)
    one = next((root / "event_service" / "events").glob("event-00001-*.json"))

    sessions, issues = import_path(one)

    assert sessions == []
    [issue] = issues
    assert issue.path == str(one) and "import that folder" in issue.reason
    assert str(root) in issue.reason


def test_a_conversation_folder_passes_the_readable_check_and_an_empty_event_is_one_issue(
    tmp_path: Path,
) -> None:
    root = tmp_path / "conv"
    _conversation(root)
    empty = next((root / "event_service" / "events").glob("event-00005-*.json"))
    empty.write_bytes(b"")
    plain = tmp_path / "plain"
    plain.mkdir()

    check_readable(root)  # what the command line checks before handing it to an importer
    with pytest.raises(TranscriptError, match="not a regular file"):
        check_readable(plain)
    sessions, issues = import_path(root)

    [issue] = issues
    assert issue.path == str(empty) and "event skipped" in issue.reason
    [session] = sessions
    assert len(session.compactions) == 1
