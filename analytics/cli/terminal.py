"""What the ``compactlens`` command prints around its results: the consoles, progress bars, notes
and problem lines.

Results go to stdout; progress bars, problems and errors to stderr, and progress bars only when
stderr is a terminal, so that piped output (``stats --json``) stays clean. Each rejected file is
one line: ``path:line: reason``. The per-command result tables are in ``tables``. Nothing here
does any work.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any

from rich import filesize
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from analytics.cli.commands import FileProgress, RunReport
from analytics.importers import ImportIssue
from analytics.store import QuarantinedLine
from analytics.store.projector import Progress as IngestProgress

console = Console(markup=False, emoji=False)
err_console = Console(stderr=True, markup=False, emoji=False)
"""Both consoles print text as written: what they print is mostly data (session ids, models,
file names, tool names), in which a ``[/bold]`` is no closing tag (rich would raise
``MarkupError``) and ``:smile:``, or the ``:100:`` of ``path:100: reason``, no emoji. Styled
output is a ``Text`` with a style, never markup in a string."""
PIPED_WIDTH = 160
"""Columns of output that goes to a file or a pipe (no terminal says how wide it is): tables
are not wrapped at 80 columns for a reader who never sees a terminal. ``COLUMNS`` wins."""


def fit_consoles() -> None:
    """Size both consoles for this command, from ``COLUMNS`` when set, else the terminal's
    width, else ``PIPED_WIDTH`` (read at each command: a long-lived process, such as a test
    run, may change its environment between commands)."""
    columns = os.environ.get("COLUMNS", "")
    for each in (console, err_console):
        if columns.isdigit() and int(columns) > 0:
            each.width = int(columns)
        elif each.is_terminal:
            each.width = shutil.get_terminal_size().columns
        else:
            each.width = PIPED_WIDTH


MAX_LISTED = 20
"""Quarantined lines listed one by one; the rest are counted."""


class CountColumn(ProgressColumn):
    """``done/total unit`` (bytes shown as kB/MB), plus the task's ``extra`` text."""

    def render(self, task: Task) -> Text:
        unit = str(task.fields.get("unit", ""))
        if unit == "bytes":
            total = "?" if task.total is None else filesize.decimal(int(task.total))
            shown = f"{filesize.decimal(int(task.completed))}/{total}"
        else:
            total = "?" if task.total is None else f"{int(task.total):,}"
            shown = f"{int(task.completed):,}/{total} {unit}"
        return Text(shown + str(task.fields.get("extra", "")), style="progress.download")


class RateColumn(ProgressColumn):
    """Items or bytes per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        if not speed:
            return Text("")
        unit = str(task.fields.get("unit", ""))
        shown = f"{filesize.decimal(int(speed))}/s" if unit == "bytes" else f"{speed:,.1f} {unit}/s"
        return Text(shown, style="progress.data.speed")


class RunProgress:
    """One live display for a command: a bar per phase, each added when it first reports."""

    def __init__(self) -> None:
        self.progress = Progress(
            TextColumn("{task.description}", style="progress.description", markup=False),
            BarColumn(),
            CountColumn(),
            RateColumn(),
            TimeElapsedColumn(),
            console=err_console,
            disable=not err_console.is_terminal,
        )

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def files(self, label: str) -> FileProgress:
        """A callback for a bar over files, showing the sessions found so far."""
        task: TaskID | None = None

        def update(done: int, total: int, report: RunReport) -> None:
            nonlocal task
            if task is None:
                task = self.progress.add_task(label, total=total, unit="files", extra="")
            extra = f", {report.sessions:,} sessions"
            self.progress.update(task, completed=done, total=total, extra=extra)

        return update

    def spool(self, label: str) -> IngestProgress:
        """A callback for a bar over spool bytes; each projection gets its own bar."""
        task: TaskID | None = None
        last = -1

        def update(done: int, total: int) -> None:
            nonlocal task, last
            if task is None or done < last:
                task = self.progress.add_task(label, total=total, unit="bytes")
            last = done
            self.progress.update(task, completed=done, total=max(total, done))

        return update


PROGRESS_EVERY_S = 5.0
"""How often ``tune`` prints a progress line when stderr is not a terminal (no bar there)."""


def _best(state: Any) -> str:
    if state.best_value is None:
        return ""
    if state.objective == "cost":
        unit = f" {state.cost_unit}" if getattr(state, "cost_unit", "") else ""
        return f", best {state.best_name} (cost {state.best_value:,.4f}{unit})"
    return f", best {state.best_name} ({state.best_tokens_billed:,} tokens)"


def trial_progress(progress: RunProgress) -> Callable[[Any], None]:
    """A callback for ``run_tune``: trials done, the best configuration so far, an ETA; a bar
    on a terminal, else a line on stderr every ``PROGRESS_EVERY_S`` seconds and at the end."""
    task: TaskID | None = None
    printed = -PROGRESS_EVERY_S

    def update(state: Any) -> None:
        nonlocal task, printed
        eta = f", ETA {state.eta_s:.0f}s" if state.eta_s is not None else ""
        if not err_console.is_terminal:
            now = time.monotonic()
            if now - printed >= PROGRESS_EVERY_S or state.done >= state.total:
                printed = now
                line = f"tune: {state.done:,}/{state.total:,} trials{_best(state)}{eta}"
                err_console.print(line, soft_wrap=True, markup=False, highlight=False)
            return
        if task is None:
            task = progress.progress.add_task("trials", total=state.total, unit="trials")
        progress.progress.update(
            task, completed=state.done, total=state.total, extra=f"{_best(state)}{eta}"
        )

    return update


def print_error(message: str) -> None:
    """One line on stderr, never wrapped."""
    err_console.print(f"error: {message}", soft_wrap=True, markup=False, highlight=False)


def print_note(message: str) -> None:
    """One informational line on stderr (what happened beyond the counts), never wrapped."""
    err_console.print(message, soft_wrap=True, markup=False, highlight=False)


def print_issues(issues: Sequence[ImportIssue]) -> None:
    """One line per rejected file: its first problem, and how many more it had."""
    by_file: dict[str, list[ImportIssue]] = {}
    for issue in issues:
        by_file.setdefault(issue.path, []).append(issue)
    for found in by_file.values():
        first, rest = found[0], found[1:]
        more = ""
        if rest:
            lines = [str(i.line) for i in rest if i.line is not None]
            at = f" (lines {', '.join(lines[:10])}{', …' if len(lines) > 10 else ''})"
            more = f"; and {len(rest)} more problem{'s' * (len(rest) > 1)}{at if lines else ''}"
        err_console.print(f"rejected: {first}{more}", soft_wrap=True, markup=False, highlight=False)


def print_skipped(issues: Sequence[ImportIssue]) -> None:
    """One line per file found in a folder that is not a transcript: skipped, not rejected."""
    for issue in issues:
        err_console.print(f"skipped: {issue}", soft_wrap=True, markup=False, highlight=False)


def print_quarantined(lines: Sequence[QuarantinedLine]) -> None:
    for q in lines[:MAX_LISTED]:
        err_console.print(
            f"quarantined: {q.source}:{q.line}: {q.reason}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
    if len(lines) > MAX_LISTED:
        err_console.print(
            f"quarantined: … and {len(lines) - MAX_LISTED} more (see the quarantine table)",
            soft_wrap=True,
        )


def window_too_small(window: int, why: str) -> None:
    err_console.print(
        f"warning: --window {window:,} is smaller than the agent's own prompt ({why}); every "
        "turn ends in an emergency truncation that cannot get under the window",
        soft_wrap=True,
        markup=False,
        highlight=False,
    )
