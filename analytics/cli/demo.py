"""``compactlens demo`` and ``ui``: the synthetic sessions, and the app started on a store.

``demo`` generates the seeded synthetic sessions, runs them through ``CompactionSession`` with
the offline summariser, projects them and starts the app; ``ui`` starts the app on any store.
The app itself lives in ``app/`` and is started by ``analytics.cli.serve``; this module parses
options and prints.
"""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from analytics.cli.common import (
    Command,
    HomeOption,
    PortOption,
    WindowOption,
    handled,
    resolve_home,
)
from analytics.cli.ingesting import run_ingest
from analytics.cli.serve import (
    app_urls,
    exposed,
    free_port,
    serve_app,
    stop_app,
    wait_until_ready,
)
from analytics.cli.tables import ingest_summary
from analytics.cli.terminal import (
    console,
    print_error,
    print_note,
    window_too_small,
)
from analytics.replay.synthetic import SYSTEM_PROMPT, generate_session
from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    CompactorConfig,
    ExtractiveSummarizer,
    JsonlRecordStore,
    Message,
    ProgressiveCompactor,
    SpoolSink,
    estimate_tokens,
    format_notification,
    validate_history,
)

DEMO_FOLLOW_UPS = 7
"""Follow-up requests in the demo's first session: more than the offline summary keeps, so
the retention page has a silent drop to show."""


def demo(
    home: HomeOption = None,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Start the app but open no browser")
    ] = False,
    serve: Annotated[
        bool, typer.Option("--serve/--no-serve", help="Start the app at the end (Ctrl-C stops)")
    ] = True,
    port: PortOption = 8501,
    window: WindowOption = 32_000,
    sessions: Annotated[int, typer.Option(min=1, help="Synthetic sessions to run")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the first session")] = 7,
) -> None:
    """Synthetic agent sessions through CompactionSession (offline), stored, then the app."""
    root = resolve_home(home)
    prompt = estimate_tokens([Message(role="system", content=SYSTEM_PROMPT)])
    if prompt >= window:
        window_too_small(window, f"the demo agent's system prompt alone is {prompt:,} tokens")
    sink = SpoolSink(root / "spool")
    store = JsonlRecordStore(root / "records")
    base = ProgressiveCompactor(
        ExtractiveSummarizer(),
        window,
        config=CompactorConfig(),
        offloader=CompactionOffloader(root / "offload", "demo"),
        record_store=store,
    )
    totals: dict[CompactionTier, int] = dict.fromkeys(CompactionTier, 0)
    problems = 0
    run = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")  # each run its own sessions
    for k in range(sessions):
        sid = f"demo-{seed + k}-{run}"
        last = k == sessions - 1  # the last session floods the context with one build log
        msgs = generate_session(
            seed + k,
            huge_result_bytes=200_000 if last else 0,
            offload_dir=f".compactlens/tool_results/{sid}" if last else "",
            follow_ups=DEMO_FOLLOW_UPS if k == 0 else 0,  # more than a summary keeps
        )
        session = CompactionSession(
            base,
            SYSTEM_PROMPT,
            session_id=sid,
            event_sink=sink,
            agent="synthetic",
            source="demo",
        )
        console.rule(
            f"session {session.session_id}: {len(msgs) - 1} messages, "
            f"{estimate_tokens(msgs[1:]):,} tokens, window {window:,}"
        )
        for m in msgs[1:]:
            if m.role == "assistant":
                view, record = session.prepare()
                problems += len(validate_history(view))
                if record.tier != CompactionTier.NONE and record.effective:
                    totals[record.tier] += 1
                    console.print(format_notification(record), highlight=False)
            session.append(m)
        session.close()
    with handled():
        report = run_ingest(root)
    ingest_summary(report)
    _summary(totals, root, problems)
    if serve:
        _serve(root, "127.0.0.1", port, open_browser=not no_browser)


def ui(
    port: PortOption = 8501,
    host: Annotated[
        str,
        typer.Option(
            "--host", help="Address to bind (127.0.0.1: this machine only; the app has no login)"
        ),
    ] = "127.0.0.1",
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Open no browser")] = False,
    allow_path: Annotated[
        list[Path] | None,
        typer.Option(
            "--allow-path",
            exists=True,
            file_okay=False,
            help="A folder the tuning form may read transcripts from, besides the home "
            "(repeatable)",
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """Start the app on the store (it owns the store and projects the spool as it grows)."""
    root = resolve_home(home)
    _serve(root, host, port, open_browser=not no_browser, allow_paths=allow_path or [])


class _StopSignalError(Exception):
    """SIGTERM, SIGHUP or SIGINT arrived: stop the app as Ctrl-C does."""


class _Stopper:
    """The handler of the stop signals: while the server is being started (its process not yet
    in hand) a signal is held, and raised as soon as ``arm`` is called; then at once."""

    def __init__(self) -> None:
        self.held: str | None = None
        self.armed = False

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if not self.armed:
            self.held = self.held or name
            return
        raise _StopSignalError(name)

    def arm(self) -> None:
        self.armed = True
        if self.held:
            raise _StopSignalError(self.held)


def _warn_if_exposed(host: str, port: int, root: Path, allowed: list[Path]) -> None:
    if not exposed(host):
        return
    folders = ", ".join(str(p) for p in [root.resolve(), *allowed])
    print_note(
        f"warning: --host {host}: the app listens beyond this machine and has no authentication; "
        f"anyone who reaches port {port} reads this store's transcripts and offloaded files and "
        f"can start tuning runs over transcripts under {folders}. Bind 127.0.0.1 and use an SSH "
        "tunnel, or put an authenticating proxy in front."
    )


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _serve(
    root: Path,
    host: str,
    port: int,
    *,
    open_browser: bool,
    allow_paths: Sequence[Path] = (),
) -> None:
    """Run the app until it exits, Ctrl-C, SIGTERM or SIGHUP, then stop its whole process
    group; print its URLs once it answers."""
    port = port or free_port(host)
    allowed = [p.resolve() for p in allow_paths]
    _warn_if_exposed(host, port, root, allowed)
    stopper = _Stopper()
    handlers = {s: signal.signal(s, stopper) for s in STOP_SIGNALS}
    process = serve_app(root, host=host, port=port, open_browser=open_browser, allow_paths=allowed)
    try:
        stopper.arm()  # a signal that came while the server was starting is raised here
        _run_until_stopped(process, app_urls(host, port))
    except (TimeoutError, RuntimeError) as exc:
        print_error(f"the app did not start: {exc}")
        raise typer.Exit(1) from None
    except _StopSignalError as exc:
        if exc.args[0] != "SIGINT":
            print_note(f"{exc}: stopping the app")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut the stop short
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C: SIGKILL
        stop_app(process)
        for signum, previous in handlers.items():
            signal.signal(signum, previous)


def _run_until_stopped(process: subprocess.Popen[bytes], urls: list[str]) -> None:
    """Print the URLs once the app answers, then wait until it exits (or a signal arrives)."""
    wait_until_ready(urls[0], 90.0, process=process)
    more = "".join(f"  {u}" for u in urls[1:])
    console.print(f"compactlens app: {urls[0]}{more}  (Ctrl-C stops it)", soft_wrap=True)
    console.file.flush()  # the URL must reach a pipe now, not when the app stops
    while process.poll() is None:
        # a timed sleep, not a blocking wait: a Ctrl-C that another thread (DuckDB's,
        # Polars') received is only acted on when the main thread wakes up
        time.sleep(0.25)


def _summary(totals: dict[CompactionTier, int], root: Path, problems: int) -> None:
    table = Table(title="Compactions by tier")
    table.add_column("tier")
    table.add_column("count", justify="right")
    for tier, n in totals.items():
        if tier != CompactionTier.NONE:
            table.add_row(tier.label, str(n))
    console.print(table)
    console.print(
        f"events: {root / 'spool'}   records: {root / 'records'}   "
        f"offloaded files: {root / 'offload'}"
    )
    if problems:
        console.print(Text(f"{problems} invalid views", style="red"))
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``demo`` and ``ui`` to ``app``."""
    for command in (demo, ui):
        app.command(cls=Command)(command)
