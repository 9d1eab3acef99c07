"""Timeline (``/timeline?session=ID``): context tokens per turn against the session's own
thresholds, with every compaction as a marker coloured by tier that shows its ledger on hover.

The turns come from ``turn_timeline`` (one per ``view_prepared``), the markers from
``compaction_turns`` joined with ``ledger_frame`` (issue 31: the cached prefix a compaction
invalidated, its rewrite cost, what the turns after it saved and the turn it paid for itself
at; whether it grew the context, ringed on the chart and said in its link). The bands sit at
the session's thresholds times its window, less its reserve, labelled in the right margin; the
y axis holds the window and the line, not the markers (``analytics.report.timeline``). Where
the line jumps because a usage report moved the estimate (``estimate_moves``: a calibrated
estimator learning the harness's hidden prompt), the turn is annotated and the note says why
under the chart. Selecting a marker (or following its link below the chart) opens the
compaction's diff. Below it, the cost per turn: the prompt split into predicted cache reads,
cache writes and uncached tokens (the costs job's) beside the cache reads the provider
reported, with the cost on a second axis in the profile's currency.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from analytics import THRESHOLDS, timeline_figure, turn_cost_figure
from app.context import frame, known_session, session_ids
from app.widgets import EMPTY_STORE, PAGE_FILES, link, marker_label, paginate, pick
from app.words import (
    ledger_note,
    ledger_summary,
    missing_history_sentence,
    move_sentence,
    plural,
)

MAX_NOTES = 5  # arrows on the chart; every move is still said under it


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


def _notes(moves: pl.DataFrame) -> pl.DataFrame:
    """The chart's arrows: the first ``MAX_NOTES`` moves, at the view sent that turn."""
    rows = moves.head(MAX_NOTES)
    texts = [
        f"provider counted {r['input_tokens']:,} (estimate {r['estimated_tokens']:,})"
        for r in rows.iter_rows(named=True)
    ]
    return rows.select("turn", "tokens").with_columns(text=pl.Series(texts, dtype=pl.String))


def _marker_links(sid: str, markers: pl.DataFrame) -> None:
    st.subheader(f"Compactions ({markers.height:,})")
    if markers.height == 0:
        st.info("No effective compaction in this session: its context never reached Warn.")
        return
    page = paginate(markers, "markers_page", page_size=20)
    for row in page.iter_rows(named=True):
        label = f"{marker_label(row)}{ledger_note(row)} (open diff)"
        link("diff", label, session=sid, compaction=str(row["id"]))


def _currency(sid: str) -> str:
    """The currency this session's turns are priced in (its ledger's), "" when unpriced."""
    rows = frame("turn_costs", sid)
    if rows.height == 0 or "currency" not in rows.columns:
        return ""
    return str(rows.get_column("currency").drop_nulls().first() or "")


def _costs(sid: str) -> None:
    rows = frame("turn_costs", sid)
    priced = rows.filter(pl.col("cost").is_not_null()) if rows.height else rows
    if priced.height == 0:
        st.info("No turn of this session is priced yet: run `compactlens stats` to price it.")
        return
    currency = str(priced.get_column("currency").drop_nulls().first() or "USD")
    profile = str(priced.get_column("profile").drop_nulls().first())
    total = float(priced.get_column("cost").sum())
    st.plotly_chart(turn_cost_figure(priced, currency), key="cost_chart", theme=None)
    st.caption(
        f"price profile {profile} · cost {total:,.4f} {currency} over "
        f"{plural(priced.height, 'turn')} "
        "· bars: predicted prompt tokens; crosses: the cache reads the provider reported"
    )


def render() -> None:
    st.title("Timeline")
    sid = pick("session", session_ids(), "session", empty=EMPTY_STORE)
    if sid is None or not known_session(sid):
        return
    session = frame("sessions", sid)
    st.text(sid)
    missing = missing_history_sentence(session.row(0, named=True).get("history_missing_tokens"))
    if missing:
        st.warning(missing)
    turns = frame("timeline", sid)
    markers = frame("markers", sid)
    if turns.height == 0:
        st.info(
            "This session has no prepared turns (an import without replay): replay it through "
            "the compactor to see its context grow: compactlens replay PATH --window 32000"
        )
        return
    thresholds, window, reserve = _settings(session)
    moves = frame("estimate_moves", sid)
    fig = timeline_figure(
        turns,
        markers,
        thresholds=thresholds,
        window=window,
        reserve=reserve,
        title=f"Context tokens per turn ({plural(turns.height, 'turn')}, window {window:,})",
        notes=_notes(moves) if moves.height else None,
        currency=_currency(sid),
    )
    event = st.plotly_chart(
        fig, on_select="rerun", selection_mode="points", key="timeline_chart", theme=None
    )
    chosen = _selected(event)
    if chosen is not None:
        st.switch_page(PAGE_FILES["diff"], query_params={"session": sid, "compaction": chosen})
    st.caption(f"{ledger_summary(markers)} Select a marker to open that compaction's diff.")
    for row in moves.iter_rows(named=True):
        st.info(move_sentence(row))
    _costs(sid)
    _marker_links(sid, markers)
    _quiet(sid)


def _quiet(sid: str) -> None:
    """The decisions not taken: turns near a threshold that compacted nothing, and why."""
    quiet = frame("quiet", sid)
    st.subheader("Decisions not taken")
    if quiet.height == 0:
        st.caption("No turn came near a threshold without compacting.")
        return
    st.dataframe(
        quiet.select(
            "turn",
            (pl.col("ratio") * 100).round(1).alias("% of the window"),
            pl.col("words").alias("why nothing fired"),
        ),
        hide_index=True,
    )


render()
