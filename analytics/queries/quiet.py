"""``compactlens timeline [SESSION] --json``: the decisions not taken — each turn near a
threshold at which nothing was compacted, and why (``analytics.jobs.quiet``). Reads only."""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl

from analytics.jobs.quiet import MARGIN, quiet_turns
from analytics.queries import frames
from analytics.queries.findings import check_session
from analytics.store import EventStore


def quiet_frame(store: EventStore, session: str | None = None) -> pl.DataFrame:
    """The quiet turns of live sessions (or of ``session``): ``analytics.jobs.quiet``."""
    scope = None if session is None else [session]
    return quiet_turns(
        frames.turns_frame(store, scope),
        frames.sessions_frame(store, scope),
        compactions=frames.compactions_frame(store, scope),
    )


def quiet_json(store: EventStore, session: str | None = None) -> dict[str, Any]:
    """``{"margin", "turns": [...], "by_reason": {code: count}}``."""
    check_session(store, session)
    found = quiet_frame(store, session)
    return {
        "margin": MARGIN,
        "turns": found.to_dicts(),
        "by_reason": dict(Counter(found.get_column("reason").to_list()).most_common()),
    }
