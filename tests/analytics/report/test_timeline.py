"""The session timeline figure (``analytics.report.timeline``): what its axis holds, where its
threshold labels go, and what each compaction's marker says (its ledger, its growth)."""

from __future__ import annotations

from itertools import pairwise

import plotly.graph_objects as go
import polars as pl
import pytest

from analytics.jobs.ledger import NEVER_END
from analytics.report.theme import THEME
from analytics.report.timeline import (
    LABEL_PX,
    PLOT_PX,
    axis_top,
    label_shifts,
    ledger_lines,
    marker_lines,
    timeline_figure,
)

DEFAULTS = {"warn": 0.6, "soft": 0.7, "full": 0.8, "emergency": 0.95}


def _timeline_inputs(marker_tokens: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Ten turns under 16k, and markers whose highest ``tokens_before`` is ``marker_tokens``
    (a compaction's own estimate of the history it started from can exceed any view sent)."""
    turns = pl.DataFrame(
        {"turn": list(range(1, 11)), "tokens": [1_000 * t for t in range(1, 11)]},
    )
    markers = pl.DataFrame(
        {
            "turn": [4, 7, 9],
            "tokens_before": [9_800, 12_500, marker_tokens],
            "tokens_after": [6_000, 7_000, 8_000],
            "tier_name": ["SOFT", "FULL", "EMERGENCY"],
            "id": ["c1", "c2", "c3"],
        }
    )
    return turns, markers


def _drawn(fig: go.Figure) -> list[float]:
    return [
        y for t in fig.data if t.mode == "markers" and t.name != "grew the context" for y in t.y
    ]


def test_the_y_axis_holds_the_line_and_the_window_not_a_marker_far_above_them() -> None:
    turns, markers = _timeline_inputs(62_033)  # the Emergency, 4x the window

    fig = timeline_figure(turns, markers, thresholds=DEFAULTS, window=16_000)

    low, high = fig.layout.yaxis.range
    assert low == 0 and 16_000 < high < 20_000  # not stretched to 62,033
    drawn = _drawn(fig)
    assert len(drawn) == markers.height  # every compaction is still a marker
    assert all(low <= y < high for y in drawn)  # on the plot
    emergency = next(t for t in fig.data if t.name == "EMERGENCY")
    assert emergency.marker.symbol == ("triangle-up",)  # drawn at the top, pointing up
    assert "62,033 → 8,000 tokens (above the chart" in emergency.hovertext[0]
    soft = next(t for t in fig.data if t.name == "SOFT")
    assert soft.y == (9_800,) and soft.marker.symbol == ("diamond",)


def test_the_y_axis_holds_the_window_when_everything_is_below_it() -> None:
    turns, markers = _timeline_inputs(13_000)

    fig = timeline_figure(turns, markers, thresholds={"warn": 0.6}, window=16_000)

    assert fig.layout.yaxis.range[1] == axis_top(turns, 16_000) > 16_000


def _labels(fig: go.Figure) -> list[go.layout.Annotation]:
    return [a for a in fig.layout.annotations if a.name == "threshold"]


@pytest.mark.parametrize("top_tokens", [16_000, 64_000, 250_000])
def test_threshold_labels_are_at_least_a_label_apart_however_the_axis_squeezes_them(
    top_tokens: int,
) -> None:
    turns = pl.DataFrame({"turn": [1, 2], "tokens": [1_000, top_tokens]})
    empty = _timeline_inputs(0)[1].clear()

    fig = timeline_figure(turns, empty, thresholds=DEFAULTS, window=16_000, reserve=500)

    labels = _labels(fig)
    assert [a.text.split()[0] for a in labels] == ["WARN", "SOFT", "FULL", "EMERGENCY", "window"]
    top = fig.layout.yaxis.range[1]
    placed = [a.y / top * PLOT_PX + a.yshift for a in labels]  # pixels on the least plot
    assert all(b - a >= LABEL_PX - 1e-9 for a, b in pairwise(placed))
    assert all(a.xref == "paper" and a.x == 1 and a.xanchor == "left" for a in labels)
    assert fig.layout.margin.r >= 110  # room for "EMERGENCY 14,700" in the right margin


def test_labels_far_apart_are_not_moved() -> None:
    assert label_shifts([1_000, 8_000, 15_000], top=16_000) == [0.0, 0.0, 0.0]
    moved = label_shifts([15_000, 15_100, 15_200], top=16_000)
    assert moved[0] == 0 and 0 < moved[1] < moved[2]


def _ledger(**values: object) -> dict[str, object]:
    row: dict[str, object] = {
        "turn": 12,
        "tier_name": "FULL",
        "tokens_before": 14_000,
        "tokens_after": 6_000,
        "invalidated_tokens": 12_400,
        "rewrite_cost": 0.0123,
        "saved_after": 0.05,
        "break_even_turn": 15,
        "paid": True,
        "never": None,
        "necessary": False,
        "grew": False,
        "growth_tokens": 0,
        "growth_reason": None,
        "rebound_turns": None,
    }
    return {**row, **values}


def test_a_marker_says_its_ledger_on_hover() -> None:
    said = "\n".join(marker_lines(_ledger(), "USD"))

    assert "<b>FULL</b> at turn 12" in said and "14,000 → 6,000 tokens" in said
    assert "cache invalidated: 12,400 tokens" in said
    assert "rewrite cost: 0.0123 USD" in said and "saved after: 0.0500 USD" in said
    assert "paid for itself at turn 15" in said
    assert "grew" not in said


def test_a_marker_that_never_paid_or_grew_or_came_back_says_so() -> None:
    row = _ledger(
        paid=False,
        break_even_turn=None,
        never=NEVER_END,
        grew=True,
        growth_tokens=1_500,
        growth_reason="the summary is longer than what it replaced",
        rebound_turns=2,
    )

    said = "\n".join(marker_lines(row, "EUR"))

    assert f"did not pay for itself: {NEVER_END}" in said
    assert "grew the context</b> by 1,500 tokens: the summary is longer" in said
    assert "back above its tier 2 turns later" in said


def test_an_unpriced_compaction_says_it_has_no_ledger() -> None:
    assert ledger_lines(_ledger(paid=None, never=None), "") == ["ledger: its turns are not priced"]
    assert ledger_lines({"turn": 3}, "") == []  # rows without ledger columns: nothing said


def test_a_compaction_that_grew_is_ringed_and_the_ring_opens_its_diff() -> None:
    turns, markers = _timeline_inputs(13_000)
    grown = markers.with_columns(
        grew=pl.Series([False, True, None]),
        growth_tokens=pl.Series([0, 900, None]),
        growth_reason=pl.Series([None, "the summary is longer than what it replaced", None]),
    )

    fig = timeline_figure(turns, grown, thresholds=DEFAULTS, window=16_000)

    (ring,) = [t for t in fig.data if t.name == "grew the context"]
    assert list(ring.customdata) == ["c2"] and list(ring.x) == [7] and list(ring.y) == [12_500]
    assert ring.marker.symbol == "circle-open"
    assert "grew the context</b> by 900 tokens" in ring.hovertext[0]


def test_the_timeline_has_the_shared_theme() -> None:
    turns, markers = _timeline_inputs(13_000)

    fig = timeline_figure(turns, markers, thresholds=DEFAULTS, window=16_000)

    assert fig.layout.template.layout.font.family == THEME.layout.font.family
    assert fig.layout.template.layout.colorway == THEME.layout.colorway


def test_a_compaction_after_the_last_turn_is_drawn_after_it() -> None:
    turns, markers = _timeline_inputs(14_000)
    late = pl.DataFrame(
        {
            "turn": [None],
            "tokens_before": [15_000],
            "tokens_after": [9_000],
            "tier_name": ["FULL"],
            "id": ["c4"],
        },
        schema=markers.schema,
    )

    fig = timeline_figure(turns, pl.concat([markers, late]), thresholds={}, window=16_000)

    full = next(t for t in fig.data if t.name == "FULL")
    assert list(full.x) == [7, 11] and list(full.customdata) == ["c2", "c4"]
    assert "after the last turn" in full.hovertext[1]


def test_notes_are_drawn_as_arrows_at_their_turn() -> None:
    turns, markers = _timeline_inputs(14_000)
    notes = pl.DataFrame({"turn": [2], "tokens": [2_000], "text": ["provider counted 15,553"]})

    fig = timeline_figure(turns, markers, thresholds={}, window=16_000, notes=notes)

    (note,) = fig.layout.annotations[-1:]
    assert (note.x, note.y, note.text, note.showarrow) == (
        2,
        2_000,
        "provider counted 15,553",
        True,
    )
