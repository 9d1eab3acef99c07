"""Where a session's ``seq`` goes on, kept beside the spool so that resuming costs O(1).

``<spool>/.seq/<safe session id>`` holds lines ``{"session_id": …, "next_seq": N}``, appended
whole (``append_whole``) under a lock; a reader takes the largest ``next_seq`` among the last
complete lines of the session's file. A sink writes a session's line *before* the events it
covers, so the index never says less than the spool holds: a crash can leave a gap in a
session's ``seq``, never a ``seq`` used twice. ``<spool>/.seq/.indexed`` says every session in
the spool has its file (a missing file is then a new session, at 0); without it (a spool older
than the index, or an index write that failed) the caller scans the spool and ``adopt``s what it
found. The index is a dot-folder: readers of ``<spool>/*.jsonl`` never see it. Nothing here
reads or writes events.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from compactor.writing._appending import append_whole, lock_file
from compactor.writing._encoding import utf8
from compactor.writing._safepath import safe_name

INDEX_DIR = ".seq"
MARKER = ".indexed"
_TAIL_BYTES = 4096
_REWRITE_BYTES = 64 * 1024
"""A session's file is cut back to its one newest line when it grows past this."""


class SeqIndex:
    """The per-session next-seq files of one spool folder."""

    def __init__(self, spool_dir: Path) -> None:
        self.root = spool_dir / INDEX_DIR
        self.errors = 0
        self.last_error = ""

    def path_for(self, session_id: str) -> Path:
        return self.root / safe_name(session_id or "default")

    def next_seq(self, session_id: str) -> int | None:
        """The session's next seq from its file; 0 when the session has no file; None when the
        index cannot tell (no marker: older than the index, or a write of it failed, so any
        file may be behind the spool; an unreadable or empty file): scan instead."""
        if not (self.root / MARKER).is_file():
            return None
        try:
            fd = os.open(self.path_for(session_id), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return 0
        except OSError:
            return None
        try:
            size = os.fstat(fd).st_size
            start = max(0, size - _TAIL_BYTES)
            tail = os.pread(fd, size - start, start)
        except OSError:
            return None
        finally:
            os.close(fd)
        found = _largest(tail, session_id, skip_first=start > 0)
        if found is None:  # an empty or torn file tells nothing: scan
            return None
        return found

    def record(self, seqs: Mapping[str, int]) -> bool:
        """Write each session's next seq (before the events it covers reach the spool). On a
        failure the marker is removed, so that the next resume scans; False then."""
        ok = True
        for session_id, next_seq in seqs.items():
            try:
                self._append(session_id, next_seq)
            except OSError as exc:
                ok = False
                self.errors += 1
                self.last_error = f"seq index {self.root} not written: {exc}"
        if not ok:
            with contextlib.suppress(OSError):
                (self.root / MARKER).unlink()
        return ok

    def adopt(self, seqs: Mapping[str, int]) -> None:
        """After a complete scan of the spool: a file for every session found, then the
        marker that makes a missing file mean a new session."""
        if self.record(seqs):
            with contextlib.suppress(OSError):
                self._write_marker()

    def _append(self, session_id: str, next_seq: int) -> None:
        self.root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the spool: private
        self.root.mkdir(mode=0o700, exist_ok=True)
        line = json.dumps({"session_id": session_id, "next_seq": next_seq}, ensure_ascii=False)
        data = utf8(line + "\n")
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path_for(session_id), flags, 0o600)
        try:
            lock_file(fd, exclusive=True)
            if os.fstat(fd).st_size + len(data) > _REWRITE_BYTES:
                _keep_newest(fd, session_id, next_seq)
            append_whole(fd, data)
        finally:
            os.close(fd)

    def _write_marker(self) -> None:
        fd = os.open(self.root / MARKER, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)


def _largest(tail: bytes, session_id: str, *, skip_first: bool) -> int | None:
    """The largest ``next_seq`` of ``session_id`` among the complete lines of ``tail``."""
    lines = tail.split(b"\n")[:-1]  # the last piece is empty or a torn line
    if skip_first and lines:
        lines = lines[1:]  # it may start in the middle of a line
    best: int | None = None
    for raw in lines:
        try:
            entry = json.loads(raw)
            value = int(entry["next_seq"])
        except (ValueError, KeyError, TypeError):
            continue
        if entry.get("session_id") == session_id and (best is None or value > best):
            best = value
    return best


def _keep_newest(fd: int, session_id: str, next_seq: int) -> None:
    """Empty a grown file (under its lock) before the append of its newest line, unless it
    holds a larger seq (another writer's). A crash in between leaves an empty file, which reads
    as "scan the spool", never as a smaller seq."""
    size = os.fstat(fd).st_size
    start = max(0, size - _TAIL_BYTES)
    best = _largest(os.pread(fd, size - start, start), session_id, skip_first=start > 0)
    if best is None or best <= next_seq:
        os.ftruncate(fd, 0)
