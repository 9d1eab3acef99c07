"""Live sessions (``/live``): the Claude Code and Codex sessions ``compactlens watch`` follows.

The most recently imported first, as the watcher prints them: the context the provider last
reported against the window (where the transcript records it), how far the next automatic
compaction is (the size at which the last one fired stands in for the threshold the harness does
not record), and each compaction the harness made: tokens before → after, what it lost (the
audit) and whether it made the context bigger, with a link to its diff. The app reruns a page
whenever the projector stores new events, so this one follows the watcher as it imports. Text
from transcripts (ids, paths) is shown in tables, never as markdown. It computes nothing:
``live_sessions``' figures.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from analytics import LiveSession
from app.context import read
from app.widgets import link
from app.words import plural

HOW_TO_WATCH = (
    "No Claude Code or Codex session in this store yet. Run `compactlens watch --home HOME` "
    "(it follows ~/.claude/projects and ~/.codex/sessions) beside this app, or import a "
    "transcript: `compactlens import ~/.claude/projects/PROJECT/SESSION.jsonl`."
)


def _context(live: LiveSession) -> tuple[str, str]:
    """(the context now, its share of the window) in words."""
    figures = live.figures
    if figures is None:
        return "its transcript is gone or has no usage yet", ""
    tokens, how = figures.context_now
    if tokens is None:
        return "not known yet", ""
    share = f"{tokens / figures.window:.0%} of {figures.window:,}" if figures.window else ""
    return f"{tokens:,} ({how})", share or "window not recorded"


def _grew(entry: dict[str, Any]) -> str:
    if entry.get("grew") is None:
        return "not known"
    return f"yes, +{entry.get('growth_tokens') or 0:,}" if entry["grew"] else "no"


def _row(live: LiveSession) -> dict[str, Any]:
    context, share = _context(live)
    figures = live.figures
    return {
        "session": live.identity,
        "harness": live.agent,
        "messages": figures.messages if figures else None,
        "context now (tokens)": context,
        "of the window": share,
        "next automatic compaction": (figures.next_compaction if figures else None) or "–",
        "compactions": len(live.compactions),
        "made it bigger": sum(bool(e.get("grew")) for e in live.compactions),
        "last import": live.imported_at,
    }


def _compactions(live: LiveSession) -> None:
    st.subheader(f"{live.agent}: {plural(len(live.compactions), 'compaction')}")
    st.dataframe(
        pl.DataFrame(
            [
                {
                    "#": number,
                    "trigger": entry["trigger"],
                    "tokens before": entry["tokens_before"],
                    "tokens after": entry["tokens_after"],
                    "after counted by": entry["tokens_after_source"],
                    "artifacts lost": len(entry["artifacts"]["lost"]),
                    "user messages lost": entry["user_messages"]["lost"],
                    "made it bigger": _grew(entry),
                }
                for number, entry in enumerate(live.compactions, start=1)
            ]
        ),
        hide_index=True,
    )
    st.dataframe(
        pl.DataFrame({"session": [live.identity], "file": [live.source_file]}), hide_index=True
    )
    link("harness", "what each one lost, in full", session=live.session_id)
    last = live.compactions[-1]
    link(
        "diff",
        "the latest one's diff",
        session=live.session_id,
        compaction=str(last["compaction_id"]),
    )


def render() -> None:
    st.title("Live sessions")
    sessions: list[LiveSession] = read("live")
    if not sessions:
        st.info(HOW_TO_WATCH)
        return
    st.caption(
        f"The {plural(len(sessions), 'session')} of Claude Code and Codex transcripts imported "
        "last, newest first; the page follows `compactlens watch` as it imports."
    )
    st.dataframe(pl.DataFrame([_row(s) for s in sessions]), hide_index=True)
    for live in sessions:
        if live.compactions:
            _compactions(live)


render()
