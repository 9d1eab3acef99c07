"""The figure builders as the pages use them (analytics' public names): titles, units, traces."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from analytics import (
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

THRESHOLDS = {"warn": 0.6, "soft": 0.7, "full": 0.8, "emergency": 0.95}


def titles(fig: go.Figure) -> tuple[str, str, str]:
    layout = fig.layout
    return str(layout.title.text), str(layout.xaxis.title.text), str(layout.yaxis.title.text)


def test_timeline_has_a_line_a_history_and_one_marker_trace_per_tier_present() -> None:
    turns = pl.DataFrame(
        {
            "turn": [1, 2, 3, 4],
            "tokens": [500, 700, 900, 600],
            "history_tokens": [500, 700, 900, 1200],
        }
    )
    markers = pl.DataFrame(
        {
            "turn": [3, 4],
            "tokens_before": [900, 950],
            "tier_name": ["SOFT", "EMERGENCY"],
            "id": ["c1", "c2"],
        }
    )

    fig = timeline_figure(turns, markers, thresholds=THRESHOLDS, window=1000, reserve=100)

    assert titles(fig) == ("Context tokens per turn", "turn (model call)", "tokens")
    assert [t.name for t in fig.data] == ["view sent", "uncompacted history", "SOFT", "EMERGENCY"]
    assert list(fig.data[2].customdata) == ["c1"]
    assert fig.data[2].marker.color == TIER_COLOURS["SOFT"]
    levels = sorted(s.y0 for s in fig.layout.shapes if s.type == "line")
    assert levels == [500, 600, 700, 850, 1000]  # thresholds × window − reserve, then the window


def test_threshold_tokens_subtract_the_reserve() -> None:
    assert threshold_tokens({"warn": 0.5, "full": 0.8}, 10_000, 1_000) == {
        "warn": 4_000.0,
        "full": 7_000.0,
    }


def test_timeline_without_history_has_no_history_trace() -> None:
    turns = pl.DataFrame({"turn": [1], "tokens": [10], "history_tokens": [None]}, strict=False)
    empty = pl.DataFrame(
        schema={
            "turn": pl.Int64,
            "tokens_before": pl.Int64,
            "tier_name": pl.String,
            "id": pl.String,
        }
    )

    fig = timeline_figure(turns, empty, thresholds={"warn": 0.6}, window=100)

    assert [t.name for t in fig.data] == ["view sent"]


def test_tier_counts_in_tier_order_with_tier_colours() -> None:
    fig = tier_counts_figure({"FULL": 2, "WARN": 5, "SOFT": 0, "EMERGENCY": 1})

    assert titles(fig) == ("Compactions per tier", "tier", "compactions (count)")
    assert list(fig.data[0].x) == ["WARN", "SOFT", "FULL", "EMERGENCY"]
    assert list(fig.data[0].y) == [5, 0, 2, 1]


def test_compression_has_three_percentile_traces_without_tier_none() -> None:
    frame = pl.DataFrame(
        {
            "tier": [0, 2, 3],
            "tier_name": ["NONE", "SOFT", "FULL"],
            "ratio_p50": [1.0, 0.6, 0.4],
            "ratio_p90": [1.0, 0.8, 0.5],
            "ratio_p99": [1.0, 0.9, 0.6],
        }
    )

    fig = compression_figure(frame)

    assert titles(fig)[2] == "ratio (tokens after / before)"
    assert [t.name for t in fig.data] == ["p50", "p90", "p99"]
    assert list(fig.data[0].x) == ["SOFT", "FULL"]


def test_survival_two_traces_on_a_zero_to_one_axis() -> None:
    frame = pl.DataFrame(
        {"anchor_type": ["user_intent"], "survival_next": [0.9], "survival_last": [0.5]}
    )

    fig = survival_figure(frame, "Anchor survival")

    assert titles(fig) == ("Anchor survival", "anchor type", "share of items (0–1)")
    assert len(fig.data) == 2 and list(fig.layout.yaxis.range) == [0, 1.05]


def test_lead_up_and_contributors() -> None:
    lead = pl.DataFrame({"turn": [1, 2, 3], "ratio": [0.7, 0.9, 1.1]})
    top = pl.DataFrame(
        {
            "history_index": [4, 7],
            "role": ["tool", "user"],
            "tool_name": ["bash", None],
            "tokens": [900, 50],
        }
    )

    lead_fig = lead_up_figure(lead, THRESHOLDS)
    top_fig = contributors_figure(top)

    assert titles(lead_fig) == (
        "Lead-up to the emergency",
        "turn (model call)",
        "ratio of the window (0–1)",
    )
    assert len([s for s in lead_fig.layout.shapes if s.type == "line"]) == 4
    assert list(top_fig.data[0].y) == ["#4 tool (bash)", "#7 user"]
    assert titles(top_fig)[1] == "tokens (bytes / 4)"


def test_pareto_marks_the_front_apart() -> None:
    table = pl.DataFrame(
        {
            "name": ["a", "b", "c"],
            "tokens_billed": [10, 20, 30],
            "artifact_retention": [0.5, 0.9, 0.8],
        }
    )

    fig = pareto_figure(table, ["a", "b"])

    assert [t.name for t in fig.data] == ["other strategies", "a", "b"]
    assert list(fig.data[0].hovertext) == ["c"] and list(fig.data[2].x) == [20]
    assert fig.data[1].marker.symbol != fig.data[2].marker.symbol
    assert titles(fig)[1:] == ("tokens billed", "artifact retention (0–1)")
