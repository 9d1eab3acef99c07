"""What every page shares: the store owner of this process and cached reads through it.

The owner is ``app.owner.shared_owner`` (one per home and process, opened by the server at
start-up), held in a ``st.cache_resource`` that closes it when the cache is cleared. Reads are
``st.cache_data`` keyed on the owner's ``version``, so a page rerun costs nothing until an
ingest adds events, and then reads fresh rows. Each read is a named function of
``analytics`` (queries, jobs): this module chooses which one to call, never what it computes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import polars as pl
import streamlit as st

from analytics import (
    EventStore,
    StoreError,
    anchor_coverage,
    anchor_items_frame,
    audit_json,
    cohorts,
    compaction_turns,
    compaction_view,
    compactions_frame,
    emergency_list,
    estimate_moves,
    fleet_stats,
    job_table,
    ledger_frame,
    live_sessions,
    messages_frame,
    model_calls_frame,
    native_sessions,
    offloads_frame,
    postmortem_json,
    quiet_frame,
    redact_url,
    retention_detail,
    retention_status_rows,
    session_metadata,
    session_sources,
    session_summaries,
    sessions_frame,
    silent_drops,
    survival_by_compactions,
    synthetic_frame,
    system_prompt,
    turn_cost_rows,
    turn_timeline,
    turns_frame,
    views_frame,
)
from app.owner import StoreOwner, current_home, release_owner, shared_owner
from app.widgets import md_escape, not_found
from app.words import cohort_value


@st.cache_resource(show_spinner=False, on_release=release_owner)
def _owner(home: str) -> StoreOwner:
    return shared_owner(Path(home))


def owner() -> StoreOwner:
    """This process's owner of the store; one clear line and a stop when it cannot open it
    (another process owns it, the file is unusable, the lake's PostgreSQL is down)."""
    try:
        return _owner(str(current_home()))
    except StoreError as exc:
        stop_with(str(exc))


def stop_with(message: str) -> NoReturn:
    """Show ``message`` as the page's error, with any secret of the store URL hidden (every
    visitor reads it), and end the page run there: no traceback, no half-drawn page."""
    st.error(md_escape(redact_url(message)))
    st.stop()


Read = Callable[[EventStore, str | None], Any]


def _session_list(session: str | None) -> list[str] | None:
    return None if session is None else [session]


def _timeline(store: EventStore, sid: str | None) -> pl.DataFrame:
    scope = _session_list(sid)
    return turn_timeline(turns_frame(store, scope), sessions_frame(store, scope))


LEDGER_SHOWN = (
    "invalidated_tokens",
    "rewrite_cost",
    "saved_after",
    "break_even_turn",
    "paid",
    "never",
    "necessary",
    "grew",
    "growth_tokens",
    "growth_reason",
    "rebound_turns",
)
"""The ledger's columns the timeline's markers carry (issue 31: its ledger on hover)."""


def _markers(store: EventStore, sid: str | None) -> pl.DataFrame:
    """The effective compactions by turn, with their tokens and their ledger."""
    scope = _session_list(sid)
    compactions = compactions_frame(store, scope)
    marks = compaction_turns(compactions, turns_frame(store, scope), sessions_frame(store, scope))
    sizes = compactions.select("id", "tokens_before", "tokens_after")
    ledger = ledger_frame(store, scope).select(pl.col("compaction_id").alias("id"), *LEDGER_SHOWN)
    return marks.join(sizes, on="id", how="left", maintain_order="left").join(
        ledger, on="id", how="left", maintain_order="left"
    )


def _retention(store: EventStore, sid: str | None) -> pl.DataFrame:
    """Retention as the CLI materialises it: no-op compactions and deleted sessions left out."""
    scope = _session_list(sid)
    return retention_detail(
        anchor_items_frame(store, scope),
        compactions_frame(store, scope),
        sessions_frame(store, scope),
    )


def _silent_drops(store: EventStore, sid: str | None) -> pl.DataFrame:
    """One session's silent drops as the retention job stores them: with the turn and tier of
    the compactions that introduced and dropped each item, and the reason."""
    scope = _session_list(sid)
    detail = _retention(store, sid)
    if detail.height == 0:
        return detail
    return silent_drops(
        detail,
        compactions_frame(store, scope),
        turns_frame(store, scope),
        model_calls=model_calls_frame(store, scope),
    )


def _memory(detail: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Survival by the number of compactions gone through, of all items and per anchor type
    (``retention --json``'s ``survival_by_compactions`` and ``..._by_type``)."""
    return {
        "all": survival_by_compactions(detail),
        "by_type": survival_by_compactions(detail, by_type=True),
    }


def _memory_fleet(store: EventStore) -> dict[str, pl.DataFrame]:
    """The fleet's curves, from the materialised retention detail of live sessions."""
    detail = job_table(store, "job_retention_detail")
    if detail.height:
        live = sessions_frame(store).filter(pl.col("deleted_at").is_null())
        detail = detail.filter(pl.col("session_id").is_in(live.get_column("session_id").to_list()))
    return _memory(detail)


def _cohort_of(store: EventStore, key: str | None) -> pl.DataFrame:
    """Each live session's value of cohort ``key`` (as ``stats --by`` groups them), in words
    (``cohort_value``: an import's window is "no window") in a column named ``key``: what
    the sessions page shows and filters on."""
    name = key or "window"
    rows = [
        {"session_id": sid, name: cohort_value(name, value[name])}
        for value, ids in cohorts(sessions_frame(store), [name])  # type: ignore[list-item]
        for sid in ids
    ]
    return pl.DataFrame(rows, schema={"session_id": pl.String, name: pl.String})


READS: dict[str, Read] = {
    "fleet": lambda s, _: fleet_stats(s),
    "fleet_by": lambda s, key: fleet_stats(s, by=[key] if key else []),  # type: ignore[list-item]
    "cohort_of": _cohort_of,
    "turn_costs": lambda s, sid: turn_cost_rows(s, sid or ""),
    "native_sessions": lambda s, _: native_sessions(s),
    "audit": lambda s, sid: audit_json(s, sid),
    "live": lambda s, _: live_sessions(s),
    "summaries": lambda s, _: session_summaries(s),
    "sessions": lambda s, sid: sessions_frame(s, _session_list(sid)),
    "compactions": lambda s, sid: compactions_frame(s, _session_list(sid)),
    "anchor_items": lambda s, sid: anchor_items_frame(s, _session_list(sid)),
    "views": lambda s, sid: views_frame(s, _session_list(sid)),
    "compaction_view": lambda s, key: compaction_view(s, *(key or "\n").split("\n", 1)),
    "messages": lambda s, sid: messages_frame(s, _session_list(sid)),
    "synthetic": lambda s, sid: synthetic_frame(s, _session_list(sid)),
    "offloads": lambda s, sid: offloads_frame(s, _session_list(sid)),
    "emergencies": lambda s, sid: emergency_list(s, sid),
    "metadata": lambda s, sid: session_metadata(s, sid or ""),
    "system_prompt": lambda s, sid: system_prompt(s, sid or ""),
    "sources": lambda s, _: session_sources(s),
    "timeline": _timeline,
    "markers": _markers,
    "quiet": lambda s, sid: quiet_frame(s, sid),
    "postmortems": lambda s, sid: postmortem_json(s, sid, counterfactuals=True),
    "retention": _retention,
    "silent_drops": _silent_drops,
    "coverage": lambda s, sid: anchor_coverage(s, sid),
    "estimate_moves": lambda s, sid: estimate_moves(s, sid or ""),
    "retention_fleet": lambda s, _: retention_status_rows(s),
    "silent_drops_fleet": lambda s, _: job_table(s, "job_silent_drops"),
    "memory": lambda s, sid: _memory(_retention(s, sid)),
    "memory_fleet": lambda s, _: _memory_fleet(s),
}


@st.cache_data(show_spinner=False, max_entries=256, ttl=900)
def _cached(home: str, version: int, name: str, session: str | None) -> Any:
    return owner().read(lambda store: READS[name](store, session))


def read(name: str, session: str | None = None) -> Any:
    """The named read (see ``READS``), of one session or of the fleet, cached per version. A
    store that fails under the read (a lake whose PostgreSQL went away) is the page's one
    error, not a traceback."""
    own = owner()
    try:
        return _cached(str(own.home), own.version, name, session)
    except StoreError as exc:
        stop_with(f"The store cannot be read now: {exc}")


def frame(name: str, session: str | None = None) -> pl.DataFrame:
    out = read(name, session)
    assert isinstance(out, pl.DataFrame), name
    return out


def home() -> Path:
    return owner().home


def known_session(sid: str) -> bool:
    """Whether session ``sid`` is in the store (a deleted one too); if not, the page's "not
    found" message and a link to the sessions page, so a stale or mistyped link never reaches
    a query that assumes the session exists."""
    if frame("sessions", sid).height:
        return True
    not_found("session", sid, "sessions")
    return False


def session_ids() -> list[str]:
    """Live session ids, newest first (the pickers' options)."""
    return [str(s) for s in frame("summaries").get_column("session_id").to_list()]
