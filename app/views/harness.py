"""Harness compactions (``/harness?session=ID``): the compactions Claude Code, Codex and
OpenHands made themselves, as ``compactlens audit --json`` reports them.

Per native compaction: what the summary lost (artifacts of the replaced history, the user's
messages not kept verbatim), the files re-read and commands re-run after it, and a link to its
diff; above them, the re-read rate per origin (the harness's compactions beside ours). Paths
and commands come from transcripts, so they are shown in tables (inert), never as markdown.
It shows ``audit_json``'s figures as they are; it computes none.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from app.context import frame, known_session, read
from app.widgets import link, pick
from app.words import plural

HOW_TO_IMPORT = (
    "No compaction made by a harness itself in this store yet. Import a transcript that holds "
    "some: Claude Code `compactlens import ~/.claude/projects/PROJECT/SESSION.jsonl`, Codex "
    "`compactlens import ~/.codex/sessions` (rollout JSONL), OpenHands `compactlens import "
    "TRAJECTORY.json` (V0 event list) or `compactlens import CONVERSATION_DIR` (SDK "
    "conversation folder with base_state.json and events/); the format is detected."
)

SOURCES = {
    "harness": "the harness's own count",
    "estimated": "estimated (the harness recorded none)",
}
AFTER_SOURCES = SOURCES | {
    "harness": "the harness's own count of the conversation (its system prompt and tools not in it)"
}


def label(number: int, entry: dict[str, Any]) -> str:
    """A native compaction as the page names it: its number, harness, trigger and tokens."""
    after = entry["tokens_after"]
    tokens = f"{entry['tokens_before'] or 0:,} → {'?' if after is None else f'{after:,}'} tokens"
    trigger = entry["trigger"] or "trigger unknown"
    return f"#{number} · {entry['harness'] or 'harness'} · {trigger} · {tokens}"


def _rates(summary: dict[str, Any]) -> None:
    st.subheader("Re-read rate per origin")
    rows = [
        {
            "origin": origin,
            "compactions": r["compactions"],
            "files read before": r["files_read_before"],
            "re-read after": r["re_reads"],
            "re-read rate": "–" if r["re_read_rate"] is None else f"{r['re_read_rate']:.0%}",
        }
        for origin, r in summary.items()
    ]
    st.table(pl.DataFrame(rows))
    st.caption(
        "re-read rate: files read again after a compaction, per file read before it (native: "
        "the harness's own; compactlens: ours, after a replay). A high rate is lost context."
    )


def _listed(title: str, values: list[str]) -> None:
    if values:
        st.dataframe(pl.DataFrame({title: values}), hide_index=True)


def _entry(sid: str, number: int, entry: dict[str, Any]) -> None:
    st.subheader(label(number, entry))
    artifacts, users = entry["artifacts"], entry["user_messages"]
    cols = st.columns(4)
    cols[0].metric("artifacts lost", f"{len(artifacts['lost']):,}")
    cols[1].metric("user messages lost", f"{users['lost']:,}")
    cols[2].metric("files re-read after", f"{len(entry['re_reads']):,}")
    cols[3].metric("commands re-run after", f"{len(entry['re_runs']):,}")
    encrypted = " · the summary is encrypted by the harness" if entry["summary_encrypted"] else ""
    st.caption(
        f"artifacts kept {len(artifacts['kept']):,} of "
        f"{len(artifacts['kept']) + len(artifacts['lost']):,} · user messages kept verbatim "
        f"{users['kept']:,} of {users['kept'] + users['lost']:,} · tokens before: "
        f"{SOURCES.get(str(entry['tokens_before_source']), SOURCES['harness'])} · tokens after: "
        f"{AFTER_SOURCES.get(str(entry['tokens_after_source']), SOURCES['estimated'])}{encrypted}"
    )
    _listed("lost artifact", artifacts["lost"])
    _listed("file re-read after", entry["re_reads"])
    _listed("command re-run after", entry["re_runs"])
    link("diff", f"#{number}: open its diff", session=sid, compaction=str(entry["compaction_id"]))


def render() -> None:
    st.title("Harness compactions")
    native = frame("native_sessions")
    labels = {
        str(
            r["session_id"]
        ): f"{r['session_id']} · {r['harness']} · {plural(r['compactions'], 'compaction')}"
        for r in native.iter_rows(named=True)
    }
    sid = pick("session", list(labels), "session", empty=HOW_TO_IMPORT, labels=labels)
    if sid is None or not known_session(sid):
        return
    st.text(sid)
    audit: dict[str, Any] = read("audit", sid)
    if not audit["compactions"]:
        st.info(f"This session has no compaction its harness made itself. {HOW_TO_IMPORT}")
        return
    _rates(audit["summary"])
    st.caption(f"On the same histories: {audit['same_histories']['note']}.")
    if audit["same_histories"]["rates"]:
        _rates(audit["same_histories"]["rates"])
    for number, entry in enumerate(audit["compactions"], start=1):
        _entry(sid, number, entry)


render()
