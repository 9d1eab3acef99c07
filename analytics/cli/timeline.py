"""``compactlens timeline [SESSION] [--json]``: the decisions not taken (issue 31 item 5).

For each turn near a threshold at which nothing was compacted: the share of the window the
compactor judged, the tier that was due (if any) and why nothing fired. The figures come from
``analytics.queries.quiet``; this module only parses and prints.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from analytics.cli.analysis import JsonOption
from analytics.cli.common import Command, HomeOption, handled, resolve_home, shown
from analytics.cli.terminal import console
from analytics.queries.quiet import quiet_json
from analytics.store.lending import reading_store


def quiet_table(found: dict[str, Any]) -> None:
    rows = found["turns"]
    if not rows:
        console.print(
            f"No turn came within {found['margin']:.0%} of a threshold without compacting.",
            highlight=False,
        )
        return
    table = Table(title=f"decisions not taken ({len(rows):,} turn{'s' * (len(rows) != 1)})")
    for column in ("session", "turn", "why nothing fired"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(escape(str(row["session_id"])), str(row["turn"]), escape(str(row["words"])))
    console.print(table)
    counts = ", ".join(f"{n:,} {code}" for code, n in found["by_reason"].items())
    console.print(f"by reason: {counts}", soft_wrap=True, highlight=False, markup=False)


def timeline(
    session: str | None = typer.Argument(None, help="One session id (default: all)"),
    as_json: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """The decisions not taken: turns near a threshold that compacted nothing, and why."""
    root = resolve_home(home, write=False)
    with handled(), reading_store(root, "timeline", read_only=True) as store:
        found = quiet_json(store, session)
    shown(found, as_json, quiet_table)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(timeline)
