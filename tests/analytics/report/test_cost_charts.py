"""``turn_cost_figure`` and the tuning chart drawn on cost: units and currency on the axes, the
cost on its own axis, the provider's cache reads beside the predicted split."""

from __future__ import annotations

import polars as pl

from analytics.report.charts import pareto_figure
from analytics.report.cost_charts import turn_cost_figure


def _rows(reported: list[int | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "turn": [1, 2, 3],
            "cache_read_tokens": [0, 900, 1800],
            "cache_write_tokens": [1000, 1000, 200],
            "uncached_tokens": [10, 12, 14],
            "cost": [0.004, 0.0015, 0.0009],
            "profile": ["anthropic"] * 3,
            "reported_cache_read_tokens": reported,
        },
        schema_overrides={"reported_cache_read_tokens": pl.Int64},
    )


def test_the_cost_per_turn_is_a_line_on_its_own_axis_in_the_profile_currency() -> None:
    fig = turn_cost_figure(_rows([0, 880, 1790]), "USD")

    names = [t.name for t in fig.data]
    assert names == [
        "cache read (predicted)",
        "cache write (predicted)",
        "uncached (predicted)",
        "cache read (provider reported)",
        "cost per turn (USD)",
    ]
    cost = fig.data[-1]
    assert cost.yaxis == "y2" and list(cost.y) == [0.004, 0.0015, 0.0009]
    assert list(fig.data[3].y) == [0, 880, 1790] and fig.data[3].yaxis == "y"
    assert fig.layout.barmode == "stack"
    assert fig.layout.yaxis2.title.text == "cost (USD)"
    assert fig.layout.yaxis.title.text == "prompt tokens"
    assert "USD" in fig.layout.title.text and fig.layout.xaxis.title.text


def test_a_session_without_provider_cache_figures_draws_no_reported_trace() -> None:
    fig = turn_cost_figure(_rows([None, None, None]), "Mtok")

    assert "cache read (provider reported)" not in [t.name for t in fig.data]
    assert fig.layout.yaxis2.title.text == "cost (Mtok)"


def test_the_tuning_chart_is_drawn_on_cost_when_that_is_the_objective() -> None:
    table = pl.DataFrame(
        {
            "name": ["a", "b"],
            "tokens_billed": [100, 200],
            "cost": [0.5, 0.2],
            "artifact_retention": [0.9, 0.8],
        }
    )

    fig = pareto_figure(table, ["b"], "cost", "USD")

    assert list(fig.data[1].x) == [0.2] and fig.data[1].name == "b"
    assert fig.layout.xaxis.title.text == "cost (USD)"
    assert fig.layout.title.text.startswith("Tuning: cost vs artifact retention")
