"""``compactlens ledger [SESSION] [--json]``: did each compaction pay for itself?

One row per effective compaction: the turn it produced, the cached prefix it invalidated, what
its own turn cost beyond the one it replaced (cache write and summariser), what the later turns
of its reign saved against the uncompacted path, and the turn at which it broke even (or why it
never did); then whether it made the context bigger or was back above its tier at once. The
figures come from ``analytics.queries.ledger``; this module only parses and prints.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from analytics.cli.analysis import JsonOption, analysed, price_profile_of
from analytics.cli.common import (
    Command,
    HomeOption,
    PriceProfileOption,
    handled,
    resolve_home,
    shown,
)
from analytics.cli.terminal import console
from analytics.queries.ledger import ledger_json


def _money(value: float | None) -> str:
    return "–" if value is None else f"{value:+.4f}"


def ledger_table(found: dict[str, Any]) -> None:
    rows = found["compactions"]
    table = Table(title=f"compaction ledger ({len(rows):,} compaction{'s' * (len(rows) != 1)})")
    for column in ("session", "turn", "tier", "invalidated", "rewrite", "saved after", "paid"):
        table.add_column(column, overflow="fold")
    for row in rows:
        paid = f"at turn {row['break_even_turn']}" if row["paid"] else (row["never"] or "–")
        if row["necessary"]:
            paid += " (uncompacted would not fit)"
        if row["grew"]:
            paid += f"; grew +{row['growth_tokens']:,} tokens"
        if row["rebound_turns"] is not None:
            paid += f"; back at its tier after {row['rebound_turns']} turns"
        table.add_row(
            escape(str(row["session_id"])),
            "–" if row["turn"] is None else str(row["turn"]),
            escape(str(row["tier_name"])),
            "–" if row["invalidated_tokens"] is None else f"{row['invalidated_tokens']:,}",
            _money(row["rewrite_cost"]),
            _money(row["saved_after"]),
            escape(paid),
        )
    console.print(table)
    share = found["paid_share"]
    if share is not None:
        console.print(
            f"{share:.0%} of {found['priced']:,} priced compactions paid for themselves; "
            f"{found['grew']:,} grew the context; {found['rebounded']:,} were back at their "
            "tier within 3 turns",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    kinds = [k for k in found.get("by_kind", []) if k["paid_share"] is not None]
    if len(kinds) > 1:
        said = "; ".join(
            f"{k['origin']} {str(k['tier']).lower()} ({k['trigger']}): {k['paid_share']:.0%} "
            f"of {k['priced']:,}"
            for k in kinds
        )
        console.print(f"paid, by kind: {said}", soft_wrap=True, highlight=False, markup=False)


def ledger(
    session: str | None = typer.Argument(None, help="One session id (default: all)"),
    as_json: JsonOption = False,
    home: HomeOption = None,
    price_profile: PriceProfileOption = None,
) -> None:
    """Did each compaction pay for itself: cache invalidated, rewrite cost, break-even turn."""
    profile = price_profile_of(price_profile)
    root = resolve_home(home, write=False)
    with handled(), analysed(root) as store:
        found = ledger_json(store, session, price_profile=profile)
    shown(found, as_json, ledger_table)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(ledger)
