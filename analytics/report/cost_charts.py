"""Pure figure builders for cost: Polars frames in, Plotly figures out, no Streamlit, no store.

``turn_cost_figure`` draws one session's prompt per turn split the way providers bill it
(the costs job's predicted cache reads, cache writes and uncached tokens), the cache reads the
provider itself reported, and the predicted cost per turn on a secondary axis in the profile's
currency. It only draws what ``analytics.queries.app.turn_cost_rows`` returns.
"""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from analytics.report.theme import THEME

SPLIT_COLOURS = {
    "cache_read_tokens": ("cache read (predicted)", "#2e86c1"),
    "cache_write_tokens": ("cache write (predicted)", "#e67e22"),
    "uncached_tokens": ("uncached (predicted)", "#7f8c8d"),
}


def turn_cost_figure(rows: pl.DataFrame, currency: str) -> go.Figure:
    """Per turn (``turn_cost_rows``): the predicted cache split as stacked bars (tokens), the
    provider-reported cache reads as markers (tokens), and the cost as a line on the right
    axis (``currency``)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    turns = rows.get_column("turn").to_list() if rows.height else []
    for column, (name, colour) in SPLIT_COLOURS.items():
        values = rows.get_column(column).to_list() if rows.height else []
        fig.add_trace(go.Bar(x=turns, y=values, name=name, marker_color=colour), secondary_y=False)
    if rows.height and rows.get_column("reported_cache_read_tokens").null_count() < rows.height:
        fig.add_trace(
            go.Scatter(
                x=turns,
                y=rows.get_column("reported_cache_read_tokens").to_list(),
                mode="markers",
                name="cache read (provider reported)",
                marker={"color": "#1b4f72", "symbol": "x", "size": 7},
            ),
            secondary_y=False,
        )
    cost = rows.get_column("cost").to_list() if rows.height else []
    fig.add_trace(
        go.Scatter(
            x=turns,
            y=cost,
            mode="lines",
            name=f"cost per turn ({currency})",
            line={"color": "#c0392b", "width": 2},
        ),
        secondary_y=True,
    )
    fig.update_layout(
        template=THEME,
        barmode="stack",
        title={"text": f"Prompt tokens per turn by cache use, and cost per turn ({currency})"},
        margin={"l": 60, "r": 60, "t": 60, "b": 50},
        legend={"orientation": "h", "y": -0.2},
    )
    fig.update_xaxes(title_text="turn (model call)")
    fig.update_yaxes(title_text="prompt tokens", secondary_y=False)
    fig.update_yaxes(title_text=f"cost ({currency})", secondary_y=True, rangemode="tozero")
    return fig
