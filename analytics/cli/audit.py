"""``compactlens audit [SESSION] [--json]``: the harness's own compactions, audited.

Prints one row per native compaction (Claude Code, Codex, OpenHands): its size before and after,
what it lost of the history it replaced, the user's messages it did not keep, and the files the
agent read again after it; then the re-read rates of the harnesses' compactions and of ours.
The figures come from ``analytics.queries.audit``; this module only parses and prints.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from analytics.cli.common import Command, HomeOption, handled, resolve_home, shown
from analytics.cli.terminal import console
from analytics.queries.audit import audit_json
from analytics.store.lending import reading_store


def _list(items: list[str], limit: int = 4) -> str:
    if not items:
        return "–"
    more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def audit_table(found: dict[str, Any]) -> None:
    table = Table(title=f"harness compactions ({len(found['compactions'])})")
    for column in ("session", "harness", "tokens", "artifacts lost", "user msgs", "re-read"):
        table.add_column(column, overflow="fold")
    for c in found["compactions"]:
        before = f"{c['tokens_before']:,}" + ("" if c["tokens_before_source"] == "harness" else "~")
        secret = " (summary encrypted)" if c["summary_encrypted"] else ""
        users = c["user_messages"]
        table.add_row(
            c["session_id"],
            f"{c['harness']} {c['trigger']}{secret}",
            f"{before} -> {c['tokens_after']:,}"
            + ("" if c["tokens_after_source"] == "harness" else "~"),
            f"{len(c['artifacts']['lost'])} of "
            f"{len(c['artifacts']['lost']) + len(c['artifacts']['kept'])}: "
            f"{_list(c['artifacts']['lost'])}",
            f"{users['lost']} lost, {users['kept']} kept",
            _list(c["re_reads"]),
        )
    console.print(table)
    for origin, figures in found["summary"].items():
        rate = figures["re_read_rate"]
        console.print(
            f"{origin}: {figures['compactions']:,} compactions, {figures['re_reads']:,} files "
            f"read again of {figures['files_read_before']:,} read before"
            + (f" ({rate:.0%})" if rate is not None else ""),
            soft_wrap=True,
            highlight=False,
        )
    same = found["same_histories"]
    console.print(f"on the same histories: {same['note']}", soft_wrap=True, highlight=False)
    for origin, figures in same["rates"].items():
        rate = figures["re_read_rate"]
        console.print(
            f"  {origin}: {figures['re_reads']:,} of {figures['files_read_before']:,} read "
            "again" + (f" ({rate:.0%})" if rate is not None else ""),
            soft_wrap=True,
            highlight=False,
        )


def audit(
    session: str | None = typer.Argument(None, help="One session id (default: all)"),
    as_json: bool = typer.Option(False, "--json", help="One JSON object on stdout"),
    home: HomeOption = None,
) -> None:
    """The compactions Claude Code, Codex and OpenHands made themselves: kept, lost, re-read."""
    root = resolve_home(home, write=False)
    with handled(), reading_store(root, "audit", read_only=True) as store:
        found = audit_json(store, session)
    shown(found, as_json, audit_table)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(audit)
