"""Overview (``/``): the fleet's headline figures from ``fleet_stats`` and three charts.

Sessions, turns, compactions per tier, emergencies split into truncations and offload-only,
tokens billed against the uncompacted history, compression by tier and anchor survival. It
shows ``analytics``' figures as they are; it computes none.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from analytics import compression_figure, survival_figure, tier_counts_figure
from app.context import frame, read
from app.widgets import EMPTY_STORE, link


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _metrics(stats: dict[str, Any]) -> None:
    emergency = stats.get("emergency", {})
    tokens = stats.get("tokens", {})
    cols = st.columns(6)
    cols[0].metric("sessions", f"{stats['sessions']:,}")
    cols[1].metric("turns", f"{stats['turns']:,}")
    cols[2].metric("compactions", f"{stats['compactions']['total']:,}")
    cols[3].metric(
        "emergencies",
        f"{emergency.get('emergencies', stats['compactions']['by_tier'].get('EMERGENCY', 0)):,}",
        help=f"truncations {emergency.get('truncations', 0)}, "
        f"offload-only {emergency.get('offload_only', 0)}",
    )
    cols[4].metric("tokens saved", _share(tokens.get("saved_share")))
    cols[5].metric("silent anchor drops", f"{stats.get('silent_drops', 0):,}")
    st.caption(
        f"tokens billed {tokens.get('billed', 0):,} of {tokens.get('uncompacted', 0):,} "
        f"uncompacted · quarantined spool lines {stats.get('quarantined', 0):,} · "
        f"median compression ratio {stats.get('median_compression_ratio') or 0:.2f}"
    )


def _survival(stats: dict[str, Any]) -> pl.DataFrame:
    rows = [
        {"anchor_type": name, **figures}
        for name, figures in stats.get("anchor_retention", {}).items()
    ]
    schema = {"anchor_type": pl.String, "survival_next": pl.Float64, "survival_last": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def render() -> None:
    st.title("compactlens")
    stats: dict[str, Any] = read("fleet")
    if not stats["sessions"]:
        st.info(EMPTY_STORE)
        return
    _metrics(stats)
    left, right = st.columns(2)
    left.plotly_chart(tier_counts_figure(stats["compactions"]["by_tier"]))
    right.plotly_chart(compression_figure(frame("compression")))
    st.plotly_chart(survival_figure(_survival(stats), "Anchor survival, whole fleet"))
    st.subheader("Where to go next")
    link("sessions", "Browse sessions")
    link("emergencies", "Emergency post-mortems")
    link("retention", "Anchor retention and silent drops")


render()
