"""The audit answers: anchor retention and emergency post-mortems, as SPEC 5.3 objects.

``retention_json`` reads the materialised retention results; ``postmortem_json`` reads the
materialised post-mortem frames and adds each emergency's counterfactuals, themselves
materialised by the ``counterfactuals`` job (replays are too slow to repeat on every read).
``COUNTERFACTUAL_JOB`` is that job; it runs only when post-mortems are asked for. Nothing here
writes except through ``analytics.queries.materialize``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import polars as pl
from pydantic import ValidationError

from analytics.errors import AnalyticsError
from analytics.jobs.causes import UNAVOIDABLE
from analytics.jobs.memory import survival_by_compactions
from analytics.jobs.postmortem import PostmortemFrames, postmortem_dicts
from analytics.jobs.postmortem_groups import fleet_summary, postmortem_groups
from analytics.jobs.retention import (
    DROP_REASON_COLUMNS,
    ITEM_COLUMNS,
    SILENT_DROP_COLUMNS,
    anchor_survival,
)
from analytics.queries.materialize import Job, JobInputs, job_table
from analytics.replay.changes import Change
from analytics.replay.counterfactual import (
    CounterfactualError,
    FixedEstimator,
    ReplayCache,
    change_of,
    counterfactuals,
    messages_from_frame,
    session_fix,
    usage_from_frames,
)
from analytics.store import EventStore
from compactor import CompactorConfig, Message


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


def _system_prompts(inputs: JobInputs) -> dict[str, Message]:
    frame = inputs.store.query(
        """SELECT s.session_id, b.content FROM sessions s
           JOIN message_blobs b ON b.sha256 = s.system_prompt_sha256
           WHERE s.session_id IN (SELECT unnest(?))""",
        [inputs.sessions],
    )
    return {
        sid: Message(role="system", content=text)
        for sid, text in frame.iter_rows()
        if text is not None
    }


CounterfactualProgress = Callable[[int, int, str | None], object]
"""Told ``(done, total, session_id)`` before each emergency of a chunk of sessions is replayed,
and ``(total, total, None)`` when the chunk is done (a refresh takes sessions in chunks)."""


def _counterfactual_rows(
    inputs: JobInputs, progress: CounterfactualProgress | None = None
) -> dict[str, pl.DataFrame]:
    emergencies = job_table(inputs.store, "job_emergencies")
    if emergencies.height:
        emergencies = emergencies.filter(pl.col("session_id").is_in(inputs.sessions))
    sessions = {r["session_id"]: r for r in inputs["sessions"].iter_rows(named=True)}
    systems = _system_prompts(inputs) if emergencies.height else {}
    estimators = dict(inputs["compactions"].select("id", "estimator").iter_rows())
    rows: list[dict[str, str]] = []
    caches: dict[str, ReplayCache] = {}
    for done, e in enumerate(emergencies.iter_rows(named=True)):
        sid = e["session_id"]
        if progress is not None:
            progress(done, emergencies.height, sid)
        estimator = FixedEstimator.from_name(estimators.get(e["compaction_id"]))
        cache = caches.setdefault(sid, ReplayCache())
        report = _one_counterfactual(inputs, sessions[sid], e, systems.get(sid), estimator, cache)
        rows.append(
            {
                "session_id": sid,
                "compaction_id": e["compaction_id"],
                "report": json.dumps(report, default=str),
            }
        )
    fixes = _session_fixes(inputs, sessions, systems, emergencies, rows, progress, caches)
    if progress is not None:
        progress(emergencies.height, emergencies.height, None)
    schema = {"session_id": pl.String, "compaction_id": pl.String, "report": pl.String}
    return {
        "job_counterfactuals": pl.DataFrame(rows, schema=schema),
        "job_session_fixes": pl.DataFrame(
            fixes, schema={"session_id": pl.String, "report": pl.String}
        ),
    }


def _session_fixes(
    inputs: JobInputs,
    sessions: dict[str, dict[str, Any]],
    systems: dict[str, Message],
    emergencies: pl.DataFrame,
    rows: list[dict[str, str]],
    progress: CounterfactualProgress | None,
    caches: dict[str, ReplayCache],
) -> list[dict[str, str]]:
    """One ``session_fix`` per session with an emergency a verified change avoids: the
    smallest config that avoids all of them in one replay of the whole session."""
    turns = dict(emergencies.select("compaction_id", "turn").iter_rows())
    wanted: dict[str, list[tuple[int, Change]]] = {}
    for row in rows:
        change = change_of(json.loads(row["report"]))
        if change is not None:
            wanted.setdefault(row["session_id"], []).append((turns[row["compaction_id"]], change))
    out: list[dict[str, str]] = []
    for sid, found in wanted.items():
        if progress is not None:
            progress(emergencies.height, emergencies.height, f"{sid} (one fix for the session)")
        session = sessions[sid]
        system = systems.get(sid)
        try:
            fix = session_fix(
                messages_from_frame(inputs["messages"], sid),
                CompactorConfig.model_validate(json.loads(session["config"] or "{}")),
                int(session["context_window"]),
                [turn for turn, _change in found],
                candidates=[change for _turn, change in found],
                system=system,
                usage=usage_from_frames(inputs["usage"], sid, has_system=system is not None),
                history_missing_tokens=int(session.get("history_missing_tokens") or 0),
                cache=caches.get(sid),
            ).as_dict()
        except (CounterfactualError, ValidationError, ValueError, TypeError) as exc:
            fix = {"config": None, "verified": False, "reason": f"unavailable: {exc}"}
        out.append({"session_id": sid, "report": json.dumps(fix, default=str)})
    return out


def _one_counterfactual(
    inputs: JobInputs,
    session: dict[str, Any],
    emergency: dict[str, Any],
    system: Message | None,
    estimator: FixedEstimator,
    cache: ReplayCache | None = None,
) -> dict[str, Any]:
    sid = session["session_id"]
    try:
        config = CompactorConfig.model_validate(json.loads(session["config"] or "{}"))
        history = messages_from_frame(inputs["messages"], sid)
        usage = usage_from_frames(inputs["usage"], sid, has_system=system is not None)
        report = counterfactuals(
            history,
            config,
            int(session["context_window"]),
            int(emergency["history_messages"]),
            system=system,
            estimator=None if usage else estimator,
            usage=usage,
            search="baseline" if emergency.get("cause") in UNAVOIDABLE else "full",
            history_missing_tokens=int(session.get("history_missing_tokens") or 0),
            cache=cache,
        )
    except (CounterfactualError, ValidationError, ValueError, TypeError) as exc:
        return {"counterfactuals": [], "smallest_change": None, "unavailable": str(exc)}
    return report.as_dict()


def counterfactual_job(progress: CounterfactualProgress | None = None) -> Job:
    """``COUNTERFACTUAL_JOB`` telling ``progress`` how far its replays are (same name and
    version: the results it stores are the same)."""
    compute = partial(_counterfactual_rows, progress=progress)
    return Job("counterfactuals", 8, compute, ("job_counterfactuals", "job_session_fixes"))


COUNTERFACTUAL_JOB = counterfactual_job()
"""Replays each emergency's lead-up under single config changes (run by ``postmortem``)."""
