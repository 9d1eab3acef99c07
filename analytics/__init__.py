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
from analytics.extras import MissingExtraError
from analytics.jobs.anchor_matching import ANCHOR_ORDER
from analytics.jobs.compression import compression_by_tier
from analytics.jobs.explanations import drop_reason_words, fix_words
from analytics.jobs.memory import survival_by_compactions
from analytics.jobs.offloads import offload_read_backs
from analytics.jobs.postmortem import PostmortemFrames, postmortem_frames
from analytics.jobs.retention import anchor_survival, retention_detail, silent_drops
from analytics.jobs.tiers import compaction_turns
from analytics.jobs.timeline import turn_timeline
from analytics.queries.app import (
    anchor_coverage,
    compaction_figures,
    compaction_list,
    compaction_view,
    config_toml,
    emergency_list,
    estimate_moves,
    event_count,
    native_sessions,
    retention_status_rows,
    session_metadata,
    session_sources,
    session_summaries,
    system_prompt,
    turn_cost_rows,
)
from analytics.queries.audit import audit_json
from analytics.queries.counterfactual_job import COUNTERFACTUAL_JOB
from analytics.queries.findings import postmortem_json
from analytics.queries.frames import (
    anchor_items_frame,
    compactions_frame,
    messages_frame,
    model_calls_frame,
    offloads_frame,
    sessions_frame,
    synthetic_frame,
    turns_frame,
    views_frame,
)
from analytics.queries.ledger import ledger_frame
from analytics.queries.live import LiveSession, live_sessions
from analytics.queries.materialize import Job, job_table
from analytics.queries.materialize import refresh as refresh_jobs
from analytics.queries.quiet import quiet_frame
from analytics.queries.stats import COHORT_KEYS, cohorts, fleet_stats
from analytics.replay.driver import ReplayResult, replay_session
from analytics.report.charts import (
    THRESHOLDS,
    TIER_COLOURS,
    billing_figure,
    compression_figure,
    compression_rows,
    contributors_figure,
    lead_up_figure,
    lead_ups_figure,
    memory_figure,
    pareto_figure,
    survival_figure,
    survival_rows,
    tier_counts_figure,
)
from analytics.report.cost_charts import turn_cost_figure
from analytics.report.theme import THEME
from analytics.report.timeline import threshold_tokens, timeline_figure
from analytics.store import EventStore, Selection, open_store, redact_url, select
from analytics.store.lending import StoreLender, lend_store
from analytics.store.projector import IngestResult, Projector
from analytics.store.rebuilding import RebuildResult, rebuild
from analytics.tuning import (
    STRATEGY_KINDS,
    SessionMetrics,
    TuneProgress,
    baseline_line,
    count_sessions,
    load_runs,
    load_summary,
    pareto_front,
    run_tune,
    save_summary,
    totals,
    tune_json,
)

__all__ = [
    "ANCHOR_ORDER",
    "COHORT_KEYS",
    "COUNTERFACTUAL_JOB",
    "STRATEGY_KINDS",
    "THEME",
    "THRESHOLDS",
    "TIER_COLOURS",
    "AnalyticsError",
    "EventStore",
    "IngestResult",
    "Job",
    "LiveSession",
    "MissingExtraError",
    "PostmortemFrames",
    "Projector",
    "RebuildResult",
    "ReplayResult",
    "Selection",
    "SessionMetrics",
    "StoreCorruptError",
    "StoreError",
    "StoreIncompleteError",
    "StoreLender",
    "StoreLockedError",
    "StoreUnwritableError",
    "StoreVersionError",
    "TranscriptError",
    "TuneProgress",
    "UnknownFormatError",
    "anchor_coverage",
    "anchor_items_frame",
    "anchor_survival",
    "audit_json",
    "baseline_line",
    "billing_figure",
    "cohorts",
    "compaction_figures",
    "compaction_list",
    "compaction_turns",
    "compaction_view",
    "compactions_frame",
    "compression_by_tier",
    "compression_figure",
    "compression_rows",
    "config_toml",
    "contributors_figure",
    "count_sessions",
    "drop_reason_words",
    "emergency_list",
    "estimate_moves",
    "event_count",
    "fix_words",
    "fleet_stats",
    "job_table",
    "lead_up_figure",
    "lead_ups_figure",
    "ledger_frame",
    "lend_store",
    "live_sessions",
    "load_runs",
    "load_summary",
    "memory_figure",
    "messages_frame",
    "model_calls_frame",
    "native_sessions",
    "offload_read_backs",
    "offloads_frame",
    "open_store",
    "pareto_figure",
    "pareto_front",
    "postmortem_frames",
    "postmortem_json",
    "quiet_frame",
    "rebuild",
    "redact_url",
    "refresh_jobs",
    "replay_session",
    "retention_detail",
    "retention_status_rows",
    "run_tune",
    "save_summary",
    "select",
    "session_metadata",
    "session_sources",
    "session_summaries",
    "sessions_frame",
    "silent_drops",
    "survival_by_compactions",
    "survival_figure",
    "survival_rows",
    "synthetic_frame",
    "system_prompt",
    "threshold_tokens",
    "tier_counts_figure",
    "timeline_figure",
    "totals",
    "tune_json",
    "turn_cost_figure",
    "turn_cost_rows",
    "turn_timeline",
    "turns_frame",
    "views_frame",
]
