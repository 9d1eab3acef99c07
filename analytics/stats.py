"""Headline figures of a store, for ``compactlens stats``, and the lines a run quarantined.

Plain reads through ``EventStore.query``; nothing here writes. ``HeadlineStats`` is the stable
shape ``stats --json`` prints: its field names are the JSON keys.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict

from analytics.store import EventStore, QuarantinedLine
from compactor import CompactionTier

TIERS = tuple(t for t in CompactionTier if t != CompactionTier.NONE)

_HEADLINE_SQL = """
SELECT
  (SELECT count(*) FROM sessions) AS sessions,
  (SELECT count(*) FROM messages) AS messages,
  (SELECT count(*) FROM events) AS events,
  (SELECT count(*) FROM compactions WHERE tier = 4) AS emergencies,
  (SELECT median(compression_ratio) FROM compactions WHERE effective AND tier > 0) AS ratio,
  (SELECT count(*) FROM anchor_items) AS anchor_items,
  (SELECT count(*) FROM offloads) AS offloads,
  (SELECT count(*) FROM quarantine) AS quarantined_lines
"""
_TIER_SQL = """
SELECT tier, count(*) AS n FROM compactions WHERE effective AND tier > 0 GROUP BY tier
"""


class HeadlineStats(BaseModel):
    """What ``compactlens stats`` reports.

    Attributes:
        compactions: effective compactions by tier name (``warn``, ``soft``, ``full``,
            ``emergency``); no-op attempts are not counted.
        emergencies: every Emergency-tier compaction, effective or not: each time a context
            reached the emergency threshold.
        median_compression_ratio: tokens after / tokens before over effective compactions
            (None when there are none).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    sessions: int
    messages: int
    events: int
    compactions: dict[str, int]
    emergencies: int
    median_compression_ratio: float | None
    anchor_items: int
    offloads: int
    quarantined_lines: int


def headline_stats(store: EventStore) -> HeadlineStats:
    row = store.query(_HEADLINE_SQL).row(0, named=True)
    by_tier = dict(store.query(_TIER_SQL).iter_rows())
    ratio = row.pop("ratio")
    return HeadlineStats(
        **row,
        compactions={t.name.lower(): int(by_tier.get(int(t), 0)) for t in TIERS},
        median_compression_ratio=None if ratio is None else float(ratio),
    )


def quarantined_since(store: EventStore, since: dt.datetime) -> list[QuarantinedLine]:
    """Spool lines quarantined at or after ``since``, by file and line."""
    frame = store.query(
        "SELECT source, line, reason, raw FROM quarantine WHERE quarantined_at >= ? "
        "ORDER BY source, line",
        [since],
    )
    return [QuarantinedLine(str(s), int(n), str(r), str(w)) for s, n, r, w in frame.iter_rows()]
