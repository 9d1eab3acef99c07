"""The audit answers: anchor retention and emergency post-mortems, as SPEC 5.3 objects.

``retention_json`` reads the materialised retention results; ``postmortem_json`` reads the
materialised post-mortem frames and adds each emergency's counterfactuals, themselves
materialised by the ``counterfactuals`` job (``analytics.queries.counterfactual_job``). Nothing
here writes.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import polars as pl

from analytics.errors import AnalyticsError
from analytics.jobs.memory import survival_by_compactions
from analytics.jobs.postmortem import PostmortemFrames, postmortem_dicts
from analytics.jobs.postmortem_groups import fleet_summary, postmortem_groups
from analytics.jobs.retention import (
    DROP_REASON_COLUMNS,
    ITEM_COLUMNS,
    SILENT_DROP_COLUMNS,
    anchor_survival,
)
from analytics.queries.materialize import job_table
from analytics.store import EventStore


class UnknownSessionError(AnalyticsError):
    """The session named on the command line is not in the store."""


def check_session(store: EventStore, session: str | None) -> None:
    if session is None:
        return
    found = store.query("SELECT count(*) FROM sessions WHERE session_id = ?", [session]).item()
    if not found:
        raise UnknownSessionError(
            f"no session {session!r} in the store; `compactlens stats` lists the figures and "
            "the app's sessions page lists the ids"
        )


def _only(frame: pl.DataFrame, session: str | None) -> pl.DataFrame:
    if session is None or frame.is_empty():
        return frame
    return frame.filter(pl.col("session_id") == session)


def retention_json(store: EventStore, session: str | None = None) -> dict[str, Any]:
    """SPEC 5.3 ``retention --json``: items with their status, silent drops, and survival."""
    check_session(store, session)
    detail = _only(job_table(store, "job_retention_detail"), session)
    drops = _only(job_table(store, "job_silent_drops"), session)
    items = detail.select(ITEM_COLUMNS).to_dicts() if detail.height else []
    survival = anchor_survival(detail).to_dicts() if detail.height else []
    return {
        "items": items,
        "silent_drops": drops.select(
            c for c in (*SILENT_DROP_COLUMNS, *DROP_REASON_COLUMNS) if c in drops.columns
        ).to_dicts()
        if drops.height
        else [],
        "survival": survival,
        "survival_by_compactions": _curve(detail, by_type=False),
        "survival_by_compactions_by_type": _curve(detail, by_type=True),
    }


def _curve(detail: pl.DataFrame, *, by_type: bool) -> list[dict[str, Any]]:
    curve = survival_by_compactions(detail, by_type=by_type) if detail.height else None
    if curve is None or curve.is_empty():
        return []
    return curve.drop([] if by_type else ["anchor_type"]).to_dicts()


def postmortem_json(
    store: EventStore, session: str | None = None, *, counterfactuals: bool = True
) -> dict[str, Any]:
    """SPEC 5.3 ``postmortem --json``: one post-mortem per effective Emergency, then the same
    grouped by session and cause (``groups``, ``analytics.jobs.postmortem_groups``) and the
    figures above them (``summary``)."""
    check_session(store, session)
    emergencies = _only(job_table(store, "job_emergencies"), session)
    if emergencies.is_empty():
        return {"postmortems": [], "groups": [], "summary": fleet_summary([])}
    frames = PostmortemFrames(
        emergencies.sort("session_id", "seq"),
        _only(job_table(store, "job_lead_up"), session),
        _only(job_table(store, "job_top_contributors"), session),
    )
    found: dict[str, dict[str, Any]] = {}
    if counterfactuals:
        rows = _only(job_table(store, "job_counterfactuals"), session)
        found = {r["compaction_id"]: json.loads(r["report"]) for r in rows.iter_rows(named=True)}
    items = postmortem_dicts(frames, found)
    fixes: dict[str, dict[str, Any]] = {}
    if counterfactuals:
        stored = _only(job_table(store, "job_session_fixes"), session)
        fixes = {r["session_id"]: json.loads(r["report"]) for r in stored.iter_rows(named=True)}
    for item in items:
        item["session_fix"] = fixes.get(item["session_id"])
    groups = postmortem_groups(items)
    summary = {**fleet_summary(groups), "fleet_fix": fleet_fix(fixes)}
    return {
        "postmortems": items,
        "groups": groups,
        "sessions": [{"session_id": sid, "session_fix": fix} for sid, fix in sorted(fixes.items())],
        "summary": summary,
    }


def fleet_fix(fixes: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The change that was the verified session fix of the most sessions (ties: the first in
    the catalogue's order of the fixes seen), with how many of the sessions that needed one."""
    verified = [f for f in fixes.values() if f.get("verified")]
    if not verified:
        return None
    counts = Counter(str(f["change"]) for f in verified)
    name, n = counts.most_common(1)[0]
    config = next(f["config"] for f in verified if f["change"] == name)
    return {"change": name, "config": config, "sessions": n, "of": len(fixes)}
