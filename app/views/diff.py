"""Compaction diff (``/diff?session=ID&compaction=ID``): what one compaction kept, offloaded,
summarised and dropped, side by side, with its anchors against the previous compaction.

The before and after views are the ``compaction_views`` rows (message references with a status);
text comes from the content-addressed message blobs, by hash (history messages, the system
prompt, and the synthetic messages this or an earlier compaction created). The anchors' item
statuses are ``retention_detail``'s; the record is the ``compactions`` row. A message's tool
calls (``messages.tool_calls``) are shown under its text: an assistant message that only
called tools shows its calls, not an empty body. "changed only" hides the messages the
compaction kept as they were, so that an offload of 3 messages among 106 shows those 3. All
content is shown with ``st.text``/``st.code``: never as HTML.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import streamlit as st

from analytics import ANCHOR_ORDER
from app.context import frame, known_session, session_ids
from app.widgets import EMPTY_STORE, link, marker_label, not_found, paginate, pick
from app.words import plural, table_text

STATUS_COLOURS = {
    "system": "gray",
    "kept": "green",
    "offloaded": "blue",
    "changed": "violet",
    "summarized": "orange",
    "dropped": "red",
    "synthetic": "primary",
}
PREVIEW_CHARS = 1_200


UNCHANGED = ("kept", "system")
"""Statuses of messages a compaction left as they were: what "changed only" hides."""


def _preview(text: str) -> str:
    more = len(text) - PREVIEW_CHARS
    return text[:PREVIEW_CHARS] + (f"\n… {more:,} more characters" if more > 0 else "")


def _message(row: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    """One message: its status, where it comes from, its text, and the tools it called (an
    assistant message that only calls tools has no text: its calls are what it said)."""
    status = str(row["status"])
    where = f"history #{row['history_index']}"
    if row["history_index"] is None:
        where = "system prompt" if status == "system" else "created by a compaction"
    st.badge(status.upper(), color=STATUS_COLOURS.get(status, "gray"))  # type: ignore[arg-type]
    st.caption(f"{row['position']}. {row['role']} · {where} · {row['bytes']:,} bytes")
    text = row["content"]
    if text is None and not calls:
        st.text("(no text stored: the session was captured as metadata)")
    elif text:
        st.text(_preview(str(text)))
    elif calls:
        st.caption(f"no text: this message only calls {plural(len(calls), 'tool')}")
    for call in calls:
        st.code(
            _preview(f"{call.get('name') or 'tool'}({call.get('arguments') or ''})"),
            language=None,
            wrap_lines=True,
        )


def _side(
    column: Any,
    views: pl.DataFrame,
    side: str,
    calls: dict[int, list[dict[str, Any]]],
    *,
    changed_only: bool,
) -> None:
    rows = views.filter(pl.col("side") == side).sort("position")
    with column:
        counts = rows.group_by("status").len().sort("status")
        summary = ", ".join(f"{n} {s}" for s, n in counts.iter_rows())
        st.subheader(f"{side.capitalize()}: {plural(rows.height, 'message')}")
        st.caption(summary)
        if changed_only:
            shown = rows.filter(~pl.col("status").is_in(UNCHANGED))
            hidden = rows.height - shown.height
            st.caption(f"{plural(hidden, 'unchanged message')} hidden (kept as they were)")
            rows = shown
        for row in paginate(rows, f"{side}_page", page_size=30).iter_rows(named=True):
            index = row["history_index"]
            with st.container(border=True):
                _message(row, calls.get(int(index), []) if index is not None else [])


def _tool_calls(sid: str) -> dict[int, list[dict[str, Any]]]:
    """The tool calls of each history message of the session that made some (by index)."""
    messages = frame("messages", sid)
    if messages.height == 0 or "tool_calls" not in messages.columns:
        return {}
    out: dict[int, list[dict[str, Any]]] = {}
    for index, raw in messages.select("idx", "tool_calls").iter_rows():
        calls = json.loads(raw) if raw else []
        if isinstance(calls, list) and calls:
            out[int(index)] = [c for c in calls if isinstance(c, dict)]
    return out


def _anchors(sid: str, cid: str, previous: str | None) -> None:
    st.subheader("Anchors")
    detail = frame("retention", sid).filter(pl.col("compaction_id") == cid)
    if detail.height == 0:
        st.info("This compaction carries no anchor items (all N/A, or captured as metadata).")
        return
    against = "the previous compaction" if previous else "nothing (first compaction)"
    st.caption(f"Item status against {against}: kept, changed, added, dropped.")
    for anchor in ANCHOR_ORDER:
        rows = detail.filter(pl.col("anchor_type") == anchor)
        if rows.height:
            st.markdown(f"**{anchor}**")
            st.table(table_text(rows.select("status", "item", "similarity"), "item"))


def _neighbours(sid: str, cid: str) -> tuple[str | None, str | None]:
    """The effective compactions before and after ``cid`` (a no-op opened by its link has
    none: it is not on the timeline either)."""
    ids = [str(i) for i in frame("markers", sid).get_column("id").to_list()]
    if cid not in ids:
        return None, None
    at = ids.index(cid)
    return (ids[at - 1] if at > 0 else None), (ids[at + 1] if at + 1 < len(ids) else None)


def _record(record: dict[str, Any]) -> None:
    st.subheader("Summary")
    summary = record.pop("summary_text", None)
    if summary:
        st.code(str(summary), language="markdown", wrap_lines=True)
    else:
        st.info("No summary text (an offload-only or truncating compaction, or metadata capture).")
    st.subheader("Record")
    st.json(
        {
            k: (str(v) if not isinstance(v, int | float | bool | None) else v)
            for k, v in record.items()
        }
    )


def _choose(sid: str) -> str | None:
    """The compaction to show: the link's, or one picked among the effective compactions (the
    timeline's markers; no-ops changed nothing and have no diff to read)."""
    markers = frame("markers", sid)
    labels = {str(r["id"]): marker_label(r) for r in markers.iter_rows(named=True)}
    return pick(
        "compaction",
        list(labels),
        "compaction (turn · tier · tokens before → after)",
        empty="This session has no effective compaction: its context never reached Warn.",
        labels=labels,
    )


def render() -> None:
    st.title("Compaction diff")
    sid = pick("session", session_ids(), "session", empty=EMPTY_STORE)
    if sid is None or not known_session(sid):
        return
    st.text(sid)
    cid = _choose(sid)
    if cid is None:
        return
    record_rows = frame("compactions", sid).filter(pl.col("id") == cid)
    if record_rows.height == 0:
        not_found("compaction", cid, "timeline")
        return
    record = record_rows.row(0, named=True)
    previous, following = _neighbours(sid, cid)
    st.caption(f"compaction {cid}")
    st.markdown(
        f"**{record['tier_name']}** · {record['tokens_before']:,} → {record['tokens_after']:,} "
        f"tokens · {record['msgs_before']:,} → {plural(record['msgs_after'], 'message')}"
    )
    if record["effective"] is False:
        st.caption(
            "A no-op: the tier was decided but there was nothing to compact, so the view was "
            "sent unchanged (it is not on the timeline)."
        )
    nav = st.columns(3)
    with nav[0]:
        link("timeline", "back to the timeline", session=sid)
    if previous:
        with nav[1]:
            link("diff", "previous compaction", session=sid, compaction=previous)
    if following:
        with nav[2]:
            link("diff", "next compaction", session=sid, compaction=following)
    views = frame("compaction_view", f"{sid}\n{cid}")
    unchanged = int(views.get_column("status").is_in(UNCHANGED).sum()) if views.height else 0
    changed_only = st.toggle(
        "changed only",
        key="changed_only",
        help=f"Hide the {plural(unchanged, 'message')} this compaction kept as they were, and "
        "show only what it offloaded, summarised, dropped, changed or created.",
    )
    calls = _tool_calls(sid)
    left, right = st.columns(2)
    _side(left, views, "before", calls, changed_only=changed_only)
    _side(right, views, "after", calls, changed_only=changed_only)
    _anchors(sid, cid, previous)
    _record(record)


render()
