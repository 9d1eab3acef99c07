"""Importing files and folders: format dispatch, folder walks and issue collection.

``iter_sessions`` streams the sessions of one file; ``iter_path``/``import_path`` do the same over
files and folders (walked recursively, in name order, hidden entries skipped), turning every file
that cannot be imported into one ``ImportIssue`` and going on with the rest. Problems inside a
readable file (a bad line, a bad message) are issues too, and everything valid beside them is
still imported. harness9 record files hold compaction records, not conversations: read them with
``iter_records``/``import_records``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal

from analytics.errors import TranscriptError
from analytics.importers.aider import iter_aider_sessions
from analytics.importers.claude_code import iter_claude_code_sessions
from analytics.importers.detect import Detection, detect
from analytics.importers.harness9_records import iter_harness9_records
from analytics.importers.mini_swe_agent import iter_mini_swe_agent_sessions
from analytics.importers.openai_chat import iter_openai_sessions
from analytics.importers.reading import IssueSink, Reporter, read_head
from analytics.importers.session import FORMATS, ImportedSession, ImportIssue, TranscriptFormat
from analytics.importers.swe_agent import iter_swe_agent_sessions
from compactor import CompactionRecord

log = logging.getLogger(__name__)

FormatChoice = TranscriptFormat | Literal["auto"]
PathLike = str | os.PathLike[str]
_Importer = Callable[[Path, Reporter, object | None], Iterator[ImportedSession]]

_IMPORTERS: dict[str, _Importer] = {
    "openai": iter_openai_sessions,
    "claude-code": iter_claude_code_sessions,
    "swe-agent": iter_swe_agent_sessions,
    "mini-swe-agent": iter_mini_swe_agent_sessions,
    "aider": iter_aider_sessions,
}


def iter_sessions(
    path: PathLike, format: FormatChoice = "auto", *, issues: list[ImportIssue] | None = None
) -> Iterator[ImportedSession]:
    """The sessions of one transcript file, one at a time.

    Problems with part of the file are appended to ``issues`` (logged as warnings when it is
    ``None``) and the rest is still yielded. A file that cannot be imported at all (unreadable,
    empty, binary, invalid JSON document, unknown format, a records file) raises
    ``TranscriptError`` naming the file, the line where there is one, and why.
    """
    file = Path(path)
    detection = _resolve(file, format)
    if detection.format == "harness9-records":
        raise TranscriptError(
            str(file),
            "holds harness9 compaction records, not a conversation; import it with "
            "iter_records (--format harness9-records)",
        )
    yield from _IMPORTERS[detection.format](file, _reporter(file, issues), detection.document)


def iter_records(
    path: PathLike, *, issues: list[ImportIssue] | None = None
) -> Iterator[CompactionRecord]:
    """The compaction records of one harness9 record JSONL file; bad lines become issues."""
    file = Path(path)
    read_head(file)
    yield from iter_harness9_records(file, _reporter(file, issues))


def iter_path(
    paths: PathLike | Iterable[PathLike],
    format: FormatChoice = "auto",
    *,
    issues: list[ImportIssue],
) -> Iterator[ImportedSession]:
    """Sessions of every file under ``paths``; every problem goes to ``issues``, none raises."""
    for file in transcript_files(paths, issues):
        try:
            yield from iter_sessions(file, format, issues=issues)
        except TranscriptError as exc:
            issues.append(ImportIssue(path=exc.path, line=exc.line, reason=exc.reason))


def import_path(
    paths: PathLike | Iterable[PathLike], format: FormatChoice = "auto"
) -> tuple[list[ImportedSession], list[ImportIssue]]:
    """``(sessions, issues)`` for files and folders (folders walked recursively)."""
    issues: list[ImportIssue] = []
    sessions = list(iter_path(paths, format, issues=issues))
    return sessions, issues


def import_records(
    paths: PathLike | Iterable[PathLike],
) -> tuple[list[CompactionRecord], list[ImportIssue]]:
    """``(records, issues)`` for harness9 record files and folders of them."""
    issues: list[ImportIssue] = []
    records: list[CompactionRecord] = []
    for file in transcript_files(paths, issues):
        try:
            records.extend(iter_records(file, issues=issues))
        except TranscriptError as exc:
            issues.append(ImportIssue(path=exc.path, line=exc.line, reason=exc.reason))
    return records, issues


def _resolve(file: Path, format: FormatChoice) -> Detection:
    if format == "auto":
        return detect(file)
    if format not in FORMATS:
        raise ValueError(
            f"unknown format {format!r}; expected 'auto' or one of {', '.join(FORMATS)}"
        )
    read_head(file)  # empty, binary or unreadable files fail the same way whatever the format
    return Detection(format)


def transcript_files(
    paths: PathLike | Iterable[PathLike], issues: list[ImportIssue]
) -> Iterator[Path]:
    """Every file under ``paths`` in name order (folders recursively, dot-files skipped);
    a path that does not exist becomes one issue."""
    roots = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    for root in map(Path, roots):
        if root.is_dir():
            yield from _walk(root)
        elif root.is_file():
            yield root
        else:
            issues.append(ImportIssue(path=str(root), reason="no such file or directory"))


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith("."):
                yield Path(dirpath) / name


def _reporter(file: Path, issues: list[ImportIssue] | None) -> Reporter:
    sink: IssueSink = issues.append if issues is not None else _log_issue
    return Reporter(file, sink)


def _log_issue(issue: ImportIssue) -> None:
    log.warning("import issue: %s", issue)
