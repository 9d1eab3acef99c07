"""The figure builders the pages draw with: ``analytics.charts``, through analytics' public names.

They live in analytics because ``compactlens report`` draws the same figures; this module only
names them for the pages.
"""

from analytics import (
    THRESHOLDS,
    TIER_COLOURS,
    compression_figure,
    contributors_figure,
    lead_up_figure,
    pareto_figure,
    survival_figure,
    threshold_tokens,
    tier_counts_figure,
    timeline_figure,
)

__all__ = [
    "THRESHOLDS",
    "TIER_COLOURS",
    "compression_figure",
    "contributors_figure",
    "lead_up_figure",
    "pareto_figure",
    "survival_figure",
    "threshold_tokens",
    "tier_counts_figure",
    "timeline_figure",
]
