"""analytics: the read side of compactlens.

Importers, the event store and its projections, Polars jobs, replay and tuning, the CLI. It
imports only the public names of ``compactor`` (and the documented ``compactor.events``);
``duckdb`` is imported by the store layer alone. The names below are the surface the app and
other programs use; every module behind them is internal.
"""

from analytics.errors import (
    AnalyticsError,
    StoreCorruptError,
    StoreError,
    StoreIncompleteError,
    StoreLockedError,
    StoreUnwritableError,
    StoreVersionError,
    TranscriptError,
    UnknownFormatError,
)
from analytics.projector import IngestResult, Projector, RebuildResult, rebuild
from analytics.replay import ReplayResult, replay_session
from analytics.stats import HeadlineStats, headline_stats
from analytics.store import EventStore

__all__ = [
    "AnalyticsError",
    "EventStore",
    "HeadlineStats",
    "IngestResult",
    "Projector",
    "RebuildResult",
    "ReplayResult",
    "StoreCorruptError",
    "StoreError",
    "StoreIncompleteError",
    "StoreLockedError",
    "StoreUnwritableError",
    "StoreVersionError",
    "TranscriptError",
    "UnknownFormatError",
    "headline_stats",
    "rebuild",
    "replay_session",
]
