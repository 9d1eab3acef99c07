"""The look every compactlens chart shares, in the app and in the HTML report alike.

``THEME`` is a Plotly template: the font, text colour, grid and categorical colours of the
app's light theme (Streamlit's), so that a chart in ``compactlens report`` looks as it does on
its page. The app draws the figures with this template (``theme=None``: Streamlit adds none of
its own), the report's CSS uses ``FONT`` and ``TEXT``. Tiers keep their own colours
(``charts.TIER_COLOURS``) on top of it. No Streamlit here: the report must not need it.
"""

from __future__ import annotations

import plotly.graph_objects as go

FONT = '"Source Sans Pro", "Source Sans 3", system-ui, -apple-system, "Segoe UI", sans-serif'
TEXT = "#31333f"
GRID = "#e6eaf1"
COLOURS = (
    "#0068c9",
    "#83c9ff",
    "#ff2b2b",
    "#ffabab",
    "#29b09d",
    "#7defa1",
    "#ff8700",
    "#ffd16a",
    "#6d3fc0",
    "#d5dae5",
)
"""The app's categorical colours, in its order."""

_AXIS = {
    "gridcolor": GRID,
    "zerolinecolor": GRID,
    "linecolor": GRID,
    "automargin": True,
    "title": {"font": {"size": 13, "color": TEXT}},
    "tickfont": {"size": 12, "color": TEXT},
}

THEME = go.layout.Template(
    layout={
        "font": {"family": FONT, "size": 13, "color": TEXT},
        "title": {"font": {"size": 16, "color": TEXT}, "x": 0, "xanchor": "left"},
        "colorway": list(COLOURS),
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "xaxis": _AXIS,
        "yaxis": _AXIS,
        "legend": {"font": {"size": 12, "color": TEXT}},
        "hoverlabel": {"font": {"family": FONT, "size": 12}},
    }
)
