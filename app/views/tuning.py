"""Tuning lab (``/tuning``): tuning runs, their Pareto front and the recommended config.

The tuning lab (``analytics.tuning``, issue 9) records runs and trials as events; until its
reads are exported from ``analytics`` this page says how to run one from the command line.
It never computes a figure of its own.
"""

from __future__ import annotations

import streamlit as st

from app.context import session_ids

HOW = (
    "No tuning run in this store yet. Run one from the command line: "
    "`compactlens tune PATH --window 32000` (it replays your sessions under several "
    "configurations and rival strategies, and writes a recommended config)."
)


def render() -> None:
    st.title("Tuning lab")
    st.info(HOW)
    if session_ids():
        st.caption("The sessions in this store can be tuned on once a tuning run is recorded.")


render()
