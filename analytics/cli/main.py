"""The ``compactlens`` command line (typer + rich).

This module parses arguments, wires the pieces together and prints; the work itself lives in
``analytics.cli.commands`` (import, replay, ingest, rebuild), ``analytics.queries.stats`` and the
compactor. Environment variables are read here and only here. Exit codes: 0 success, 1 some input
rejected or the store unusable (one line saying why and what to do), 2 usage.
"""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from analytics.cli.analysis import register as register_analysis
from analytics.cli.audit import register as register_audit
from analytics.cli.commands import (
    RunReport,
    load_config,
    run_import,
    run_ingest,
    run_rebuild,
    run_replay,
    run_watch,
)
from analytics.cli.common import (
    Command,
    HomeOption,
    WindowOption,
    handled,
    resolve_home,
)
from analytics.cli.common import app as app  # the console script's typer app
from analytics.cli.demo import register as register_demo
from analytics.cli.exports import register as register_exports
from analytics.cli.hooks import register as register_hooks
from analytics.cli.ingesting import MaintenanceTimes, interval_seconds
from analytics.cli.inputs import split_issues
from analytics.cli.ledger import register as register_ledger
from analytics.cli.tables import (
    import_summary,
    ingest_summary,
    replay_summary,
)
from analytics.cli.terminal import (
    RunProgress,
    console,
    err_console,
    fit_consoles,
    print_error,
    print_issues,
    print_note,
    print_quarantined,
    print_skipped,
    window_too_small,
)
from analytics.cli.timeline import register as register_timeline
from analytics.cli.watching import register as register_watch
from analytics.importers import ImportIssue
from analytics.store.projector import IngestResult
from compactor import (
    AnthropicChatModel,
    ChatModelError,
    CompactionOffloader,
    CompactorConfig,
    ExtractiveSummarizer,
    LLMSummarizer,
    OpenAIChatModel,
    ProgressiveCompactor,
    Summarizer,
)


class FormatName(StrEnum):
    AUTO = "auto"
    OPENAI = "openai"
    CLAUDE_CODE = "claude-code"
    SWE_AGENT = "swe-agent"
    MINI_SWE_AGENT = "mini-swe-agent"
    AIDER = "aider"
    HARNESS9_RECORDS = "harness9-records"
    CODEX = "codex"
    OPENHANDS_V0 = "openhands-v0"
    OPENHANDS_SDK = "openhands-sdk"


class CaptureName(StrEnum):
    FULL = "full"
    METADATA = "metadata"


@app.callback()
def _root() -> None:
    """compactlens: progressive context compaction for LLM agents, and its analytics."""
    fit_consoles()


PathsArgument = Annotated[
    list[Path], typer.Argument(help="Transcript files or folders (walked recursively)")
]
FormatOption = Annotated[
    FormatName, typer.Option("--format", help="Transcript format; auto judges each file's content")
]


def _finish(report: RunReport, skipped: list[ImportIssue], rejected: list[ImportIssue]) -> None:
    """Problem lines, then exit 1 if any input was rejected or any event not recorded.

    Files found in a folder that are not transcripts are listed as skipped and do not count.
    """
    print_skipped(skipped)
    print_issues(rejected)
    for note in report.notes():
        print_note(note)
    if report.spool_error:
        print_error(f"{report.spool_error}; these events were not recorded, run the command again")
    if rejected:
        n = len({i.path for i in rejected})
        if report.sessions or report.records:
            rest = "everything else was loaded"
        elif report.skipped:
            rest = "everything else was already in the store"
        else:
            rest = "nothing was loaded"
        print_error(f"{n} input{'s' * (n != 1)} rejected (see above); {rest}")
    if rejected or report.spool_error:
        raise typer.Exit(1)


@app.command("import", cls=Command)
def import_(
    paths: PathsArgument,
    fmt: FormatOption = FormatName.AUTO,
    home: HomeOption = None,
    capture: Annotated[
        CaptureName, typer.Option(help="metadata: sizes, hashes, roles and tool names, no text")
    ] = CaptureName.FULL,
) -> None:
    """Load transcripts as sessions (session_started + message_appended events) and project."""
    root = resolve_home(home)
    with handled(), RunProgress() as bars:
        report = run_import(
            paths,
            root,
            fmt=fmt.value,
            capture=capture.value,
            on_file=bars.files("importing"),
            on_ingest=bars.spool("projecting"),
        )
    skipped, rejected = split_issues(paths, report.issues)
    import_summary(report, len(skipped))
    _finish(report, skipped, rejected)


def _summarizer(spec: str) -> Summarizer:
    """``extractive``, ``openai:MODEL`` or ``anthropic:MODEL`` (keys and URL from the env)."""
    kind, _, model = spec.partition(":")
    try:
        if kind == "extractive" and not model:
            return ExtractiveSummarizer()
        if kind == "openai" and model:
            return LLMSummarizer(
                OpenAIChatModel(
                    model,
                    base_url=os.environ.get("OPENAI_BASE_URL") or None,
                    api_key=os.environ.get("OPENAI_API_KEY") or None,
                )
            )
        if kind == "anthropic" and model:
            key = os.environ.get("ANTHROPIC_API_KEY") or None
            return LLMSummarizer(AnthropicChatModel(model, api_key=key))
    except ChatModelError as exc:
        raise typer.BadParameter(str(exc), param_hint="--summarizer") from None
    raise typer.BadParameter(
        f"{spec!r}: expected extractive, openai:MODEL or anthropic:MODEL",
        param_hint="--summarizer",
    )


def _config(path: Path | None) -> CompactorConfig:
    if path is None:
        return CompactorConfig()
    try:
        return load_config(path)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None


@app.command(cls=Command)
def replay(
    paths: PathsArgument,
    window: WindowOption,
    config: Annotated[
        Path | None, typer.Option(help="JSON or TOML file of CompactorConfig fields")
    ] = None,
    summarizer: Annotated[
        str, typer.Option(help="extractive (offline), openai:MODEL or anthropic:MODEL")
    ] = "extractive",
    fmt: FormatOption = FormatName.AUTO,
    home: HomeOption = None,
    capture: Annotated[
        CaptureName, typer.Option(help="metadata: sizes, hashes, roles and tool names, no text")
    ] = CaptureName.FULL,
    force: Annotated[
        bool, typer.Option("--force", help="Replace replays already stored with these settings")
    ] = False,
    uncalibrated: Annotated[
        bool,
        typer.Option(
            "--uncalibrated",
            help="Byte estimate only, the transcript's usage not fed: as tune measures (to "
            "reproduce its figures)",
        ),
    ] = False,
) -> None:
    """Replay transcripts through CompactionSession, emitting compaction events, and project."""
    chosen, settings = _summarizer(summarizer), _config(config)  # usage errors before any write
    root = resolve_home(home)
    compactor = ProgressiveCompactor(
        chosen,
        window,
        config=settings,
        offloader=CompactionOffloader(root / "offload", "replay"),
    )
    with handled(), RunProgress() as bars:
        report = run_replay(
            paths,
            root,
            compactor,
            fmt=fmt.value,
            capture=capture.value,
            force=force,
            on_file=bars.files("replaying"),
            on_ingest=bars.spool("projecting"),
            calibrate=not uncalibrated,
        )
    skipped, rejected = split_issues(paths, report.issues)
    replay_summary(report, window, len(skipped))
    over = [r for r in report.replays if r.max_view_tokens > window]
    if over:
        window_too_small(
            window,
            f"{len(over)} of {len(report.replays)} sessions still had a view over the window "
            "after compaction: their system prompt, task and newest exchange alone exceed it",
        )
    _finish(report, skipped, rejected)


def _print_batch(result: IngestResult) -> None:
    _print_skipped_spool(result)
    if result.lines or result.quarantined:
        err_console.print(
            f"+{result.new_events:,} events ({result.duplicates:,} duplicates, "
            f"{result.quarantined:,} quarantined)"
            + (", then the store's maintenance" if result.maintained else ""),
            highlight=False,
        )


def _print_watch_error(said: str, wait_s: float) -> None:
    print_error(f"{said} (watching goes on: trying again in {wait_s:g}s)")


def _print_skipped_spool(result: IngestResult) -> None:
    for line in result.skipped:
        err_console.print(f"skipped: {line}", soft_wrap=True, highlight=False, markup=False)


@app.command(cls=Command)
def ingest(
    watch: Annotated[bool, typer.Option(help="Keep projecting until SIGTERM or Ctrl-C")] = False,
    interval: Annotated[
        float,
        typer.Option(
            min=0.01, callback=interval_seconds, help="Seconds between projections with --watch"
        ),
    ] = 0.5,
    maintain_every: Annotated[
        float | None,
        typer.Option(
            min=0,
            metavar="SECONDS",
            help="With --watch: run the store's maintenance this often while it commits "
            "(0: not by time). Default: 300 on a lake, at stop only on a local file",
        ),
    ] = None,
    maintain_commits: Annotated[
        int | None,
        typer.Option(
            min=0,
            metavar="N",
            help="With --watch: ... and after N commits (0: not by count). Default: 200 on a "
            "lake, at stop only on a local file",
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Project the spool into the DuckDB store (exit 1 if spool lines were quarantined or a
    spool file could not be read)."""
    if not watch and (maintain_every, maintain_commits) != (None, None):
        raise typer.BadParameter(
            "only with --watch: a single ingest runs the store's maintenance once, at its end",
            param_hint="--maintain-every/--maintain-commits",
        )
    root = resolve_home(home)

    def ready() -> None:
        err_console.print(
            f"watching {root / 'spool'} every {interval:g}s; stop with Ctrl-C or SIGTERM",
            soft_wrap=True,
            highlight=False,
        )

    with handled():
        if watch:
            report = run_watch(
                root,
                interval_s=interval,
                on_result=_print_batch,
                on_ready=ready,
                maintenance=MaintenanceTimes(maintain_every, maintain_commits),
                on_error=_print_watch_error,
            )
        else:
            with RunProgress() as bars:
                report = run_ingest(root, on_ingest=bars.spool("projecting"))
    if not watch:  # --watch said them as they came
        _print_skipped_spool(report.result)
    print_quarantined(report.quarantined)
    ingest_summary(report)
    if (report.quarantined or report.result.skipped) and not watch:
        raise typer.Exit(1)


@app.command(cls=Command)
def rebuild(home: HomeOption = None) -> None:
    """Recreate every table from the spool; the old database file is kept as a backup."""
    root = resolve_home(home)
    with handled(), RunProgress() as bars:
        report = run_rebuild(root, on_ingest=bars.spool("rebuilding"))
    _print_skipped_spool(report.result)
    if report.backup is not None:
        console.print(
            f"old database kept as {report.backup} ({report.backup_bytes:,} bytes)",
            soft_wrap=True,
            highlight=False,
        )
    ingest_summary(report, "rebuild")


register_analysis(app)
register_audit(app)
register_ledger(app)
register_timeline(app)
register_demo(app)
register_exports()
register_watch(app)
register_hooks(app)


def main() -> None:
    """The console script: a reader that goes away (``| head``) ends the command quietly."""
    try:
        app()
    finally:
        _quiet_if_stdout_closed()


def _quiet_if_stdout_closed() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit and would print "Exception ignored": point the
        # descriptor at /dev/null so that last flush succeeds.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":
    main()
