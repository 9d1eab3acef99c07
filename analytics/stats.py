"""Headline figures of a store, for ``compactlens stats``, and the lines a run quarantined.

Plain reads through ``EventStore.query``; nothing here writes. ``HeadlineStats`` is the stable
shape ``stats --json`` prints: its field names are the JSON keys.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from analytics.projector import Projector
from analytics.store import EventStore, QuarantinedLine
from compactor import CompactionTier

TIERS = tuple(t for t in CompactionTier if t != CompactionTier.NONE)

_HEADLINE_SQL = """
SELECT
  (SELECT count(*) FROM sessions) AS sessions,
  (SELECT count(*) FROM messages) AS messages,
  (SELECT count(*) FROM events) AS events,
  (SELECT count(*) FROM compactions WHERE tier = 4) AS emergencies,
  (SELECT count(*) FROM compactions WHERE tier = 4 AND n_dropped > 0) AS truncations,
  (SELECT count(*) FROM compactions
    WHERE tier = 4 AND effective AND coalesce(n_dropped, 0) = 0) AS offload_only,
  (SELECT median(compression_ratio) FROM compactions WHERE effective AND tier > 0) AS ratio,
  (SELECT count(*) FROM anchor_items) AS anchor_items,
  (SELECT count(*) FROM offloads) AS offloads,
  (SELECT count(*) FROM quarantine) AS quarantined_lines
"""
_TIER_SQL = """
SELECT tier, count(*) AS n FROM compactions WHERE effective AND tier > 0 GROUP BY tier
"""


class EmergencyStats(BaseModel):
    """Emergency compactions by what they had to do.

    Attributes:
        truncations: emergencies that dropped messages (``n_dropped > 0``): context was lost.
        offload_only: effective emergencies that dropped nothing (offloading big tool results
            was enough): no context was lost.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    truncations: int
    offload_only: int


class HeadlineStats(BaseModel):
    """What ``compactlens stats`` reports.

    Attributes:
        compactions: effective compactions by tier name (``warn``, ``soft``, ``full``,
            ``emergency``); no-op attempts are not counted.
        emergencies: every Emergency-tier compaction, effective or not: each time a context
            reached the emergency threshold.
        emergency: the emergencies split into truncations and offload-only ones.
        median_compression_ratio: tokens after / tokens before over effective compactions
            (None when there are none).
        unprojected_spool_bytes: spool bytes not yet projected into the store (``compactlens
            ingest`` loads them); the other figures do not include them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    sessions: int
    messages: int
    events: int
    compactions: dict[str, int]
    emergencies: int
    emergency: EmergencyStats
    median_compression_ratio: float | None
    anchor_items: int
    offloads: int
    quarantined_lines: int
    unprojected_spool_bytes: int = 0


def headline_stats(store: EventStore, spool_dir: Path | None = None) -> HeadlineStats:
    """The headline figures; with ``spool_dir``, how much of the spool is not projected yet."""
    row = store.query(_HEADLINE_SQL).row(0, named=True)
    by_tier = dict(store.query(_TIER_SQL).iter_rows())
    ratio = row.pop("ratio")
    emergency = EmergencyStats(
        truncations=row.pop("truncations"), offload_only=row.pop("offload_only")
    )
    pending = Projector(store, spool_dir).pending_bytes() if spool_dir is not None else 0
    return HeadlineStats(
        **row,
        compactions={t.name.lower(): int(by_tier.get(int(t), 0)) for t in TIERS},
        emergency=emergency,
        median_compression_ratio=None if ratio is None else float(ratio),
        unprojected_spool_bytes=pending,
    )


def quarantined_since(store: EventStore, since: dt.datetime) -> list[QuarantinedLine]:
    """Spool lines quarantined at or after ``since``, by file and line."""
    frame = store.query(
        "SELECT source, line, reason, raw FROM quarantine WHERE quarantined_at >= ? "
        "ORDER BY source, line",
        [since],
    )
    return [QuarantinedLine(str(s), int(n), str(r), str(w)) for s, n, r, w in frame.iter_rows()]
