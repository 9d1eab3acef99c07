"""Transcripts followed as their harness writes them: which files changed, and which are ready.

``compactlens watch`` re-imports a transcript whenever it changed and its last line is complete
(it ends with a newline: a line still being written waits for its end); the import itself,
through the same code as ``compactlens import``, appends what the file added to the session's
live version (``identity.Tail``, kept here between passes) or stores a changed file as a new
version that supersedes the old one. This module only decides *when*: ``scan`` lists the JSONL
files under the followed folders (new ones included), ``pending`` compares each with the
``Mark`` kept when it was last imported (size, modification time, inode, and the sha256 of its
last complete line, so that a file rewritten or cut short is told from one that only grew), and
``FollowState`` keeps the marks (and how far each hook file was read) in
``<home>/live/watch.json``, so a restarted watcher imports only what changed while it was away.
Nothing here imports a transcript or opens the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from analytics.importers.harness_hooks import Position
from analytics.importers.identity import Tail

STATE_FILE = ("live", "watch.json")
STATE_VERSION = 1
TAIL_BYTES = 64 * 1024
"""At most how much of the last complete line its hash covers (its end)."""
SUFFIX = ".jsonl"
"""Followed in folders: the streamed transcripts (Claude Code sessions, Codex rollouts)."""

Kind = Literal["new", "grew", "rewritten", "touched"]


@dataclass(frozen=True)
class Mark:
    """A file as it was when last imported: its size, modification time and inode, and where
    its last complete line (at most its last ``TAIL_BYTES``) starts and that line's sha256."""

    size: int
    mtime_ns: int
    inode: int
    tail_offset: int
    tail_sha256: str


@dataclass(frozen=True)
class Change:
    """A followed file to import now: how it changed, and the mark to keep once imported."""

    path: Path
    kind: Kind
    mark: Mark
    grown_bytes: int
    """Bytes since the last import (the whole size for a new or rewritten file)."""


@dataclass
class FollowState:
    """The marks of the files imported, how far each hook file was read, and the transcripts
    hook payloads named (followed from then on even outside the folders watched)."""

    files: dict[str, Mark] = field(default_factory=dict)
    hooks: dict[str, Position] = field(default_factory=dict)
    named: list[str] = field(default_factory=list)
    tails: dict[str, Tail] = field(default_factory=dict)
    """How far each followed session's live version is written (by identity): a file that
    grew adds its new events to that version (a state from before tails starts without)."""
    _written: dict[Path, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def load(cls, home: Path) -> FollowState:
        """The state kept under ``home`` (empty if there is none or it cannot be read: the
        imports are idempotent, so starting afresh only costs time)."""
        try:
            data = json.loads(state_path(home).read_text(encoding="utf-8"))
            if data.get("version") != STATE_VERSION:
                return cls()
            return cls(
                files={k: Mark(**v) for k, v in data["files"].items()},
                hooks={k: Position(**v) for k, v in data["hooks"].items()},
                named=[str(p) for p in data["named"]],
                tails={k: Tail(**v) for k, v in data.get("tails", {}).items()},
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls()

    def save(self, home: Path) -> None:
        """Write the state whole (a temporary file renamed over the old one), unless it is
        what this process last wrote."""
        data: dict[str, Any] = {
            "version": STATE_VERSION,
            "files": {k: asdict(v) for k, v in sorted(self.files.items())},
            "hooks": {k: asdict(v) for k, v in sorted(self.hooks.items())},
            "named": self.named,
            "tails": {k: asdict(v) for k, v in sorted(self.tails.items())},
        }
        text = json.dumps(data, indent=1) + "\n"
        path = state_path(home)
        if text == self._written.get(path):
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        self._written[path] = text

    def name(self, path: Path) -> bool:
        """Follow ``path`` from now on; False if it already was."""
        key = str(path)
        if key in self.named:
            return False
        self.named.append(key)
        return True


def state_path(home: Path) -> Path:
    return home.joinpath(*STATE_FILE)


def scan(roots: Iterable[Path], named: Iterable[str] = ()) -> list[Path]:
    """Every ``*.jsonl`` file under the folders ``roots`` (recursively, hidden entries and
    links to folders skipped), each file of ``roots`` itself, and the ``named`` files that
    exist; absolute, without duplicates, in name order."""
    found: set[Path] = set()
    for root in roots:
        if root.is_dir():
            found.update(_walk(root))
        elif root.is_file():
            found.add(root.absolute())
    found.update(p for p in map(Path, named) if p.is_file())
    return sorted(found)


def _walk(root: Path) -> Iterator[Path]:
    try:
        entries = list(os.scandir(root))
    except OSError:
        return  # gone or unreadable now: looked at again on the next scan
    for entry in entries:
        if entry.name.startswith("."):
            continue
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(Path(entry.path))
            elif entry.name.endswith(SUFFIX) and entry.is_file():
                yield Path(entry.path).absolute()


def pending(state: FollowState, files: Iterable[Path]) -> tuple[list[Change], list[Path]]:
    """(the files to import now, the files that changed but end inside a line: not yet).

    A file is imported when its size, modification time or inode differ from its mark and it
    ends with a newline; an empty file waits."""
    ready: list[Change] = []
    waiting: list[Path] = []
    for path in files:
        old = state.files.get(str(path))
        try:
            change = _changed(path, old)
        except OSError:
            continue  # gone or unreadable since the scan: its mark stays, tried again later
        if change is None:
            continue
        if change == "waiting":
            waiting.append(path)
        else:
            ready.append(change)
    return ready, waiting


def _changed(path: Path, old: Mark | None) -> Change | Literal["waiting"] | None:
    with path.open("rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        if old is not None and (info.st_size, info.st_mtime_ns, info.st_ino) == (
            old.size,
            old.mtime_ns,
            old.inode,
        ):
            return None
        if info.st_size == 0:
            return "waiting"
        handle.seek(info.st_size - 1)
        if handle.read(1) != b"\n":
            return "waiting"
        mark = _mark(handle, info)
        kind = _kind(handle, info, old)
    grown = info.st_size if old is None or kind == "rewritten" else info.st_size - old.size
    return Change(path, kind, mark, grown)


def _mark(handle: Any, info: os.stat_result) -> Mark:
    """The mark of a file that ends with a newline: its last line's start and hash."""
    start = max(0, info.st_size - TAIL_BYTES - 1)
    handle.seek(start)
    tail = handle.read(info.st_size - start)
    cut = tail.rfind(b"\n", 0, len(tail) - 1) + 1  # just after the newline before the last line
    if cut == 0 and start > 0:
        cut = 1  # a line longer than TAIL_BYTES: its last TAIL_BYTES
    line = tail[cut:]
    return Mark(
        size=info.st_size,
        mtime_ns=info.st_mtime_ns,
        inode=info.st_ino,
        tail_offset=start + cut,
        tail_sha256=hashlib.sha256(line).hexdigest(),
    )


def _kind(handle: Any, info: os.stat_result, old: Mark | None) -> Kind:
    """New, grew (the bytes of the line last imported are where they were), touched (the same
    size and bytes there: only its time changed), or rewritten (replaced, cut short, or other
    bytes where the last line was)."""
    if old is None:
        return "new"
    if info.st_ino != old.inode or info.st_size < old.size:
        return "rewritten"
    handle.seek(old.tail_offset)
    before = handle.read(old.size - old.tail_offset)
    if hashlib.sha256(before).hexdigest() != old.tail_sha256:
        return "rewritten"
    return "touched" if info.st_size == old.size else "grew"
