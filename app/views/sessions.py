"""Sessions (``/sessions``): every live session with its counts; filter, sort, paginate.

The rows are ``session_summaries``; each row on the current page links to its timeline,
emergencies and offloaded files. "cohort" adds a column with each session's group as
``stats --by`` makes it (window, config, source, model, agent, harness) and filters on one
group. Nothing is computed here beyond filtering what is shown.
"""

from __future__ import annotations

import polars as pl
import streamlit as st

from analytics import COHORT_KEYS
from app.context import frame
from app.widgets import EMPTY_STORE, link, paginate, url_choice, url_flag, url_text
from app.words import COHORT_WORDS, plural

SORTS = {
    "newest first": ("started_at", True),
    "most compactions": ("compactions", True),
    "most emergencies": ("emergencies", True),
    "largest peak context": ("peak_tokens", True),
    "most turns": ("turns", True),
    "session id": ("session_id", False),
}


def _filtered(rows: pl.DataFrame) -> pl.DataFrame:
    left, middle, right, last = st.columns([3, 2, 2, 2])
    text = url_text("contains", "session id contains", column=left)
    agents = sorted(str(a) for a in rows.get_column("agent").drop_nulls().unique().to_list())
    agent = url_choice("agent", ["all", *agents], "agent", default="all", column=middle)
    sort = url_choice("sort", list(SORTS), "sort by", default=next(iter(SORTS)), column=right)
    only = url_flag("emergencies", "with emergencies only", column=last)
    if text:
        rows = rows.filter(pl.col("session_id").str.contains(text, literal=True))
    if agent != "all":
        rows = rows.filter(pl.col("agent") == agent)
    if only:
        rows = rows.filter(pl.col("emergencies") > 0)
    column, descending = SORTS[str(sort)]
    return _by_cohort(rows).sort(column, descending=descending, nulls_last=True)


def _by_cohort(rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` with the chosen cohort as a column, limited to one of its groups if chosen."""
    left, right = st.columns(2)
    keys = ["none", *COHORT_KEYS]
    by = url_choice("by", keys, "cohort", default="none", words=COHORT_WORDS, column=left)
    if by == "none":
        return rows
    name = str(by)
    rows = rows.join(frame("cohort_of", name), on="session_id", how="left")
    values = sorted(str(v) for v in rows.get_column(name).drop_nulls().unique().to_list())
    chosen = url_choice("is", ["all", *values], f"{name} is", default="all", column=right)
    return rows if chosen == "all" else rows.filter(pl.col(name) == chosen)


def render() -> None:
    st.title("Sessions")
    rows = frame("summaries")
    if rows.height == 0:
        st.info(EMPTY_STORE)
        return
    shown = _filtered(rows)
    st.caption(f"{shown.height:,} of {plural(rows.height, 'session')}")
    if shown.height == 0:
        st.info("No session matches these filters: clear the text or choose 'all'.")
        return
    page = paginate(shown, "sessions_page", page_size=25)
    st.dataframe(page, hide_index=True)
    st.subheader("Open a session")
    for row in page.iter_rows(named=True):
        sid = str(row["session_id"])
        cols = st.columns([6, 2, 2])
        with cols[0]:
            link(
                "timeline",
                f"{sid} — {plural(row['turns'], 'turn')}, "
                f"{plural(row['compactions'], 'compaction')}",
                session=sid,
            )
        with cols[1]:
            if row["emergencies"]:
                link(
                    "emergencies",
                    plural(row["emergencies"], "emergency", "emergencies"),
                    session=sid,
                )
        with cols[2]:
            if row["offloads"]:
                link("offloads", plural(row["offloads"], "offloaded file"), session=sid)


render()
