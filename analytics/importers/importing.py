"""Importing files and folders: format dispatch, folder walks and issue collection.

``iter_sessions`` streams the sessions of one file (or of one OpenHands SDK conversation folder);
``iter_path``/``import_path`` do the same over files and folders (walked recursively, in name
order, hidden entries skipped but for a Codex home's rollout folders, ``.codex/sessions`` and
``.codex/archived_sessions``; an OpenHands conversation folder met on the walk is one input, read
whole), turning every file that cannot be imported into one ``ImportIssue`` and going on with
the rest. Problems inside a
readable file (a bad line, a bad message) are issues too, and everything valid beside them is
still imported. harness9 record files hold compaction records, not conversations: read them with
``iter_records``/``import_records``.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Literal

from analytics.errors import TranscriptError, UnknownFormatError
from analytics.importers.aider import iter_aider_sessions
from analytics.importers.claude_code import iter_claude_code_sessions
from analytics.importers.codex import iter_codex_sessions
from analytics.importers.detect import Detection, detect, looks_like_aider
from analytics.importers.harness9_records import iter_harness9_records
from analytics.importers.mini_swe_agent import iter_mini_swe_agent_sessions
from analytics.importers.openai_chat import iter_openai_sessions
from analytics.importers.openhands_sdk import iter_openhands_sdk_sessions
from analytics.importers.openhands_v0 import iter_openhands_v0_sessions
from analytics.importers.reading import IssueSink, Reporter, event_service, read_head
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
    "codex": iter_codex_sessions,
    "openhands-v0": iter_openhands_v0_sessions,
    "openhands-sdk": iter_openhands_sdk_sessions,
}
_CODEX_HOME = ".codex"
_CODEX_ROLLOUTS = ("sessions", "archived_sessions")


def iter_sessions(
    path: PathLike, format: FormatChoice = "auto", *, issues: list[ImportIssue] | None = None
) -> Iterator[ImportedSession]:
    """The sessions of one transcript file (or OpenHands conversation folder), one at a time.

    Problems with part of the file are appended to ``issues`` (logged as warnings when it is
    ``None``) and the rest is still yielded. A file that cannot be imported at all (unreadable,
    empty, binary, invalid JSON document, unknown format, a records file) raises
    ``TranscriptError`` naming the file, the line where there is one, and why.
    """
    file = Path(path)
    report = _reporter(file, issues)
    detection = _resolve(file, format, report)
    if detection.format == "harness9-records":
        raise TranscriptError(
            str(file),
            "holds harness9 compaction records, not a conversation; import it with "
            "iter_records (--format harness9-records)",
        )
    yield from _IMPORTERS[detection.format](file, report, detection.document)


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
            issues.append(issue_of(exc))


def issue_of(exc: TranscriptError) -> ImportIssue:
    """The issue for a file that could not be imported at all."""
    return ImportIssue(
        path=exc.path,
        line=exc.line,
        reason=exc.reason,
        unrecognised=isinstance(exc, UnknownFormatError),
    )


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
            issues.append(issue_of(exc))
    return records, issues


def _resolve(file: Path, format: FormatChoice, report: Reporter) -> Detection:
    if format == "auto":
        return detect(file, report)
    if format not in FORMATS:
        raise ValueError(
            f"unknown format {format!r}; expected 'auto' or one of {', '.join(FORMATS)}"
        )
    if file.is_dir() or format == "openhands-sdk":
        return _folder(file, format)
    head = read_head(
        file
    )  # empty, binary or unreadable files fail the same way whatever the format
    if format == "aider" and not looks_like_aider(head):
        raise UnknownFormatError(
            str(file),
            "--format aider: no '# aider chat started at' header and no '#### ' user line in "
            f"the first {len(head):,} characters; {_seen(head)}, not aider chat markdown",
        )
    return Detection(format)


def _folder(path: Path, format: FormatChoice) -> Detection:
    """``--format openhands-sdk`` reads a conversation folder, and only that format does."""
    if format != "openhands-sdk":
        raise TranscriptError(
            str(path),
            f"a folder; --format {format} reads files: name the files, or let auto walk it",
        )
    if event_service(path) is None:
        raise UnknownFormatError(
            str(path),
            "--format openhands-sdk: not an OpenHands conversation folder (no event_service/"
            "base_state.json, no event_service/events/); pass the conversation's folder",
        )
    return Detection("openhands-sdk")


def _seen(head: str) -> str:
    text = head.lstrip()
    if text[:1] in ("{", "["):
        return "the file is JSON"
    return f"the file starts {text.splitlines()[0][:60]!r}" if text else "the file is blank"


def transcript_files(
    paths: PathLike | Iterable[PathLike], issues: list[ImportIssue]
) -> Iterator[Path]:
    """Every file under ``paths`` in name order (folders recursively, dot-files skipped but for
    Codex's rollouts; an OpenHands conversation folder as itself); a path that does not exist
    becomes one issue."""
    roots = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    for root in map(Path, roots):
        if root.is_dir():
            yield from _walk(root, issues)
        elif root.is_file():
            yield root
        elif root.exists():
            issues.append(_not_regular(root, "nothing to import"))
        else:
            issues.append(ImportIssue(path=str(root), reason="no such file or directory"))


def _walk(root: Path, issues: list[ImportIssue]) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if event_service(here) is not None:  # one OpenHands conversation: read whole
            dirnames[:] = []
            yield here
            continue
        if here.name == _CODEX_HOME:  # Codex's settings and logs beside its rollout folders
            dirnames[:] = sorted(d for d in dirnames if d in _CODEX_ROLLOUTS)
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") or d == _CODEX_HOME)
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            file = Path(dirpath) / name
            if file.is_file():  # never open a FIFO, socket or device: reading one can block
                yield file
            elif file.exists():  # a dangling symlink is neither: os.walk still lists it
                issues.append(_not_regular(file, "skipped"))
            else:
                reason = "a broken symbolic link (its target does not exist); skipped"
                issues.append(ImportIssue(path=str(file), reason=reason, unrecognised=True))


def _not_regular(path: Path, outcome: str) -> ImportIssue:
    try:
        mode = path.stat().st_mode
    except OSError:
        mode = 0
    kinds = [
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ]
    kind = next((name for test, name in kinds if test(mode)), "")
    reason = f"not a regular file{f' ({kind})' if kind else ''}; {outcome}"
    return ImportIssue(path=str(path), reason=reason, unrecognised=True)


def _reporter(file: Path, issues: list[ImportIssue] | None) -> Reporter:
    sink: IssueSink = issues.append if issues is not None else _log_issue
    return Reporter(file, sink)


def _log_issue(issue: ImportIssue) -> None:
    log.warning("import issue: %s", issue)
