"""``compactlens watch``: Claude Code and Codex transcripts imported as their harness writes them.

Every ``--interval`` seconds the watcher looks at the JSONL files under the folders it follows
(``~/.claude/projects`` and ``~/.codex/sessions`` by default) and at the payloads hooks recorded
(``analytics.importers.harness_hooks``). A file that changed and ends with a complete line
(``analytics.importers.following``) is imported again through ``run_import``, the code of
``compactlens import``, with the watcher's tails (``FollowState.tails``): what a session added
is appended to its live version (a last message that grew, as a new revision of itself); when
anything earlier changed, the content becomes a new version superseding the one before. Either
way the store holds each live session once, as its file now reads. A hook's
``PostCompact`` names a transcript: it is followed from then on, wherever it lies.

The watcher owns the store when nobody else does (``analytics.cli.ownership``): it projects
what other processes spool and lends the store to reading commands; when the app (or another
owner) holds the store the imports go to the spool and that owner projects them. The marks of
the files imported and how far the hook files were read are kept under the home
(``<home>/live/watch.json``), so a restart imports only what changed meanwhile. One watcher per
home (``<home>/live/watch.lock``). It runs until SIGINT or SIGTERM and exits 0, one line per
import on stdout. ``catch_up`` is one pass over what hooks named, for a command about to project.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer

from analytics.cli.commands import RunReport, run_import
from analytics.cli.common import Command, HomeOption, handled, resolve_home
from analytics.cli.inputs import input_files
from analytics.cli.live import audit_lines, live_figures, live_line
from analytics.cli.ownership import Say, StoreHold
from analytics.cli.terminal import console, print_error, print_note
from analytics.errors import AnalyticsError
from analytics.importers import ImportIssue
from analytics.importers.following import Change, FollowState, pending, scan
from analytics.importers.harness_hooks import (
    QUARANTINE,
    HookFact,
    Position,
    hooks_dir,
    read_facts,
    read_problems,
)
from compactor.events import Capture

DEFAULT_ROOTS = ("~/.claude/projects", "~/.codex/sessions")
LOCK_FILE = ("live", "watch.lock")
LIVE_FILES_MAX = 5
"""A pass that imported more files than this (a catch-up of old sessions) says no live figures."""


def default_roots() -> list[Path]:
    """Claude Code's and Codex's transcript folders, those that exist."""
    return [p for p in (Path(r).expanduser() for r in DEFAULT_ROOTS) if p.is_dir()]


class WatchBusyError(AnalyticsError):
    """Another watcher follows this home."""


@contextlib.contextmanager
def watch_lock(home: Path) -> Iterator[None]:
    """Held while this process watches ``home``; ``WatchBusyError`` naming the other one."""
    path = home.joinpath(*LOCK_FILE)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            raise WatchBusyError(
                f"another `compactlens watch` (PID {pid}) follows {home}; stop it first, or give "
                "this one another --home"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


@dataclass
class _Counts:
    """The figures of a ``RunReport`` that one file of a batch adds."""

    sessions: int = 0
    skipped: int = 0
    messages: int = 0
    harness_compactions: int = 0
    replaced: int = 0
    extended: int = 0
    issues: int = 0

    @classmethod
    def of(cls, report: RunReport) -> _Counts:
        return cls(
            report.sessions,
            report.skipped,
            report.messages,
            report.harness_compactions,
            len(report.replaced),
            report.extended,
            len(report.issues),
        )

    def minus(self, other: _Counts) -> _Counts:
        return _Counts(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))


class Watcher:
    """One home's watcher: the folders it follows, its state, its hold on the store."""

    def __init__(
        self,
        home: Path,
        roots: Sequence[Path],
        say: Say,
        *,
        capture: Capture = "full",
        spool_only: bool = False,
    ) -> None:
        self.home = home
        self.roots = list(roots)
        self.say = say
        self.capture = capture
        self.spool_only = spool_only
        self.state = FollowState.load(home)
        self.hold = StoreHold(home, say)
        self.imports = 0
        """Passes that imported something."""
        self.hook_payloads = 0
        self._said: set[str] = set()
        self._compactions: dict[str, int] = {}
        """Per file and session, the native compactions already audited in this run."""
        self._to_describe: list[Path] = []
        """Files imported by the pass just ended, whose live figures are said after it."""
        self._failure = ""

    def start(self) -> None:
        if not self.spool_only:
            with self.hold.lock:
                self.hold.take()

    def tick(self) -> None:
        """One pass: hook payloads, then the files that changed; a failure is said once (and
        tried again next pass), never raised: a watcher outlives a bad moment."""
        try:
            with self.hold.lock:
                self._pass()
            self._describe()  # outside the pass: readers borrow the store meanwhile
            self._failure = ""
        except Exception as exc:
            message = f"this pass failed ({type(exc).__name__}: {exc}); trying again next pass"
            if message != self._failure:
                print_error(message)
            self._failure = message

    def _pass(self) -> None:
        if not self.spool_only and not self.hold.owned:  # a refused lock costs no database open
            self.hold.take()
        self._hooks()
        ready, _waiting = pending(self.state, scan(self.roots, self.state.named))
        if ready:
            self._import(ready)
        else:
            result = self.hold.project()
            if result is not None and result.new_events:
                self.say(f"projected {result.new_events:,} events other processes spooled")
        self.state.save(self.home)

    def _hooks(self) -> None:
        quarantine = self.state.hooks.setdefault(QUARANTINE, Position())
        for problem in read_problems(self.home, quarantine):
            self.say(
                f"hook payload quarantined ({hooks_dir(self.home) / QUARANTINE}:{problem.line}): "
                f"{problem.reason}"
            )
        facts, problems = read_facts(self.home, self.state.hooks)
        for bad in problems:
            self.say(f"{hooks_dir(self.home) / bad.source}:{bad.line}: {bad.reason}")
        for fact in facts:
            self.hook_payloads += 1
            self.say(self._followed(fact))

    def _followed(self, fact: HookFact) -> str:
        what = f"hook {fact.harness} {fact.event}"
        if fact.trigger:
            what += f" ({fact.trigger})"
        what += f", session {fact.session_id}"
        if fact.summary_chars is not None:
            what += f", summary of {fact.summary_chars:,} characters"
        if fact.transcript_path is None:
            return f"{what}: no transcript named; the payload is kept in {hooks_dir(self.home)}"
        path = Path(fact.transcript_path).expanduser().absolute()
        if not path.is_file():
            return f"{what}: its transcript {path} is not there; the payload is kept"
        added = self.state.name(path)
        return f"{what}: {'following' if added else 'already following'} {path}"

    def _import(self, ready: Sequence[Change]) -> None:
        paths = [c.path for c in ready]
        files = input_files(paths, [])  # the files run_import will read, in its order
        by_path = {c.path: c for c in ready}
        before = [_Counts()]
        lines: list[tuple[Change, _Counts, list[ImportIssue]]] = []

        def on_file(done: int, total: int, report: RunReport) -> None:
            now = _Counts.of(report)
            change = by_path.get(files[done - 1]) if done <= len(files) else None
            if change is not None:
                issues = [
                    i for i in report.issues[before[0].issues :] if i.path == str(change.path)
                ]
                lines.append((change, now.minus(before[0]), issues))
                self._said_import(*lines[-1])  # as it comes: a catch-up can take minutes
            before[0] = now

        with self.hold.set_aside():
            report = run_import(
                paths, self.home, capture=self.capture, on_file=on_file, tails=self.state.tails
            )
        self.imports += 1
        for change, counts, _issues in lines:
            self.state.files[str(change.path)] = change.mark
            if counts.sessions and len(lines) <= LIVE_FILES_MAX:
                self._to_describe.append(change.path)
        for gone in set(paths) - set(files):
            self.state.files.pop(str(gone), None)
        if report.resumed:
            self.say(f"{report.resumed} session(s) completed that an interrupted run left partial")
        for sid, file in report.retired:
            self.say(f"superseded {sid}: no longer in {file}")
        if report.owner:
            self.say(
                f"{report.owner} is owned by another process: this import went to the spool "
                f"({report.spool_file}), which that process projects"
            )
        if report.spool_error:
            print_error(f"{report.spool_error}; the file is imported again next pass")
            for change in ready:
                self.state.files.pop(str(change.path), None)
            self.state.tails.clear()  # what was written is unknown: the next pass places anew

    def _describe(self) -> None:
        """Say the live figures of the files the pass imported (read from the files, with no
        lock held: the store was lent to readers meanwhile)."""
        paths, self._to_describe = self._to_describe, []
        for path in paths:
            self._said_live(path)

    def _said_live(self, path: Path) -> None:
        """The live figures of the file's sessions, and the audit of each new compaction (the
        store held for that alone)."""
        for figures in live_figures(path):
            self.say(live_line(figures))
            key = f"{path}\0{figures.session_id}"
            seen = self._compactions.get(key, 0)
            if len(figures.compactions) <= seen or self.hold.store is None:
                continue
            try:
                with self.hold.lock:
                    store = self.hold.store
                    if store is None:
                        continue
                    audited = audit_lines(store, str(path.resolve()), figures.session_id, seen)
            except Exception as exc:  # the figures are a courtesy: the import is done
                audited = [f"  {figures.session_id}: no audit this time ({exc})"]
            for line in audited:
                self.say(line)
            self._compactions[key] = len(figures.compactions)

    def _said_import(self, change: Change, counts: _Counts, issues: list[ImportIssue]) -> None:
        where = str(change.path)
        size = (
            f"{change.kind} +{change.grown_bytes:,} bytes"
            if change.kind != "touched"
            else "touched"
        )
        grew_meanwhile = _size(change.path) != change.mark.size
        unknown = [i for i in issues if i.unrecognised]
        if unknown:
            if where not in self._said:  # a file that is no transcript (yet) is said once
                self._said.add(where)
                self.say(f"{where} ({size}): not imported: {unknown[0].reason}")
            return
        if counts.sessions:
            what = f"{counts.sessions} session{'s' * (counts.sessions != 1)} stored"
            if counts.extended:
                what += f" ({counts.extended} extended: only what was added)"
            if counts.replaced:
                what += f" ({counts.replaced} superseding the version before)"
            what += f", {counts.messages:,} message{'s' * (counts.messages != 1)}"
            if counts.harness_compactions:
                what += f", {counts.harness_compactions} harness compaction"
                what += "s" * (counts.harness_compactions != 1)
        else:
            what = "unchanged since stored"
        self.say(f"{where} ({size}): {what}")
        if not grew_meanwhile:  # a line cut short by a write in progress is read next pass
            for issue in issues:
                key = str(issue)
                if key not in self._said:
                    self._said.add(key)
                    self.say(f"problem: {issue}")

    def close(self) -> None:
        self.hold.close()
        self.state.save(self.home)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


class Stopper:
    """SIGINT and SIGTERM set a flag (nothing else: a handler that took a lock could wait on
    the very pass it interrupted); the loop looks at it between passes and while it waits."""

    def __init__(self) -> None:
        self.stopped = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Stopper:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._stop)
        return self

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopped = True

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)

    def wait(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stopped and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))


def run_watch(
    roots: Sequence[Path],
    home: Path,
    *,
    interval_s: float,
    say: Say,
    capture: Capture = "full",
    spool_only: bool = False,
    once: bool = False,
    on_ready: Callable[[Watcher], None] | None = None,
) -> Watcher:
    """Watch until SIGINT or SIGTERM (or one pass with ``once``); the watcher, for its counts."""
    with watch_lock(home), Stopper() as stopper:
        watcher = Watcher(home, list(roots), say, capture=capture, spool_only=spool_only)
        try:
            watcher.start()
            if on_ready is not None:
                on_ready(watcher)
            while not stopper.stopped:
                watcher.tick()
                if once:
                    break
                stopper.wait(interval_s)
        finally:
            watcher.close()
    return watcher


def catch_up(home: Path, say: Say) -> bool:
    """One pass over the hook payloads and the transcripts they named (no folder), for a
    command about to project the spool (``ingest``), so that the compaction a hook saw is in
    the store after it. False, doing nothing, when a watcher follows the home: it does this."""
    try:
        with watch_lock(home):
            watcher = Watcher(home, [], say, spool_only=True)
            try:
                watcher.tick()
            finally:
                watcher.close()
    except WatchBusyError:
        return False
    return True


class CaptureName(StrEnum):
    FULL = "full"
    METADATA = "metadata"


def _stamped(line: str) -> None:
    console.print(
        f"{datetime.now():%H:%M:%S} {line}", soft_wrap=True, highlight=False, markup=False
    )


def watch(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Transcript files or folders to follow (default: ~/.claude/projects and "
            "~/.codex/sessions, those that exist)",
            show_default=False,
        ),
    ] = None,
    interval: Annotated[
        float, typer.Option(min=0.05, help="Seconds between looks at the files and hook payloads")
    ] = 1.0,
    once: Annotated[
        bool, typer.Option("--once", help="One pass (import what changed, project), then exit")
    ] = False,
    spool_only: Annotated[
        bool,
        typer.Option(
            "--spool-only",
            help="Never open the store: leave the projection to its owner (the app)",
        ),
    ] = False,
    capture: Annotated[
        CaptureName, typer.Option(help="metadata: sizes, hashes, roles and tool names, no text")
    ] = CaptureName.FULL,
    home: HomeOption = None,
) -> None:
    """Follow Claude Code and Codex transcripts as they are written, and the payloads of
    `compactlens hook`: import what changed (a half-written last line waits) until SIGINT or
    SIGTERM, one line per import."""
    root = resolve_home(home)
    roots = [p.expanduser() for p in paths] if paths else default_roots()
    missing = [p for p in roots if not p.exists()]
    if missing:
        raise typer.BadParameter(f"{missing[0]}: no such file or folder", param_hint="PATH")

    def ready(watcher: Watcher) -> None:
        followed = ", ".join(map(str, roots)) or "no transcript folder (none of "
        if not roots:
            followed += f"{', '.join(DEFAULT_ROOTS)} exists)"
        print_note(
            f"watching {followed} and the hook payloads in {hooks_dir(root)} every "
            f"{interval:g}s; stop with Ctrl-C or SIGTERM"
        )

    with handled():
        watcher = run_watch(
            roots,
            root,
            interval_s=interval,
            say=_stamped,
            capture="metadata" if capture == CaptureName.METADATA else "full",
            spool_only=spool_only,
            once=once,
            on_ready=None if once else ready,
        )
    print_note(
        f"stopped: {watcher.imports} import pass{'es' * (watcher.imports != 1)}, "
        f"{watcher.hook_payloads} hook payload{'s' * (watcher.hook_payloads != 1)}"
    )


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(watch)
