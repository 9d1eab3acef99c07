"""``compactlens audit``: the compactions a harness made itself, what they kept and lost, and
what the agent did after them (SPEC 8 ``audit --json``).

One entry per native compaction (``origin = "native"``) of a live session, from the pure job
:mod:`analytics.jobs.audit` over the store's frames: the artifacts of the history it replaced,
kept or lost; the user's messages kept verbatim or not; the files re-read and commands re-run
after it. ``summary`` sets the harnesses' re-read rate beside our own compactions' (re-read files
per file read before a compaction), the cheap sign of lost context the issue asks for. Reads
only.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from analytics.jobs.audit import (
    again_after,
    artifacts_kept,
    boundaries,
    reads_and_runs,
    user_messages_kept,
)
from analytics.jobs.grounding import summary_grounding
from analytics.jobs.ledger import compaction_ledger
from analytics.queries import frames
from analytics.queries.findings import check_session
from analytics.queries.ledger import NO_CLAIMS, claim_findings
from analytics.store import EventStore


def _only(frame: pl.DataFrame, session: str | None) -> pl.DataFrame:
    return frame if session is None else frame.filter(pl.col("session_id") == session)


def _grouped(frame: pl.DataFrame, key: str, value: str) -> dict[str, list[Any]]:
    if frame.is_empty():
        return {}
    return {k: list(v) for k, v in frame.group_by(key).agg(value).iter_rows()}


def _recorded_dirs(store: EventStore, session: str | None) -> pl.DataFrame:
    """session_id, cwd: each session's working directory as its importer recorded it
    (``sessions.metadata`` ``cwd``: Claude Code's and Codex's); none for the others, whose
    directory the audit job infers from their paths."""
    dirs = store.query(
        f"""SELECT session_id, json_extract_string(metadata, '$.cwd') AS cwd FROM sessions
            WHERE {frames.live()} AND json_extract_string(metadata, '$.cwd') IS NOT NULL"""
    )
    return _only(dirs, session)


def audit_json(store: EventStore, session: str | None = None) -> dict[str, Any]:
    """SPEC 8 ``audit --json``: ``compactions`` (one per native compaction) and ``summary``."""
    check_session(store, session)
    sessions = None if session is None else [session]
    compactions = frames.compactions_frame(store, sessions)
    if compactions.is_empty():
        return {"compactions": [], "summary": {}, "same_histories": _NOT_REPLAYED}
    views = frames.views_frame(store, sessions)
    messages = frames.messages_frame(store, sessions)
    synthetic = frames.synthetic_frame(store, sessions)
    bounds = boundaries(compactions, views)
    actions = reads_and_runs(messages)
    again = again_after(bounds, actions)
    same = (
        _same_histories(bounds, actions, again)
        if session is None
        else _same_histories(*_rereads(store, [session, *_replays_of(store, session)]))
    )
    native = bounds.filter(pl.col("origin") == "native")
    artifacts = artifacts_kept(views, messages, synthetic, native, _recorded_dirs(store, session))
    users = user_messages_kept(views, messages, synthetic, native)
    kept = _grouped(artifacts.filter("kept"), "compaction_id", "artifact")
    lost = _grouped(artifacts.filter(~pl.col("kept")), "compaction_id", "artifact")
    rereads = _grouped(again.filter(pl.col("kind") == "read"), "compaction_id", "target")
    reruns = _grouped(again.filter(pl.col("kind") == "run"), "compaction_id", "target")
    said = {
        cid: (sum(flags), len(flags) - sum(flags))
        for cid, flags in _grouped(users, "compaction_id", "kept").items()
    }
    records = {r["id"]: r for r in compactions.iter_rows(named=True)}
    grown = {
        r["compaction_id"]: r
        for r in compaction_ledger(
            compactions,
            pl.DataFrame(),
            frames.turns_frame(store, sessions),
            frames.usage_frame(store, sessions),
        ).iter_rows(named=True)
    }
    claims = claim_findings(
        summary_grounding(
            compactions.filter(pl.col("origin") == "native"),
            frames.anchor_items_frame(store, sessions),
            views,
            messages,
        )
    )
    out = []
    for row in native.iter_rows(named=True):
        cid, record = row["compaction_id"], records[row["compaction_id"]]
        users_kept, users_lost = said.get(cid, (0, 0))
        out.append(
            {
                "session_id": row["session_id"],
                "compaction_id": cid,
                "harness": record["harness"],
                "trigger": record["trigger"],
                "tokens_before": record["tokens_before"],
                "tokens_before_source": record["tokens_before_source"],
                "tokens_after": record["tokens_after"],
                "tokens_after_source": record["tokens_after_source"],
                "summary_encrypted": bool(record["summary_encrypted"]),
                "history_at": row["at"],
                "artifacts": {"kept": kept.get(cid, []), "lost": lost.get(cid, [])},
                "user_messages": {"kept": users_kept, "lost": users_lost},
                "re_reads": rereads.get(cid, []),
                "re_runs": reruns.get(cid, []),
                "grew": grown.get(cid, {}).get("grew"),
                "growth_tokens": grown.get(cid, {}).get("growth_tokens"),
                "growth_reason": grown.get(cid, {}).get("growth_reason"),
                **claims.get(cid, NO_CLAIMS),
            }
        )
    return {
        "compactions": out,
        "summary": _rates(bounds, actions, again),
        "same_histories": same,
    }


def _rereads(
    store: EventStore, sessions: list[str]
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(boundaries, reads and runs, the reads and runs again after) of ``sessions``."""
    bounds = boundaries(
        frames.compactions_frame(store, sessions), frames.views_frame(store, sessions)
    )
    actions = reads_and_runs(frames.messages_frame(store, sessions))
    return bounds, actions, again_after(bounds, actions)


def _replays_of(store: EventStore, session: str) -> list[str]:
    """The sessions ``replay`` made of ``session`` (``<session>@<window>#<hash>``)."""
    ids = frames.sessions_frame(store)["session_id"]
    return [
        sid
        for sid in ids.to_list()
        if sid.startswith(f"{session}@") and re.search(REPLAY_SUFFIX, sid) is not None
    ]


_NOT_REPLAYED: dict[str, Any] = {
    "sessions": 0,
    "rates": {},
    "note": "no session with native compactions was also replayed: replay the imported "
    "sessions to compare re-reads on the same histories",
}

REPLAY_SUFFIX = r"@\d+#[0-9a-f]+$"
"""How ``replay`` names a session's replay: ``<imported id>@<window>#<config hash>``."""


def _same_histories(
    bounds: pl.DataFrame, actions: pl.DataFrame, again: pl.DataFrame
) -> dict[str, Any]:
    """The re-read rates of the harness's compactions and of ours on the same histories: the
    imported sessions with native compactions that were also replayed, and their replays.
    Across different sessions the two rates would compare the sessions, not the compactions."""
    origin = pl.col("session_id").str.replace(REPLAY_SUFFIX, "")
    native = set(bounds.filter(pl.col("origin") == "native")["session_id"].to_list())
    ours = bounds.filter(pl.col("origin") != "native").with_columns(history=origin)
    replayed = native & set(ours["history"].to_list())
    keep = replayed | set(ours.filter(pl.col("history").is_in(replayed))["session_id"].to_list())
    if not replayed:
        return _NOT_REPLAYED
    sessions = list(keep)
    return {
        "sessions": len(replayed),
        "rates": _rates(
            bounds.filter(pl.col("session_id").is_in(sessions)),
            actions.filter(pl.col("session_id").is_in(sessions)),
            again,
        ),
        "note": f"re-reads after the harness's compactions and after ours on the same "
        f"{len(replayed)} session{'' if len(replayed) == 1 else 's'} (their replays; a "
        "replayed agent does what the transcript did, so ours count the transcript's own "
        "reads after our compaction points)",
    }


def _rates(bounds: pl.DataFrame, actions: pl.DataFrame, again: pl.DataFrame) -> dict[str, Any]:
    """Per origin: compactions, files read before them, re-read after, and the rate."""
    read_before = (
        bounds.join(actions.filter(pl.col("kind") == "read"), on="session_id")
        .filter(pl.col("idx") < pl.col("at"))
        .select("compaction_id", "origin", "target")
        .unique()
        .group_by("origin")
        .agg(pl.len().alias("files_read_before"))
    )
    reread = (
        again.filter(pl.col("kind") == "read")
        .join(bounds.select("compaction_id", "origin"), on="compaction_id")
        .group_by("origin")
        .agg(pl.len().alias("re_reads"))
    )
    count = bounds.group_by("origin").agg(pl.len().alias("compactions"))
    table = count.join(read_before, on="origin", how="left").join(reread, on="origin", how="left")
    out: dict[str, Any] = {}
    for row in table.sort("origin").iter_rows(named=True):
        before, again_n = row["files_read_before"] or 0, row["re_reads"] or 0
        out[row["origin"]] = {
            "compactions": row["compactions"],
            "files_read_before": before,
            "re_reads": again_n,
            "re_read_rate": again_n / before if before else None,
        }
    return out
