"""The counterfactual replays of each emergency, materialised as a job (``COUNTERFACTUAL_JOB``).

Replays are too slow to repeat on every read, so ``postmortem`` runs this job (and the app's
"compute counterfactuals" button) and ``analytics.queries.findings`` reads what it stored:
``job_counterfactuals`` (each emergency's lead-up replayed under single config changes,
``analytics.replay.counterfactual``) and ``job_session_fixes`` (the smallest config that
avoids all of a session's emergencies in one replay of the whole session). It is the one job
that reads the store itself (the emergencies the post-mortem job found, the system prompts),
so it runs in this process, never on a Dask worker.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import polars as pl
from pydantic import ValidationError

from analytics.jobs.causes import UNAVOIDABLE
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
from compactor import CompactorConfig, Message


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
    estimators = {
        cid: FixedEstimator.of_record(slope, overhead, name)
        for cid, slope, overhead, name in inputs["compactions"]
        .select("id", "estimator_slope", "estimator_overhead", "estimator")
        .iter_rows()
    }
    rows: list[dict[str, str]] = []
    caches: dict[str, ReplayCache] = {}
    for done, e in enumerate(emergencies.iter_rows(named=True)):
        sid = e["session_id"]
        if progress is not None:
            progress(done, emergencies.height, sid)
        estimator = estimators.get(e["compaction_id"]) or FixedEstimator()
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
