"""The tuning lab: replay sessions under many configurations and rival strategies.

Strategies (``analytics.tuning.strategies``, ``analytics.tuning.rivals``) turn an imported
session into the views they would have sent; ``measure`` turns those into figures; the grid and
the Optuna search choose what to try; replays fan out over a process pool or a Dask cluster;
every trial is logged to ``<home>/tuning/<run_id>.jsonl`` (resumable, read back by
``load_runs``); ``run_tune`` recommends a configuration chosen on some sessions and reports its
figures on held-back ones. The CLI (``compactlens tune``) prints what ``run_tune`` returns.
"""

from analytics.tuning.effects import range_words
from analytics.tuning.execution import Setting, evaluate, open_backend
from analytics.tuning.folds import FileSplit, SessionSource, split_by_file
from analytics.tuning.lab import (
    TuneProgress,
    TuneProgressCallback,
    TuneReport,
    count_sessions,
    run_tune,
)
from analytics.tuning.metrics import SessionMetrics, measure, totals
from analytics.tuning.output import (
    STRATEGY_KEYS,
    baseline_line,
    knob_lines,
    load_summary,
    newest_summary,
    save_summary,
    tune_json,
)
from analytics.tuning.pareto import pareto_front
from analytics.tuning.recommend import Recommendation, figure_words
from analytics.tuning.rivals import ObservationMasking, OpenHandsCondenser, ThresholdSummary
from analytics.tuning.runlog import TuningFrames, load_runs
from analytics.tuning.specs import (
    DEFAULT_GRID,
    STRATEGY_KINDS,
    StrategySpec,
    grid_specs,
    load_grid,
    rival_specs,
)
from analytics.tuning.strategies import (
    NoCompaction,
    ProgressiveStrategy,
    Strategy,
    StrategyResult,
    TurnView,
)

__all__ = [
    "DEFAULT_GRID",
    "STRATEGY_KEYS",
    "STRATEGY_KINDS",
    "FileSplit",
    "NoCompaction",
    "ObservationMasking",
    "OpenHandsCondenser",
    "ProgressiveStrategy",
    "Recommendation",
    "SessionMetrics",
    "SessionSource",
    "Setting",
    "Strategy",
    "StrategyResult",
    "StrategySpec",
    "ThresholdSummary",
    "TuneProgress",
    "TuneProgressCallback",
    "TuneReport",
    "TuningFrames",
    "TurnView",
    "baseline_line",
    "count_sessions",
    "evaluate",
    "figure_words",
    "grid_specs",
    "knob_lines",
    "load_grid",
    "load_runs",
    "load_summary",
    "measure",
    "newest_summary",
    "open_backend",
    "pareto_front",
    "range_words",
    "rival_specs",
    "run_tune",
    "save_summary",
    "split_by_file",
    "totals",
    "tune_json",
]
