"""Headline figures of a store (``compactlens stats``) and the lines a run quarantined.

``fleet_stats`` assembles the SPEC 5.3 ``stats --json`` object from the jobs: compaction counts
and compression by tier, emergencies (truncations apart from offload-only), tokens billed
against the uncompacted history, anchor survival and silent drops, artifact retention. Cheap
aggregates are computed on read; the per-session jobs are read from their materialised tables
(``analytics.materialize.refresh`` brings them up to date first). Nothing here writes.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import polars as pl

from analytics.jobs.artifacts import overall_artifact_retention
from analytics.jobs.common import is_effective
from analytics.jobs.compression import compression_by_tier
from analytics.jobs.retention import anchor_survival
from analytics.jobs.tiers import emergency_summary
from analytics.queries import frames as queries
from analytics.queries.app import compaction_figures, retention_status_rows
from analytics.queries.materialize import job_table, job_table_exists
from analytics.store import EventStore, QuarantinedLine
from analytics.store.projector import Projector
from compactor import AnchorType, CompactionTier

TIERS = tuple(t for t in CompactionTier if t != CompactionTier.NONE)

_COUNTS_SQL = """
SELECT
  (SELECT count(*) FROM sessions WHERE deleted_at IS NULL) AS sessions,
  (SELECT count(*) FROM turns WHERE {live}) AS turns,
  (SELECT count(*) FROM messages WHERE {live}) AS messages,
  (SELECT count(*) FROM events) AS events,
  (SELECT count(*) FROM anchor_items WHERE {live}) AS anchor_items,
  (SELECT count(*) FROM offloads WHERE {live}) AS offloads,
  (SELECT median(compression_ratio) FROM compactions
    WHERE {effective} AND tier > 0 AND {live}) AS median_compression_ratio,
  (SELECT count(*) FROM quarantine) AS quarantined
""".replace("{live}", queries.LIVE).replace("{effective}", queries.EFFECTIVE)


_NOOPS_SQL = """
WITH t AS (
  SELECT session_id, seq, tier,
         lag(seq) OVER (PARTITION BY session_id ORDER BY seq) AS prev
  FROM turns WHERE {live})
SELECT
  (SELECT count(*) FROM t WHERE tier > 0 AND NOT EXISTS (
     SELECT 1 FROM compactions c
     WHERE c.session_id = t.session_id AND c.tier > 0 AND {effective_c}
       AND c.seq < t.seq AND c.seq > coalesce(t.prev, -1)))
  + (SELECT count(*) FROM compactions
     WHERE tier > 0 AND NOT {effective} AND trigger = 'manual' AND {live})
""".replace("{live}", queries.LIVE).replace("{effective}", queries.EFFECTIVE)
"""Every call that decided a tier and changed nothing (SPEC 3.3a.5): each turn whose view was
prepared at a tier above NONE with no effective compaction since the turn before (a session
emits the first no-op of a run only, but every turn has its ``view_prepared``), plus manual
``/compact`` calls that had nothing to do."""


def fleet_stats(store: EventStore, spool_dir: Path | None = None) -> dict[str, Any]:
    """The SPEC 5.3 ``stats --json`` object (plus a few more keys; none renamed)."""
    counts = store.query(_COUNTS_SQL).row(0, named=True)
    sessions = queries.sessions_frame(store)
    compactions = compaction_figures(store)  # no summary text: every compaction is read
    turns = queries.turn_sessions(store)  # the emergency rate only counts turns
    out: dict[str, Any] = {
        "sessions": counts["sessions"],
        "turns": counts["turns"],
        "compactions": _compactions(compactions, _noop_calls(store)),
        "emergency": _emergency(compactions, turns, sessions),
        "compression": _compression(compactions, sessions),
        "tokens": _tokens(store),
        "anchor_retention": _anchor_retention(store),
        "silent_drops": _count(store, "job_silent_drops"),
        "artifact_retention": _artifact_retention(store),
        "quarantined": counts["quarantined"],
    }
    out.update(
        messages=counts["messages"],
        events=counts["events"],
        anchor_items=counts["anchor_items"],
        offloads=counts["offloads"],
        median_compression_ratio=counts["median_compression_ratio"],
        unprojected_spool_bytes=(
            Projector(store, spool_dir).pending_bytes() if spool_dir is not None else 0
        ),
    )
    return out


def _count(store: EventStore, table: str) -> int:
    if not job_table_exists(store, table):
        return 0
    return int(store.query(f"SELECT count(*) FROM {table}").item())


def _noop_calls(store: EventStore) -> int:
    effective = queries.EFFECTIVE.replace("effective", "c.effective")
    return int(store.query(_NOOPS_SQL.replace("{effective_c}", effective)).item() or 0)


def _compactions(compactions: pl.DataFrame, noops: int) -> dict[str, Any]:
    effective = compactions.filter((pl.col("tier") > 0) & is_effective())
    by_tier = {t.name: effective.filter(pl.col("tier") == int(t)).height for t in TIERS}
    return {"total": effective.height, "noops": noops, "by_tier": by_tier}


def _emergency(
    compactions: pl.DataFrame, turns: pl.DataFrame, sessions: pl.DataFrame
) -> dict[str, Any]:
    row = emergency_summary(compactions, turns, sessions).row(0, named=True)
    return {
        "truncations": row["truncations"],
        "offload_only": row["offload_only"],
        "per_100_turns": row["per_100_turns"],
        "emergencies": row["emergencies"],
        "escalations": row["escalations"],
    }


def _compression(compactions: pl.DataFrame, sessions: pl.DataFrame) -> dict[str, Any]:
    frame = compression_by_tier(compactions, sessions).filter(pl.col("tier") > 0)
    out: dict[str, Any] = {}
    for row in frame.iter_rows(named=True):
        out[CompactionTier(row["tier"]).name] = {
            "count": row["count"],
            "ratio_p50": row["ratio_p50"],
            "ratio_p90": row["ratio_p90"],
            "ratio_p99": row["ratio_p99"],
            "tokens_saved": row["tokens_saved"],
            "noops": row["noops"],
        }
    return out


def _tokens(store: EventStore) -> dict[str, Any]:
    if not job_table_exists(store, "job_session_timeline"):
        return {"billed": 0, "uncompacted": 0, "saved_share": None}
    billed, uncompacted = store.query(
        """SELECT CAST(coalesce(sum(tokens_billed), 0) AS BIGINT),
                  CAST(coalesce(sum(tokens_uncompacted), 0) AS BIGINT)
           FROM job_session_timeline"""
    ).row(0)
    share = 1 - billed / uncompacted if uncompacted else None
    return {"billed": billed, "uncompacted": uncompacted, "saved_share": share}


def _anchor_retention(store: EventStore) -> dict[str, Any]:
    detail = retention_status_rows(store)  # four columns, not the item texts
    survival = anchor_survival(detail) if detail.height else pl.DataFrame()
    rows = {r["anchor_type"]: r for r in survival.iter_rows(named=True)} if survival.height else {}
    return {
        t.value: {
            "survival_next": rows.get(t.value, {}).get("survival_next"),
            "survival_last": rows.get(t.value, {}).get("survival_last"),
        }
        for t in AnchorType
    }


def _artifact_retention(store: EventStore) -> dict[str, Any]:
    per_compaction = job_table(store, "job_artifacts")
    if per_compaction.is_empty():
        return {"rate": None, "lost": 0, "sessions": 0, "no_content_sessions": 0}
    row = overall_artifact_retention(per_compaction).row(0, named=True)
    return {
        "rate": row["rate"],
        "lost": row["lost"] or 0,
        "sessions": row["sessions"],
        "no_content_sessions": row["no_content_sessions"],
    }


def quarantined_since(store: EventStore, since: dt.datetime) -> list[QuarantinedLine]:
    """Spool lines quarantined at or after ``since``, by file and line."""
    frame = store.query(
        "SELECT source, line, reason, raw FROM quarantine WHERE quarantined_at >= ? "
        "ORDER BY source, line",
        [since],
    )
    return [QuarantinedLine(str(s), int(n), str(r), str(w)) for s, n, r, w in frame.iter_rows()]
