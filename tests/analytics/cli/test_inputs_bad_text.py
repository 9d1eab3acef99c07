"""Importers on text that parses in surprising ways (issue 7, items 7, 8, 10, 12).

Lone surrogates, a byte-order mark, JSON scalars, ``{}``, deep nesting, non-list ``messages``,
a forced ``--format aider`` on JSON, and a FIFO in a folder: each is a clear issue naming the file
(and line), and everything valid beside it is still read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from analytics.importers import (
    TranscriptError,
    UnknownFormatError,
    import_path,
    iter_sessions,
    transcript_files,
)
from analytics.importers.session import ImportIssue

ROOT = Path(__file__).resolve().parents[3]
TRANSCRIPTS = ROOT.parent / "shared" / "data" / "transcripts"
TAU_FILE = TRANSCRIPTS / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"
AIDER_FILE = TRANSCRIPTS / "aider" / "tests" / "fixtures" / "chat-history.md"
SURROGATE_LINE = '{"role": "user", "content": "before \\ud800 after"}'


def _lines(path: Path, *rows: str) -> Path:
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_lone_surrogate_is_replaced_and_reported_with_its_line(tmp_path: Path) -> None:
    path = _lines(
        tmp_path / "chat.jsonl",
        '{"role": "user", "content": "hello"}',
        SURROGATE_LINE,
        '{"role": "assistant", "content": "pair \\ud83d\\ude00 kept"}',
    )
    sessions, issues = import_path(path)
    (session,) = sessions
    assert [m.content for m in session.messages] == [
        "hello",
        "before \ufffd after",
        "pair \U0001f600 kept",  # a valid surrogate pair is one character, untouched
    ]
    (issue,) = issues
    assert issue.path == str(path) and issue.line == 2
    assert "\\ud800" in issue.reason and "U+FFFD" in issue.reason
    session.model_dump_json().encode("utf-8")  # what the spool writes: now encodable


def test_a_lone_surrogate_in_a_json_document_names_its_line(tmp_path: Path) -> None:
    doc = {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": "x"}]}
    text = json.dumps(doc, indent=2).replace('"x"', '"\\udc00"')
    path = tmp_path / "doc.json"
    path.write_text(text, encoding="utf-8")
    sessions, issues = import_path(path)
    assert [m.content for m in sessions[0].messages] == ["ok", "\ufffd"]
    (issue,) = issues
    expected_line = text[: text.index("\\udc00")].count("\n") + 1
    assert issue.line == expected_line and "\\udc00" in issue.reason


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path, suffix: str) -> None:
    rows = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    body = (
        "".join(json.dumps(r) + "\n" for r in rows)
        if suffix == ".jsonl"
        else json.dumps({"messages": rows}, indent=2)
    )
    path = tmp_path / f"bom{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    sessions, issues = import_path(path)
    assert issues == []
    assert [m.content for m in sessions[0].messages] == ["a", "b"]


@pytest.mark.parametrize(("text", "shown"), [("null", "null"), ("42", "a number 42")])
def test_a_json_scalar_file_says_it_is_json_and_what_was_expected(
    tmp_path: Path, text: str, shown: str
) -> None:
    path = tmp_path / "value.json"
    path.write_text(text + "\n")
    with pytest.raises(UnknownFormatError) as info:
        list(iter_sessions(path))
    assert f"one JSON value ({shown})" in info.value.reason
    assert "expected a JSON object or list" in info.value.reason
    assert "neither JSON" not in info.value.reason


@pytest.mark.parametrize("text", ["{}", "{\n}\n"])
def test_an_empty_object_says_it_has_no_keys(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty-object.json"
    path.write_text(text)
    with pytest.raises(UnknownFormatError, match="no keys"):
        list(iter_sessions(path))


@pytest.mark.parametrize("value", ["5", '"hi"', "{}"])
def test_messages_that_are_not_a_list_say_so(tmp_path: Path, value: str) -> None:
    path = tmp_path / "m.json"
    path.write_text(f'{{"messages": {value}}}')
    with pytest.raises(UnknownFormatError, match="'messages' should be a list of messages"):
        list(iter_sessions(path))


@pytest.mark.parametrize("line", [False, True])
def test_deep_nesting_is_a_clear_reason_not_a_recursion_error(tmp_path: Path, line: bool) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / ("deep.jsonl" if line else "deep.json")
    if line:
        _lines(path, '{"role": "user", "content": "kept"}', f'{{"role": "user", "x": {deep}}}')
    else:
        path.write_text(f'{{"messages": {deep}}}')
    sessions, issues = import_path(path)
    (issue,) = issues
    assert "nested too deeply" in issue.reason and "Recursion" not in issue.reason
    assert "please report" not in issue.reason
    if line:  # the good line beside it is still read
        assert issue.line == 2 and [m.content for m in sessions[0].messages] == ["kept"]


def test_invalid_json_reasons_never_say_at_at(tmp_path: Path) -> None:
    path = _lines(tmp_path / "c.jsonl", '{"role": "user", "content": "a"}', '{"role": "user')
    _sessions, (issue,) = import_path(path)
    assert "Unterminated string starting at" in issue.reason
    assert "at at" not in issue.reason
    assert "Unterminated string starting at column " in issue.reason


def test_forced_aider_format_refuses_a_json_transcript() -> None:
    with pytest.raises(TranscriptError) as info:
        list(iter_sessions(TAU_FILE, format="aider"))
    assert "not aider chat markdown" in info.value.reason and "JSON" in info.value.reason


def test_forced_aider_format_still_reads_an_aider_chat() -> None:
    forced = list(iter_sessions(AIDER_FILE, format="aider"))
    detected = list(iter_sessions(AIDER_FILE))
    assert [s.session_id for s in forced] == [s.session_id for s in detected]


def test_a_fifo_in_a_folder_is_skipped_without_being_opened(tmp_path: Path) -> None:
    # Opening a FIFO for reading blocks until a writer comes; no writer ever comes here, so a
    # walk that opened it would hang (the CLI test guards the same with a subprocess timeout).
    _lines(tmp_path / "a.jsonl", '{"role": "user", "content": "a"}')
    os.mkfifo(tmp_path / "pipe.jsonl")
    issues: list[ImportIssue] = []
    files = list(transcript_files(tmp_path, issues))
    assert files == [tmp_path / "a.jsonl"]
    (issue,) = issues
    assert issue.path == str(tmp_path / "pipe.jsonl") and "FIFO" in issue.reason
    assert issue.unrecognised


def test_a_fifo_named_directly_is_an_issue_not_a_missing_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    issues: list[ImportIssue] = []
    assert list(transcript_files(tmp_path / "pipe", issues)) == []
    (issue,) = issues
    assert "not a regular file" in issue.reason and "no such file" not in issue.reason
