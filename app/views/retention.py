"""Anchor retention (``/retention[?session=ID]``): which anchors survive, and silent drops.

Survival per anchor type (``anchor_survival`` of ``retention_detail``) to the next compaction and
to the last; silent drops (``silent_drops``: user intent or decisions dropped without anything
like them later), each linking to the diff of the compaction that dropped it. Without a session,
the fleet's materialised retention tables; with one, that session's items.
"""

from __future__ import annotations

import polars as pl
import streamlit as st

from analytics import anchor_survival, silent_drops, survival_figure
from app.context import frame, known_session, session_ids
from app.widgets import EMPTY_STORE, link, md_escape, paginate, param

NO_ITEMS = (
    "No anchor items yet: anchors come from summarising compactions (Soft and Full) of sessions "
    "captured in full. Replay a transcript: compactlens replay PATH --window 16000"
)


def _drops(drops: pl.DataFrame) -> None:
    st.subheader(f"Silent drops ({drops.height:,})")
    if drops.height == 0:
        st.success("No user intent or key decision was dropped without a replacement.")
        return
    for row in paginate(drops, "drops_page", page_size=20).iter_rows(named=True):
        with st.container(border=True):
            st.caption(f"{row['anchor_type']} · {md_escape(str(row['session_id']))}")
            st.text(str(row["item"]))
            link(
                "diff",
                "open the compaction that dropped it",
                session=str(row["session_id"]),
                compaction=str(row["dropped_at"]),
            )


def _show(detail: pl.DataFrame, drops: pl.DataFrame, title: str) -> None:
    if detail.height == 0:
        st.info(NO_ITEMS)
        return
    st.plotly_chart(survival_figure(anchor_survival(detail), title))
    _drops(drops)


def render() -> None:
    st.title("Anchor retention")
    ids = session_ids()
    if not ids:
        st.info(EMPTY_STORE)
        return
    sid = param("session")
    if sid is None:
        choice = st.selectbox(
            "one session", ids, index=None, placeholder="whole fleet", key="retention_session"
        )
        if choice is not None:
            st.query_params["session"] = str(choice)
            sid = str(choice)
    if sid is None:
        _show(frame("retention_fleet"), frame("silent_drops_fleet"), "Anchor survival, whole fleet")
        return
    if not known_session(sid):
        link("retention", "whole fleet")
        return
    st.text(sid)
    detail = frame("retention", sid)
    drops = silent_drops(detail) if detail.height else detail
    _show(detail, drops, "Anchor survival, this session")
    link("timeline", "this session's timeline", session=sid)
    link("retention", "whole fleet")


render()
