"""The ``compactlens`` command line (typer + rich).

This module parses arguments, wires the pieces together and prints; the work itself lives in
the compactor and analytics modules. Environment variables are read here and only here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from analytics.synthetic import SYSTEM_PROMPT, generate_session
from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    CompactorConfig,
    ExtractiveSummarizer,
    JsonlRecordStore,
    ProgressiveCompactor,
    SpoolSink,
    estimate_tokens,
    format_notification,
    validate_history,
)

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
console = Console()

HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Data folder (spool, DuckDB, offload files). Default: $COMPACTLENS_HOME, else ./data",
    ),
]


def resolve_home(home: Path | None) -> Path:
    """``--home``, else ``$COMPACTLENS_HOME``, else ``./data``."""
    if home is not None:
        return home
    env = os.environ.get("COMPACTLENS_HOME")
    return Path(env) if env else Path("data")


@app.callback()
def _root() -> None:
    """compactlens: progressive context compaction for LLM agents, and its analytics."""


@app.command()
def demo(
    home: HomeOption = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open the app")] = False,
    window: Annotated[int, typer.Option(help="Context window in tokens")] = 32_000,
    sessions: Annotated[int, typer.Option(min=1, help="Synthetic sessions to run")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the first session")] = 7,
) -> None:
    """Generate synthetic agent sessions and run them through CompactionSession, offline."""
    root = resolve_home(home)
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
    for k in range(sessions):
        msgs = generate_session(seed + k)
        session = CompactionSession(
            base,
            SYSTEM_PROMPT,
            session_id=f"demo-{seed + k}",
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
    _summary(totals, root, problems)
    if not no_browser:
        console.print("[dim]The app arrives with a later release; events are in the spool.[/]")


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
        console.print(f"[red]{problems} invalid views[/]")
        raise typer.Exit(1)


def main() -> None:
    app()
