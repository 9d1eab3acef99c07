"""Transcript importers against the real dev transcripts (counts from manifest.json) and bad input.

How the per-file figures are compared with manifest.json (SOURCES.md describes its counting);
nothing is hard-coded, every expected figure is read from the manifest:

- tau-bench (``openai``): one session per run, in file order; messages, tool calls (on assistant
  messages) and tool results (messages with ``tool_call_id``) compare exactly, per session.
- mini-swe-agent: the manifest also counts the final ``exit`` message, which the importer keeps
  as metadata, so messages = ``len(messages) + 1`` when ``exit`` is there; calls and results exact.
- SWE-agent: messages = ``len(history)`` exactly (demonstrations are kept). Function-calling
  files: calls and results exact. Other files have no call ids, so they have no tool calls; the
  manifest counts the ``trajectory`` steps as calls (``metadata["actions"]``) and the
  observations as results (user messages after the task, demos excluded, computed here).
- Claude Code: the manifest treats each file as one session and counts user + assistant JSONL
  lines; the importer merges lines of one API response and splits sub-agent chains into their own
  sessions, so the file's sessions are summed: ``metadata["source_lines"]`` against messages,
  and tool calls / tool results from the messages, exactly.
- aider: one session per chat start (text before the first header is chat 0); the manifest's
  messages are the non-blank ``#### `` lines, i.e. the non-blank lines of our user messages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analytics.importers import (
    ImportedSession,
    ImportIssue,
    TranscriptError,
    detect_format,
    import_path,
    import_records,
    iter_records,
    iter_sessions,
)
from tests.transcripts import DEV, TRANSCRIPTS

MANIFEST = TRANSCRIPTS / "manifest.json"
OUR_FORMAT = {
    "tau-bench-openai-chat": "openai",
    "claude-code-jsonl": "claude-code",
    "swe-agent-traj": "swe-agent",
    "mini-swe-agent-traj": "mini-swe-agent",
    "aider-chat-md": "aider",
}
needs_data = pytest.mark.skipif(not MANIFEST.exists(), reason=f"{TRANSCRIPTS} not present")


def _manifest() -> list[dict[str, Any]]:
    if not MANIFEST.exists():
        return []
    return [f for f in json.loads(MANIFEST.read_text()) if f["split"] == "dev"]


DEV_FILES = _manifest()
Figures = tuple[int, int, int]


@pytest.fixture(scope="module")
def imported() -> dict[str, list[ImportedSession]]:
    """Every dev file imported once: manifest file name → its sessions (no issues allowed)."""
    out: dict[str, list[ImportedSession]] = {}
    for entry in DEV_FILES:
        issues: list[ImportIssue] = []
        out[entry["file"]] = list(iter_sessions(TRANSCRIPTS / entry["file"], issues=issues))
        assert issues == [], f"{entry['file']}: {[str(i) for i in issues]}"
    return out


def _ids(entry: dict[str, Any]) -> str:
    return str(entry["file"]).rsplit("/", 1)[-1]


def _expected(entry: dict[str, Any]) -> list[Figures]:
    return [(s["messages"], s["tool_calls"], s["tool_results"]) for s in entry["sessions"]]


def _figures(fmt: str, sessions: list[ImportedSession]) -> list[Figures]:
    """Our figures, made comparable with the manifest's counting (see the module docstring)."""
    if fmt == "claude-code-jsonl":
        lines = sum(s.metadata["source_lines"] for s in sessions)
        calls = sum(s.tool_call_count for s in sessions)
        return [(lines, calls, sum(s.tool_result_count for s in sessions))]
    return [_session_figures(fmt, s) for s in sessions]


def _session_figures(fmt: str, s: ImportedSession) -> Figures:
    if fmt == "mini-swe-agent-traj":
        return (len(s.messages) + ("exit" in s.metadata), s.tool_call_count, s.tool_result_count)
    if fmt == "swe-agent-traj" and not s.metadata["function_calling"]:
        users = sum(1 for m in s.messages if m.role == "user")
        observations = users - s.metadata["demo_messages"] - 1
        assert observations == s.metadata["observations"]
        assert s.tool_call_count == 0
        return (len(s.messages), s.metadata["actions"], observations)
    if fmt == "aider-chat-md":
        inputs = [ln for m in s.messages if m.role == "user" for ln in m.content.split("\n")]
        return (sum(1 for ln in inputs if ln.strip()), s.tool_call_count, s.tool_result_count)
    return (len(s.messages), s.tool_call_count, s.tool_result_count)


# ---------------------------------------------------------------- the dev transcripts


@needs_data
@pytest.mark.parametrize("entry", DEV_FILES, ids=_ids)
def test_dev_transcript_counts_agree_with_manifest(
    entry: dict[str, Any], imported: dict[str, list[ImportedSession]]
) -> None:
    sessions = imported[entry["file"]]
    assert sessions, f"{entry['file']} produced no sessions"
    assert _figures(entry["format"], sessions) == _expected(entry)
    for s in sessions:
        assert s.format == OUR_FORMAT[entry["format"]]
        assert s.metadata["source_sha256"] == entry["sha256"]
        assert all(u.message_index in s.turns for u in s.usage), "usage must sit on a turn"


@needs_data
@pytest.mark.parametrize(
    "entry", [e for e in DEV_FILES if any(s["has_usage"] for s in e["sessions"])], ids=_ids
)
def test_provider_usage_gives_the_manifest_peak_context(
    entry: dict[str, Any], imported: dict[str, list[ImportedSession]]
) -> None:
    """Peak prompt size from our per-turn usage equals the manifest's peak context tokens."""
    sessions = imported[entry["file"]]

    def peak(group: list[ImportedSession]) -> int | None:
        sizes = [u.input_tokens for s in group for u in s.usage if u.input_tokens is not None]
        return max(sizes, default=None)

    expected = [s["peak_context_tokens"] for s in entry["sessions"]]
    if entry["format"] == "claude-code-jsonl":
        assert [peak(sessions)] == expected
    elif entry["format"] == "aider-chat-md":
        # aider also logs calls whose reply never came; those count for the peak but have no turn.
        assert [s.metadata["peak_sent_tokens"] for s in sessions] == expected
        assert all((peak([s]) or 0) <= (s.metadata["peak_sent_tokens"] or 0) for s in sessions)
    else:
        assert [peak([s]) for s in sessions] == expected


@needs_data
@pytest.mark.parametrize("entry", DEV_FILES, ids=_ids)
def test_detect_format_picks_the_right_format_for_every_dev_file(entry: dict[str, Any]) -> None:
    assert detect_format(TRANSCRIPTS / entry["file"]) == OUR_FORMAT[entry["format"]]


@needs_data
def test_claude_code_sub_agent_chains_become_child_sessions(
    imported: dict[str, list[ImportedSession]],
) -> None:
    entry = next(
        e for e in DEV_FILES if e["file"].endswith("fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    )
    raw = [json.loads(ln) for ln in (TRANSCRIPTS / entry["file"]).read_text().splitlines()]
    side_lines = sum(1 for d in raw if d.get("type") in ("user", "assistant") and d["isSidechain"])
    main, *children = imported[entry["file"]]
    assert main.parent_session_id is None and "sidechain" not in main.metadata
    assert children and all(c.parent_session_id == main.session_id for c in children)
    assert sum(c.metadata["source_lines"] for c in children) == side_lines
    task_calls = {tc.id for m in main.messages for tc in m.tool_calls if tc.name == "Task"}
    assert {c.metadata["parent_tool_call_id"] for c in children} <= task_calls
    assert len({c.session_id for c in children}) == len(children)


@needs_data
def test_folder_import_skips_manifest_and_sources_with_one_issue_each(
    imported: dict[str, list[ImportedSession]],
) -> None:
    sessions, issues = import_path([*DEV, MANIFEST, TRANSCRIPTS / "SOURCES.md"])
    assert len(sessions) == sum(len(v) for v in imported.values())
    assert sorted(Path(i.path).name for i in issues) == ["SOURCES.md", "manifest.json"]
    assert all("pass the format explicitly" in i.reason for i in issues)


# ---------------------------------------------------------------- format rules on small files


def _write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _cc(
    uuid: str, parent: str | None, kind: str, message: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": "s1",
        "isSidechain": False,
        "message": message,
        **extra,
    }


def _reply(msg_id: str, *blocks: dict[str, Any], out: int = 5) -> dict[str, Any]:
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "output_tokens": out,
    }
    return {
        "id": msg_id,
        "role": "assistant",
        "model": "claude-x",
        "content": list(blocks),
        "usage": usage,
    }


def _use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}


def _result(call_id: str, *, error: bool = False) -> dict[str, Any]:
    block = {
        "type": "tool_result",
        "tool_use_id": call_id,
        "content": [{"type": "text", "text": "ok"}],
        "is_error": error,
    }
    return {"role": "user", "content": [block]}


def test_claude_code_lines_of_one_response_merge_into_one_assistant_message(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "s.jsonl",
        [
            _cc("u1", None, "user", {"role": "user", "content": "list files"}),
            _cc("a1", "u1", "assistant", _reply("m1", {"type": "text", "text": "Listing."}, out=1)),
            _cc("a2", "a1", "assistant", _reply("m1", _use("t1"), out=40)),
            _cc("r1", "a2", "user", _result("t1", error=True)),
        ],
    )
    (session,) = iter_sessions(path)
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "tool"]
    reply, result = session.messages[1], session.messages[2]
    assert reply.content == "Listing." and [tc.id for tc in reply.tool_calls] == ["t1"]
    assert result.tool_call_id == "t1" and result.is_error and result.content == "ok"
    (usage,) = session.usage
    assert (usage.message_index, usage.input_tokens, usage.output_tokens) == (1, 1103, 40)
    assert session.metadata["source_lines"] == 4


def test_claude_code_parallel_results_are_kept_and_abandoned_branches_dropped(
    tmp_path: Path,
) -> None:
    """CLI 2.x links each parallel result to its call's line; an edited turn is a real branch."""
    path = _write_jsonl(
        tmp_path / "s.jsonl",
        [
            _cc("u1", None, "user", {"role": "user", "content": "go"}),
            _cc("a1", "u1", "assistant", _reply("m1", _use("t1"))),
            _cc("a2", "a1", "assistant", _reply("m1", _use("t2"))),
            _cc("r1", "a1", "user", _result("t1")),
            _cc("r2", "a2", "user", _result("t2")),
            _cc("old", "r2", "user", {"role": "user", "content": "first try"}),
            _cc("new", "r2", "user", {"role": "user", "content": "edited"}),
        ],
    )
    (session,) = iter_sessions(path)
    assert [m.tool_call_id or m.content for m in session.messages] == [
        "go",
        "",
        "t1",
        "t2",
        "edited",
    ]
    assert session.metadata["off_branch_lines"] == 1


def test_aider_chats_split_on_headers_with_usage_on_the_reply(tmp_path: Path) -> None:
    path = tmp_path / "chat.md"
    path.write_text(
        "# aider chat started at 2024-08-05 19:33:32\n\n> Models: claude-3-5-sonnet with diff\n\n"
        "#### fix it  \n\nSure:\n\n```\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```\n\n"
        "> Tokens: 1.2k sent, 85 received. Cost: $0.01 message.  \n\n#### /ex  \n\n"
        "# aider chat started at 2024-08-05 20:00:00\n"
    )
    first, second = iter_sessions(path)
    assert [m.role for m in first.messages] == ["user", "assistant", "user"]
    assert first.messages[1].content.endswith(">>>>>>> REPLACE\n```")
    assert (first.usage[0].message_index, first.usage[0].input_tokens) == (1, 1200)
    assert first.model == "claude-3-5-sonnet" and first.started_at is not None
    assert second.messages == [] and second.session_id != first.session_id


def test_harness9_record_lines_import_as_records_and_bad_lines_are_reported(tmp_path: Path) -> None:
    go_line = {
        "id": "r1",
        "session_id": "s",
        "timestamp": "2025-01-02T03:04:05.123456789Z",
        "tier": 3,
        "tokens_before": 1000,
        "tokens_after": 200,
        "msgs_before": 10,
        "msgs_after": 4,
        "anchors": None,
        "offloaded": None,
        "summarized": 6,
        "preserved_tail": 3,
        "summary_text": "s",
        "compression_ratio": 0.2,
        "duration": 1_500_000_000,
    }
    path = _write_jsonl(tmp_path / "s.jsonl", [go_line, {**go_line, "tier": "high"}])
    assert detect_format(path) == "harness9-records"
    issues: list[ImportIssue] = []
    (record,) = iter_records(path, issues=issues)
    assert (int(record.tier), record.duration_ms) == (3, 1500.0)
    assert [(i.line, "tier" in i.reason) for i in issues] == [(2, True)]
    with pytest.raises(TranscriptError, match="iter_records"):
        list(iter_sessions(path))
    records, more = import_records(tmp_path)
    assert len(records) == 1 and len(more) == 1


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("a.json", json.dumps([{"role": "user", "content": "hi"}], indent=2), "openai"),
        ("b.json", json.dumps({"messages": [{"role": "user", "content": "hi"}]}), "openai"),
        (
            "c.jsonl",
            json.dumps({"messages": []}) + "\n" + json.dumps({"traj": []}) + "\n",
            "openai",
        ),
        ("d.jsonl", '{"type":"file-history-snapshot","messageId":"m"}\n', "claude-code"),
        ("e.txt", json.dumps({"history": [], "trajectory": []}), "swe-agent"),
        (
            "f.log",
            "-*- mode: fundamental -*-\n# aider chat started at 2024-01-01 00:00:00\n",
            "aider",
        ),
    ],
)
def test_detect_format_judges_content_not_the_file_name(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert detect_format(path) == expected
