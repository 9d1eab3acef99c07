"""Emergencies (``/emergencies[?session=ID]``): the post-mortems of Emergency compactions.

Without a session: every emergency of the fleet, newest first, each named by its cause and
linking to its session. With one: its emergencies grouped by cause (``postmortem_json``'s
``groups``), so that a session with a hundred emergencies of one cause is one block, not a
hundred. Each group: the cause, how many and at which turns, its representative's sentence and
the fix in words (``app.postmortem``), what the group dropped and how much of it is settled;
then the representative's lead-up (the ratio the tier was decided on, per turn, against the
session's thresholds: the group's one chart), the messages that pushed it over, its
counterfactuals (config changes replayed over the lead-up, with the smallest one's config to
download) once they are computed, and a table of every emergency of the group.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from analytics import COUNTERFACTUAL_JOB, THRESHOLDS, fix_words, lead_up_figure
from app.context import frame, known_session, owner, read, session_ids
from app.postmortem import CAUSE_TITLES, show_counterfactuals, show_group
from app.widgets import EMPTY_STORE, link, md_escape, paginate, param
from app.words import fix_text, plural, table_text

NONE_YET = (
    "No emergency in this store: no context reached the Emergency threshold. A small window "
    "shows one: compactlens replay PATH --window 8000"
)


def _fleet() -> None:
    rows = frame("emergencies")
    if rows.height == 0:
        st.success(NONE_YET)
        return
    st.caption(
        f"{plural(rows.height, 'emergency', 'emergencies')} (newest first; at most 1,000 listed)"
    )
    for row in paginate(rows, "emergencies_page", page_size=25).iter_rows(named=True):
        cause = CAUSE_TITLES.get(str(row.get("cause")), "cause not computed yet").lower()
        label = (
            f"{row['session_id']} — {cause}: {row['emergency'] or 'emergency'} at seq "
            f"{row['seq']}, {row['tokens_before']:,} → {row['tokens_after']:,} tokens"
        )
        link("emergencies", label, session=str(row["session_id"]))


def _counterfactual_button(items: list[dict[str, Any]]) -> None:
    """One button for the page when some emergency's counterfactuals are not computed yet."""
    missing = sum(p.get("counterfactual_status") == "not computed" for p in items)
    if not missing:
        return
    st.info(
        f"Not computed yet: the counterfactuals of {missing:,} of these emergencies (they "
        "replay each lead-up once per config change)."
    )
    if st.button("compute counterfactuals", key="cf_session"):
        with st.spinner("replaying the lead-ups…"):
            owner().run_jobs((COUNTERFACTUAL_JOB,))
        st.rerun()


def _session_fix(fix: dict[str, Any]) -> None:
    """The one config found to avoid every avoidable emergency of the session, or why none."""
    if not fix.get("verified"):
        why = fix.get("reason") or "no change avoided them all"
        st.markdown(f"**One fix for the session:** none verified ({md_escape(str(why))})")
        return
    turns = fix.get("avoids") or []
    listed = ", ".join(str(t) for t in turns)
    where = f": no emergency at turn{'s' * (len(turns) > 1)} {listed}" if turns else ""
    what = md_escape(str(fix.get("detail") or fix.get("change")))
    st.markdown(
        f"**One fix for the session:** {what} (verified by replaying the whole session"
        f"{md_escape(where)})"
    )


def _members(group: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> pl.DataFrame:
    """Every emergency of a group, one row each: turn, fix in words, what it dropped."""
    rows = [
        {
            "turn": p.get("turn"),
            "fix": fix_text(fix_words(p)),
            "messages dropped": (p.get("dropped") or {}).get("messages"),
            "tokens dropped": (p.get("dropped") or {}).get("tokens"),
            "compaction": str(cid),
        }
        for cid in group["compaction_ids"]
        if (p := by_id.get(str(cid))) is not None
    ]
    schema = {
        "turn": pl.Int64,
        "fix": pl.String,
        "messages dropped": pl.Int64,
        "tokens dropped": pl.Int64,
        "compaction": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def _group(
    group: dict[str, Any],
    by_id: dict[str, dict[str, Any]],
    thresholds: dict[str, float],
    sid: str,
) -> None:
    """One group: its words (``show_group``), then its representative's lead-up (the group's
    one chart), the messages that pushed it over, its counterfactuals, and the list of all."""
    show_group(group)
    rep = by_id[str(group["representative"]["compaction_id"])]
    cid = str(rep["compaction_id"])
    lead = pl.DataFrame(rep["lead_up"], schema={"turn": pl.Int64, "ratio": pl.Float64})
    st.plotly_chart(lead_up_figure(lead, thresholds), key=f"lead_{cid}", theme=None)
    top_schema = {
        "history_index": pl.Int64,
        "role": pl.String,
        "tool_name": pl.String,
        "tokens": pl.Int64,
    }
    top = pl.DataFrame(rep["top_contributors"], schema=top_schema)
    if top.height:
        st.markdown(f"**Largest messages before turn {rep['turn']}** (tokens)")
        st.table(table_text(top, "tool_name"))
    link("diff", f"open the diff of turn {rep['turn']}", session=sid, compaction=cid)
    if rep.get("counterfactual_status") != "not computed":
        st.markdown(f"**Counterfactuals of turn {rep['turn']}** (config changes replayed)")
        show_counterfactuals(rep)
    if group["count"] > 1:
        with st.expander(f"all {group['count']:,} emergencies of this group"):  # count > 1
            st.dataframe(_members(group, by_id), hide_index=True)


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
    groups = found["groups"]
    st.caption(
        f"{plural(len(items), 'emergency', 'emergencies')} in {plural(len(groups), 'group')} "
        "by cause. Each group shows one of its emergencies "
        "(the first with a verified fix, else the first): its sentence, lead-up and fix; the "
        "list under it holds every one."
    )
    fixes = {str(s["session_id"]): s["session_fix"] for s in found.get("sessions") or []}
    if fix := fixes.get(sid):
        _session_fix(fix)
    session = frame("sessions", sid).row(0, named=True)
    thresholds = {n: float(session[n]) for n in THRESHOLDS if session[n] is not None}
    _counterfactual_button(items)
    by_id = {str(p["compaction_id"]): p for p in items}
    for group in groups:
        with st.container(border=True):
            _group(group, by_id, thresholds, sid)
    link("timeline", "this session's timeline", session=sid)


render()
