"""Finding native transcripts: detection, folder walks (Codex's hidden home, OpenHands
conversation folders read whole) and explicit formats."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from analytics.importers import (
    FORMATS,
    ImportIssue,
    TranscriptError,
    UnknownFormatError,
    detect_format,
    import_path,
    iter_sessions,
    transcript_files,
)
from tests.transcripts import NATIVE, TRANSCRIPTS

needs_native = pytest.mark.skipif(not NATIVE.is_dir(), reason=f"{NATIVE} not present")
SDK_FOLDERS = (
    sorted(p for p in NATIVE.glob("openhands-v1/*") if p.is_dir()) if NATIVE.is_dir() else []
)


@needs_native
def test_the_whole_shared_folder_leaves_out_only_manifests_and_notes() -> None:
    sessions, issues = import_path(TRANSCRIPTS)

    assert all(Path(i.path).name == "manifest.json" or i.path.endswith(".md") for i in issues)
    assert not [i for i in issues if Path(i.path).is_relative_to(NATIVE / "openhands-v1")]
    native = [s for s in sessions if Path(s.source_path).is_relative_to(NATIVE)]
    formats = Counter(s.format for s in native)
    assert formats == {"claude-code": 4, "codex": 2, "openhands-v0": 1, "openhands-sdk": 2}
    assert sum(len(s.compactions) for s in native) == 7 + 2 + 2 + 7 + 4


@needs_native
@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("claude-code/a6/e4c2a0fbd1/0/full.jsonl", "claude-code"),
        ("openhands-v0/issue_10730_complete_trajectory_297_events.json", "openhands-v0"),
    ]
    + [
        (str(p.relative_to(NATIVE)), "codex")
        for p in NATIVE.glob("codex/.codex/sessions/**/*.jsonl")
    ]
    + [(str(p.relative_to(NATIVE)), "openhands-sdk") for p in SDK_FOLDERS],
)
def test_each_native_transcript_is_detected_by_its_content(relative: str, expected: str) -> None:
    assert detect_format(NATIVE / relative) == expected


@needs_native
def test_a_conversation_folder_is_one_input_of_a_folder_walk() -> None:
    found = list(transcript_files(NATIVE / "openhands-v1", []))
    assert found == SDK_FOLDERS


def test_a_codex_home_is_walked_into_its_rollout_folders_only(tmp_path: Path) -> None:
    home = tmp_path / ".codex"
    (home / "sessions" / "2026").mkdir(parents=True)
    (home / "log").mkdir()
    rollout = home / "sessions" / "2026" / "rollout-1.jsonl"
    rollout.write_text('{"type":"session_meta","payload":{"id":"r1"}}\n', encoding="utf-8")
    (home / "auth.json").write_text("{}", encoding="utf-8")
    (home / "log" / "codex.log").write_text("log line\n", encoding="utf-8")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: main\n", encoding="utf-8")

    issues: list[ImportIssue] = []
    assert list(transcript_files(tmp_path, issues)) == [rollout]
    assert list(transcript_files(home, issues)) == [rollout]
    assert issues == []


@needs_native
def test_a_folder_under_another_format_is_refused_saying_what_reads_it() -> None:
    folder = SDK_FOLDERS[0]
    with pytest.raises(TranscriptError, match="a folder; --format codex reads files"):
        list(iter_sessions(folder, "codex"))
    rollout = next(NATIVE.glob("codex/.codex/sessions/**/*.jsonl"))
    with pytest.raises(UnknownFormatError, match="not an OpenHands conversation folder"):
        list(iter_sessions(rollout, "openhands-sdk"))
    [session] = iter_sessions(folder, "openhands-sdk")
    assert session.format == "openhands-sdk"


def test_the_new_formats_are_named_in_the_format_list() -> None:
    assert {"codex", "openhands-v0", "openhands-sdk"} <= set(FORMATS)
