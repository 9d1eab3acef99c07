"""The command line's inputs: files and folders → files → sessions or compaction records.

``input_files`` expands the paths given on the command line (folders walked recursively, in name
order, hidden entries skipped: the same walk as ``analytics.importers.import_path``), so that
progress can be counted in files. ``iter_file`` reads one file with the importers: conversations
become ``ImportedSession``s, harness9 record files (detected, or named with ``--format``) become
``CompactionRecord``s. Every problem becomes an ``ImportIssue``; nothing here raises for bad
input, and nothing here writes. ``split_issues`` tells the files found in a folder that are
simply not transcripts (skipped) from the rejected ones.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

from analytics.errors import TranscriptError
from analytics.importers import (
    ImportedSession,
    ImportIssue,
    TranscriptFormat,
    detect_format,
    issue_of,
    iter_records,
    iter_sessions,
    transcript_files,
)
from analytics.importers.reading import check_readable
from compactor import CompactionRecord

FormatChoice = TranscriptFormat | Literal["auto"]
MAX_WINDOW = 100_000_000
"""The largest ``--window`` accepted: far beyond any model's context, small enough to be one."""
Item = ImportedSession | CompactionRecord


def input_files(paths: Sequence[str | os.PathLike[str]], issues: list[ImportIssue]) -> list[Path]:
    """Every file under ``paths``, in order; a missing path becomes one issue."""
    return list(transcript_files(paths, issues))


def iter_file(file: Path, fmt: FormatChoice, issues: list[ImportIssue]) -> Iterator[Item]:
    """The sessions (or, for a harness9 record file, the records) of one file.

    A file that cannot be read at all, or must not be (a device, a kernel file such as
    ``/proc/kmsg``: refused from ``stat`` before anything opens it), becomes one issue; an
    importer that fails unexpectedly on a file becomes one issue too, so that one odd file
    never stops a long import.
    """
    try:  # before any importer opens it: a device or kernel file named here can block
        check_readable(file)
    except TranscriptError as exc:
        issues.append(issue_of(exc))
        return
    if fmt == "harness9-records":
        yield from _records(file, issues)
        return
    yielded = False
    try:
        for session in iter_sessions(file, fmt, issues=issues):
            yielded = True
            yield session
    except TranscriptError as exc:
        if fmt == "auto" and not yielded and _holds_records(file):
            yield from _records(file, issues)
        else:
            issues.append(issue_of(exc))
    except Exception as exc:  # an importer bug must not end a batch of thousands of files
        issues.append(_unexpected(file, exc))


def split_issues(
    paths: Sequence[str | os.PathLike[str]], issues: Sequence[ImportIssue]
) -> tuple[list[ImportIssue], list[ImportIssue]]:
    """(skipped, rejected): skipped are the issues of files found by walking a folder that are
    simply not transcripts; a file named in ``paths`` is rejected whatever the reason, since
    the user asked for it."""
    named = {str(Path(p)) for p in paths}
    skipped = [i for i in issues if i.unrecognised and i.path not in named]
    return skipped, [i for i in issues if i not in skipped]


def _holds_records(file: Path) -> bool:
    try:
        return detect_format(file) == "harness9-records"
    except TranscriptError:
        return False


def _records(file: Path, issues: list[ImportIssue]) -> Iterator[CompactionRecord]:
    try:
        yield from iter_records(file, issues=issues)
    except TranscriptError as exc:
        issues.append(issue_of(exc))
    except Exception as exc:
        issues.append(_unexpected(file, exc))


def _unexpected(file: Path, exc: Exception) -> ImportIssue:
    return ImportIssue(
        path=str(file),
        reason=f"the importer failed unexpectedly ({type(exc).__name__}: {exc}); file skipped, "
        "please report this",
    )


class HomeError(Exception):
    """The data folder cannot be used; the message says why and what to do."""


def check_home(root: Path, *, write: bool) -> None:
    """Fail with a ``HomeError`` saying exactly what is wrong with the data folder.

    A path that is a file, or under a file, is named as such; with ``write`` the folder is
    created and a probe file written, so that a read-only folder or file system (which even
    root cannot write) is found before any work starts, not in the middle of it.
    """
    if root.exists() and not root.is_dir():
        raise HomeError(f"--home {root} is a file, not a folder; pass a folder")
    blocker = next((p for p in root.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise HomeError(f"--home {root}: {blocker} is a file, not a folder; pass another path")
    if not write:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as exc:
        why = "read-only" if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else "unusable"
        raise HomeError(
            f"--home {root} is {why} ({exc.strerror or exc}); pass a folder you can write to"
        ) from None
