"""Anchor retention (``/retention[?session=ID]``): which anchors survive, and silent drops.

Survival per anchor type (``anchor_survival`` of ``retention_detail``) to the next compaction and
to the last; silent drops (``silent_drops``: user intent or decisions dropped without anything
like them later), as a table naming the compactions by turn and tier with the reason in words
(``drop_reason_words``), each linking to the diff of the compaction that dropped it. Without a
session, the fleet's materialised retention tables; with one, that session's items. When there
is nothing to draw, ``anchor_coverage`` says why (no compaction yet, metadata capture, no
summarising compaction, every summary failed, ...) instead of an empty chart. Under the
survival chart, memory over repeated compactions (issue 31): the share of items still present
after k compactions, for all items and per anchor type (``survival_by_compactions``, the
``retention --json`` curve), of the fleet or of the session.
"""

from __future__ import annotations

import polars as pl
import streamlit as st

from analytics import anchor_survival, drop_reason_words, memory_figure, survival_figure
from app.context import frame, known_session, read, session_ids
from app.widgets import EMPTY_STORE, link, paginate, param
from app.words import empty_reason, plural, table_text


def _drop_rows(drops: pl.DataFrame) -> pl.DataFrame:
    """The silent drops as a person reads them: compactions by turn and tier, why in words."""
    rows = []
    for i, d in enumerate(drops.iter_rows(named=True), start=1):
        rows.append(
            {
                "no.": i,
                "session": str(d["session_id"]),
                "anchor": str(d["anchor_type"]),
                "item": str(d["item"]),
                "introduced at": _at(d.get("introduced_turn"), None),
                "dropped at": _at(d.get("dropped_turn"), d.get("dropped_tier")),
                "why": drop_reason_words(d.get("reason")),
            }
        )
    return pl.DataFrame(rows, infer_schema_length=None)


def _at(turn: int | None, tier: str | None) -> str:
    where = f"turn {turn}" if turn is not None else "turn unknown"
    return f"{where} ({tier})" if tier else where


def _drops(drops: pl.DataFrame) -> None:
    st.subheader(f"Silent drops ({drops.height:,})")
    if drops.height == 0:
        st.success("No user intent or key decision was dropped without a replacement.")
        return
    page = paginate(drops, "drops_page", page_size=20)
    # a table, not a grid: the reasons are sentences, wrapped
    st.table(table_text(_drop_rows(page), "session", "item"))
    st.caption("Open the compaction that dropped an item:")
    for i, row in enumerate(page.iter_rows(named=True), start=1):
        link(
            "diff",
            f"#{i}: open the compaction that dropped it "
            f"({_at(row.get('dropped_turn'), row.get('dropped_tier'))})",
            session=str(row["session_id"]),
            compaction=str(row["dropped_at"]),
        )


def _memory(curves: dict[str, pl.DataFrame], scope: str) -> None:
    """Survival by the number of compactions the items went through (issue 31): how fast
    memory fades over repeated compactions."""
    st.subheader("Memory over repeated compactions")
    curve = curves["all"]
    if curve.height == 0:
        st.info(
            f"No item of {scope} has gone through a later compaction yet: the curve follows "
            "anchor items from the compaction that wrote them through each summarising "
            "compaction after it, so it needs a session with two or more."
        )
        return
    title = f"Items still present after k compactions, {scope}"
    st.plotly_chart(memory_figure(curve, curves["by_type"], title), key="memory", theme=None)
    first = curve.row(0, named=True)
    last = curve.row(curve.height - 1, named=True)
    st.caption(
        f"After 1 compaction {first['survived']:,} of {plural(first['items'], 'item')} were "
        f"still present; after {last['compactions']:,}, {last['survived']:,} of "
        f"{last['items']:,}. Each point counts the items that had that many compactions after "
        "the one that wrote them (kept, or changed in words)."
    )


def _show(
    detail: pl.DataFrame,
    drops: pl.DataFrame,
    curves: dict[str, pl.DataFrame],
    title: str,
    sid: str | None,
) -> None:
    scope = "this session" if sid else "the fleet"
    survival = anchor_survival(detail) if detail.height else detail
    drawable = survival.height and (
        survival.get_column("survival_next").drop_nulls().len()
        or survival.get_column("survival_last").drop_nulls().len()
    )
    if not drawable:
        st.info(empty_reason(read("coverage", sid), scope))
    else:
        st.plotly_chart(survival_figure(survival, title), key="survival", theme=None)
        _memory(curves, scope)
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
        fleet = frame("retention_fleet")
        drops = frame("silent_drops_fleet")
        _show(fleet, drops, read("memory_fleet"), "Anchor survival, whole fleet", None)
        return
    if not known_session(sid):
        link("retention", "whole fleet")
        return
    st.text(sid)
    detail, drops = frame("retention", sid), frame("silent_drops", sid)
    _show(detail, drops, read("memory", sid), "Anchor survival, this session", sid)
    link("timeline", "this session's timeline", session=sid)
    link("retention", "whole fleet")


render()
