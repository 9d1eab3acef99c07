"""Emergencies (``/emergencies[?session=ID]``): the post-mortem of each Emergency compaction.

Without a session: every emergency of the fleet, newest first, each named by its cause and
linking to its session. With one: for each of its emergencies, ``postmortem_json``'s cause and
sentence first, then the fix in words (``app.postmortem``), the lead-up (the ratio the tier was
decided on, per turn, against the session's thresholds), the messages that pushed it over, what
it dropped, and the counterfactuals (config changes replayed over the lead-up, with the smallest
one's config to download) once they are computed.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from analytics import COUNTERFACTUAL_JOB, THRESHOLDS, contributors_figure, lead_up_figure
from app.context import frame, known_session, owner, read, session_ids
from app.postmortem import CAUSE_TITLES, show_cause, show_counterfactuals, show_fix
from app.widgets import EMPTY_STORE, link, paginate, param

NONE_YET = (
    "No emergency in this store: no context reached the Emergency threshold. A small window "
    "shows one: compactlens replay PATH --window 8000"
)


def _fleet() -> None:
    rows = frame("emergencies")
    if rows.height == 0:
        st.success(NONE_YET)
        return
    st.caption(f"{rows.height:,} emergencies (newest first; at most 1,000 listed)")
    for row in paginate(rows, "emergencies_page", page_size=25).iter_rows(named=True):
        cause = CAUSE_TITLES.get(str(row.get("cause")), "cause not computed yet").lower()
        label = (
            f"{row['session_id']} — {cause}: {row['emergency'] or 'emergency'} at seq "
            f"{row['seq']}, {row['tokens_before']:,} → {row['tokens_after']:,} tokens"
        )
        link("emergencies", label, session=str(row["session_id"]))


def _counterfactuals(item: dict[str, Any]) -> None:
    st.markdown("**Counterfactuals** (config changes replayed over the lead-up)")
    if item.get("counterfactual_status") == "not computed":
        st.info("Not computed yet: they replay the lead-up once per config change.")
        if st.button("compute counterfactuals", key=f"cf_{item['compaction_id']}"):
            with st.spinner("replaying the lead-ups…"):
                owner().run_jobs((COUNTERFACTUAL_JOB,))
            st.rerun()
        return
    show_counterfactuals(item)


def _postmortem(item: dict[str, Any], thresholds: dict[str, float], sid: str) -> None:
    show_cause(item)
    show_fix(item)
    st.caption(f"compaction {item['compaction_id']}")
    link("diff", "open its diff", session=sid, compaction=str(item["compaction_id"]))
    lead = pl.DataFrame(item["lead_up"], schema={"turn": pl.Int64, "ratio": pl.Float64})
    top_schema = {
        "history_index": pl.Int64,
        "role": pl.String,
        "tool_name": pl.String,
        "tokens": pl.Int64,
    }
    top = pl.DataFrame(item["top_contributors"], schema=top_schema)
    left, right = st.columns(2)
    left.plotly_chart(lead_up_figure(lead, thresholds), key=f"lead_{item['compaction_id']}")
    right.plotly_chart(contributors_figure(top), key=f"top_{item['compaction_id']}")
    dropped = item.get("dropped") or {}
    cols = st.columns(2)
    cols[0].metric("messages dropped", f"{dropped.get('messages') or 0:,}")
    cols[1].metric("tokens dropped", f"{dropped.get('tokens') or 0:,}")
    if top.height:
        st.table(top)
    _counterfactuals(item)


def render() -> None:
    st.title("Emergencies")
    if not session_ids():
        st.info(EMPTY_STORE)
        return
    sid = param("session")
    if sid is None:
        _fleet()
        return
    if not known_session(sid):
        link("emergencies", "all emergencies")
        return
    st.text(sid)
    found: dict[str, Any] = read("postmortems", sid)
    items = found.get("postmortems", [])
    if not items:
        st.success("This session had no Emergency compaction.")
        link("emergencies", "all emergencies")
        return
    session = frame("sessions", sid).row(0, named=True)
    thresholds = {n: float(session[n]) for n in THRESHOLDS if session[n] is not None}
    for item in items:
        with st.container(border=True):
            _postmortem(item, thresholds, sid)
    link("timeline", "this session's timeline", session=sid)


render()
