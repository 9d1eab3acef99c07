"""Each compaction's ledger, read for the command line and the app (issue 31).

The costs job stores the ledger priced under each session's own price profile
(``job_ledger``); with another profile the turns are repriced and the ledger recomputed from
them, so ``ledger --price-profile`` and ``stats --price-profile`` say the same. Nothing here
writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from analytics.jobs.costs import price_turns
from analytics.jobs.grounding import grounded_share
from analytics.jobs.ledger import LEDGER_COLUMNS, compaction_ledger, paid_by_kind, paid_share
from analytics.jobs.prices import PriceProfile
from analytics.queries import frames as queries
from analytics.queries.findings import check_session
from analytics.queries.materialize import job_table, job_table_exists
from analytics.store import EventStore

LEDGER_TABLE = "job_ledger"


def ledger_frame(
    store: EventStore,
    sessions: Sequence[str] | None = None,
    *,
    costs: pl.DataFrame | None = None,
    price_profile: PriceProfile | None = None,
) -> pl.DataFrame:
    """The ledger of every effective compaction of ``sessions`` (all live ones by default):
    the costs job's stored rows, priced under each session's own profile; recomputed from
    ``costs`` (priced turns) when given, or from the stored turns repriced under
    ``price_profile``."""
    if costs is None and price_profile is None and job_table_exists(store, LEDGER_TABLE):
        stored = job_table(store, LEDGER_TABLE)
        if sessions is not None:
            stored = stored.filter(pl.col("session_id").is_in(list(sessions)))
        typed = [pl.col(name).cast(dtype) for name, dtype in LEDGER_COLUMNS.items()]
        return stored.select(typed).sort("session_id", "seq")
    if costs is None:
        costs = queries.turn_costs_frame(store, sessions)
        if price_profile is not None:
            costs = price_turns(costs, price_profile)
    return compaction_ledger(
        queries.compactions_frame(store, sessions),
        costs,
        queries.turns_frame(store, sessions),
        queries.usage_frame(store, sessions),
    )


def ledger_figures(ledger: pl.DataFrame) -> dict[str, Any]:
    """``stats --json``'s ``ledger``: how many compactions have one, the share that paid for
    themselves (in all, and by origin, tier and trigger: ``by_kind``), how many grew the
    context and how many were back above their tier at once."""
    return {
        "compactions": ledger.height,
        "paid_share": paid_share(ledger),
        "by_kind": paid_by_kind(ledger),
        "priced": int(ledger.get_column("paid").is_not_null().sum()) if ledger.height else 0,
        "grew": int(ledger.get_column("grew").fill_null(False).sum()) if ledger.height else 0,
        "rebounded": int(ledger.get_column("rebound_turns").is_not_null().sum())
        if ledger.height
        else 0,
    }


def claim_findings(grounding: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per compaction id: its ``ungrounded`` claims (with what was missing) and its
    ``grounded_share`` (null when it made no claim), from ``summary_grounding`` rows."""
    if grounding.is_empty():
        return {}
    shares = {r["compaction_id"]: r for r in grounded_share(grounding).iter_rows(named=True)}
    out: dict[str, dict[str, Any]] = {
        cid: {"ungrounded": [], "grounded_share": row["grounded_share"], "claims": row["claims"]}
        for cid, row in shares.items()
    }
    for row in grounding.filter(~pl.col("grounded")).iter_rows(named=True):
        out[row["compaction_id"]]["ungrounded"].append(
            {"claim": row["claim"], "kind": row["kind"], "missing": row["missing"]}
        )
    return out


NO_CLAIMS: dict[str, Any] = {"ungrounded": [], "grounded_share": None, "claims": 0}


def ledger_json(
    store: EventStore, session: str | None = None, *, price_profile: PriceProfile | None = None
) -> dict[str, Any]:
    """``compactlens ledger --json``: every compaction's ledger and the share that paid."""
    check_session(store, session)
    ledger = ledger_frame(
        store, None if session is None else [session], price_profile=price_profile
    )
    grounding = job_table(store, "job_grounding")
    if session is not None and grounding.height:
        grounding = grounding.filter(pl.col("session_id") == session)
    claims = claim_findings(grounding)
    rows = [{**row, **claims.get(row["compaction_id"], NO_CLAIMS)} for row in ledger.to_dicts()]
    return {**ledger_figures(ledger), "compactions": rows}  # the rows, where stats has a count
