"""Importers on bad input: each case gives one clear issue naming the file (and line) and why,
and everything valid beside it still comes through. No case raises out of ``import_path``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from analytics.importers import (
    AnalyticsError,
    ImportIssue,
    TranscriptError,
    UnknownFormatError,
    import_path,
    iter_sessions,
)


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _messages(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]


def _traj() -> dict[str, Any]:
    history = [{"role": "system", "content": "sys"}, *_messages(20)]
    return {"history": history, "info": {"exit_status": "submitted"}}


def _collect(path: Path, **kwargs: Any) -> tuple[list[Any], list[ImportIssue]]:
    issues: list[ImportIssue] = []
    return list(iter_sessions(path, issues=issues, **kwargs)), issues


def test_truncated_json_document_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    text = json.dumps(_traj(), indent=2)
    path = tmp_path / "cut.traj"
    path.write_text(text[: len(text) * 2 // 3])
    with pytest.raises(TranscriptError) as caught:
        list(iter_sessions(path))
    err = caught.value
    assert isinstance(err, AnalyticsError)
    assert err.path == str(path) and err.line is not None and "truncated" in err.reason
    assert str(err).startswith(f"{path}:{err.line}: invalid JSON")
    sessions, issues = import_path(path)
    assert sessions == [] and [(i.path, i.line) for i in issues] == [(str(path), err.line)]


def test_truncated_last_jsonl_line_is_reported_and_the_other_lines_kept(tmp_path: Path) -> None:
    rows: list[Any] = [json.dumps(m) for m in _messages(4)]
    rows[-1] = rows[-1][:12]
    path = _jsonl(tmp_path / "chat.jsonl", rows)
    (session,), issues = _collect(path)
    assert [m.content for m in session.messages] == ["m0", "m1", "m2"]
    (issue,) = issues
    assert (issue.path, issue.line) == (str(path), 4) and "truncated" in issue.reason


def test_truncated_claude_code_line_keeps_the_rest_of_the_chain(tmp_path: Path) -> None:
    def line(uuid: str, parent: str | None, text: str) -> str:
        msg = {"role": "user", "content": text}
        row = {
            "type": "user",
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "s",
            "isSidechain": False,
            "message": msg,
        }
        return json.dumps(row)

    path = _jsonl(
        tmp_path / "s.jsonl",
        [line("a", None, "one"), line("b", "a", "two"), line("c", "b", "three")[:30]],
    )
    (session,), issues = _collect(path)
    assert [m.content for m in session.messages] == ["one", "two"]
    assert [(i.line, "invalid JSON" in i.reason) for i in issues] == [(3, True)]


@pytest.mark.parametrize(
    ("name", "rows", "where", "kept"),
    [
        ("openai.jsonl", [*_messages(2), {"role": "user", "content": 5}], "content", 2),
        ("openai2.jsonl", [*_messages(2), {"role": 7, "content": "x"}], "role", 2),
        (
            "calls.jsonl",
            [*_messages(1), {"role": "assistant", "tool_calls": "ls"}],
            "tool_calls",
            1,
        ),
    ],
)
def test_wrong_typed_field_in_a_jsonl_line_names_line_and_field(
    tmp_path: Path, name: str, rows: list[Any], where: str, kept: int
) -> None:
    path = _jsonl(tmp_path / name, rows)
    (session,), issues = _collect(path)
    assert len(session.messages) == kept
    (issue,) = issues
    assert issue.line == len(rows) and where in issue.reason and "expected" in issue.reason


def test_wrong_typed_claude_code_message_skips_only_that_line(tmp_path: Path) -> None:
    good = {
        "type": "user",
        "uuid": "a",
        "parentUuid": None,
        "sessionId": "s",
        "isSidechain": False,
        "message": {"role": "user", "content": "one"},
    }
    bad = {**good, "uuid": "b", "parentUuid": "a", "message": "hello"}
    path = _jsonl(tmp_path / "s.jsonl", [good, bad])
    (session,), issues = _collect(path)
    assert [m.content for m in session.messages] == ["one"]
    (issue,) = issues
    assert issue.line == 2 and "message: expected an object, got a string 'hello'" in issue.reason


def test_wrong_typed_history_fails_the_file_with_the_field_named(tmp_path: Path) -> None:
    path = tmp_path / "x.traj"
    path.write_text(json.dumps({"history": {"role": "user"}, "trajectory": []}, indent=2))
    with pytest.raises(TranscriptError, match="'history' should be a list of messages, got an obj"):
        list(iter_sessions(path))


def test_wrong_typed_run_in_a_tau_bench_array_skips_only_that_run(tmp_path: Path) -> None:
    runs = [{"task_id": 0, "trial": 0, "traj": _messages(2)}, {"task_id": 1, "traj": "oops"}]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs, indent=1))
    sessions, issues = _collect(path)
    assert [s.metadata["task_id"] for s in sessions] == [0]
    (issue,) = issues
    assert issue.line is None and "[1].traj" in issue.reason and "a string 'oops'" in issue.reason


def test_wrong_typed_usage_keeps_the_message_and_reports_the_field(tmp_path: Path) -> None:
    usage = {"prompt_tokens": "many", "completion_tokens": 3}
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
    path.write_text(json.dumps(doc, indent=2))
    (session,), issues = _collect(path)
    assert [m.role for m in session.messages] == ["user", "assistant"]
    # the bad figure is left empty, the good one beside it kept
    assert [(u.input_tokens, u.output_tokens) for u in session.usage] == [(None, 3)]
    assert session.metadata["exit"]["exit_status"] == "done"
    (issue,) = issues
    assert "messages[1].extra.response.usage.prompt_tokens" in issue.reason


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
        ("caf\xe9 latin-1 text".encode("latin-1"), "non-UTF-8"),
        (b"", "empty"),
        (b"  \n\n", "only whitespace"),
    ],
    ids=["binary", "latin-1", "empty", "whitespace"],
)
def test_unreadable_file_is_one_issue_saying_why(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(TranscriptError, match=reason):
        list(iter_sessions(path))
    with pytest.raises(TranscriptError, match=reason):  # a forced format checks the same
        list(iter_sessions(path, format="claude-code"))
    sessions, issues = import_path(path)
    assert sessions == [] and len(issues) == 1 and reason in issues[0].reason


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("obj.json", '{\n  "foo": 1\n}\n'),
        ("rows.jsonl", '{"foo": 1}\n{"foo": 2}\n'),
        ("notes.txt", "just some notes\n"),
        ("list.json", "[1, 2, 3]"),
    ],
)
def test_unknown_format_is_one_issue_with_a_hint(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UnknownFormatError, match="pass the format explicitly"):
        list(iter_sessions(path))
    _sessions, issues = import_path(path)
    assert len(issues) == 1 and issues[0].path == str(path)


def test_folder_import_keeps_good_files_beside_bad_ones(tmp_path: Path) -> None:
    (tmp_path / "nested").mkdir()
    _jsonl(tmp_path / "nested" / "good.jsonl", _messages(3))
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / ".hidden").write_text("ignored")
    missing = tmp_path / "missing.json"
    sessions, issues = import_path([tmp_path, missing])
    assert [len(s.messages) for s in sessions] == [3]
    assert sorted(Path(i.path).name for i in issues) == ["blob.bin", "empty.json", "missing.json"]


def test_issues_are_logged_when_no_list_is_given(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _jsonl(tmp_path / "chat.jsonl", [*_messages(2), "{not json"])
    with caplog.at_level(logging.WARNING):
        (session,) = iter_sessions(path)
    assert len(session.messages) == 2
    assert f"{path}:3: invalid JSON" in caplog.text


def test_an_unknown_format_name_is_a_usage_error(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "chat.jsonl", _messages(1))
    with pytest.raises(ValueError, match="unknown format 'yaml'"):
        list(iter_sessions(path, format="yaml"))  # type: ignore[arg-type]
