"""Timeline (``/timeline?session=ID``): context tokens per turn against the session's own
thresholds, with every compaction as a marker coloured by tier.

The turns come from ``turn_timeline`` (one per ``view_prepared``), the markers from
``compaction_turns``; the bands sit at the session's thresholds times its window, less its
reserve. Selecting a marker (or following its link below the chart) opens the compaction's diff.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from analytics import THRESHOLDS, timeline_figure
from app.context import frame, known_session, session_ids
from app.widgets import EMPTY_STORE, PAGE_FILES, link, paginate, pick


def _settings(session: pl.DataFrame) -> tuple[dict[str, float], int, int]:
    row = session.row(0, named=True)
    thresholds = {name: float(row[name]) for name in THRESHOLDS if row[name] is not None}
    return thresholds, int(row["context_window"] or 0), int(row["reserve_tokens"] or 0)


def _selected(event: Any) -> str | None:
    """The compaction id of the first selected marker, if any."""
    points = event.get("selection", {}).get("points", []) if event else []
    for point in points:
        custom = point.get("customdata")
        if isinstance(custom, list):
            custom = custom[0] if custom else None
        if custom:
            return str(custom)
    return None


def _marker_links(sid: str, markers: pl.DataFrame) -> None:
    st.subheader(f"Compactions ({markers.height:,})")
    if markers.height == 0:
        st.info("No effective compaction in this session: its context never reached Warn.")
        return
    page = paginate(markers, "markers_page", page_size=20)
    for row in page.iter_rows(named=True):
        turn = "after the last turn" if row["turn"] is None else f"turn {row['turn']}"
        label = (
            f"{row['tier_name']} at {turn}: {row['tokens_before']:,} → "
            f"{row['tokens_after']:,} tokens (open diff)"
        )
        link("diff", label, session=sid, compaction=str(row["id"]))


def render() -> None:
    st.title("Timeline")
    sid = pick("session", session_ids(), "session", empty=EMPTY_STORE)
    if sid is None or not known_session(sid):
        return
    session = frame("sessions", sid)
    st.text(sid)
    turns = frame("timeline", sid)
    markers = frame("markers", sid)
    if turns.height == 0:
        st.info(
            "This session has no prepared turns (an import without replay): replay it through "
            "the compactor to see its context grow: compactlens replay PATH --window 32000"
        )
        return
    thresholds, window, reserve = _settings(session)
    fig = timeline_figure(
        turns,
        markers,
        thresholds=thresholds,
        window=window,
        reserve=reserve,
        title=f"Context tokens per turn ({turns.height:,} turns, window {window:,})",
    )
    event = st.plotly_chart(fig, on_select="rerun", selection_mode="points", key="timeline_chart")
    chosen = _selected(event)
    if chosen is not None:
        st.switch_page(PAGE_FILES["diff"], query_params={"session": sid, "compaction": chosen})
    st.caption("Select a marker to open that compaction's diff.")
    _marker_links(sid, markers)


render()
