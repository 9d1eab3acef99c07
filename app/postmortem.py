"""Post-mortems as the emergencies page shows them: cause first, then the fix, then the proof.

``show_group`` is a group of a session's emergencies (one cause): its heading (the cause, how
many, at which turns), its representative's sentence, the fix in words and the share settled.
For one emergency, ``show_cause`` is the heading (the cause in words) and the one sentence of
``explanation``; ``show_fix`` the fix in words (``fix_words``, as the CLI and the report say it)
and, for a fixed prompt, the window needed; ``show_counterfactuals`` the changes tried with
their ``detail`` and each result in words ("not reproduced" said as such, never a column of
"avoided"); ``show_config`` the smallest change's whole config as the TOML file
``replay --config`` loads, to download, and whether a replay of the whole session verified it.
It takes post-mortems and groups as ``postmortem_json`` returns them and reads nothing from the
store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import polars as pl
import streamlit as st

from analytics import config_toml, fix_words
from app.widgets import md_escape
from app.words import fix_text, plural

CAUSE_TITLES = {
    "fixed_prompt": "The fixed prompt alone fills the window",
    "history_missing": "History this transcript does not hold fills the window",
    "large_turn": "One turn's own words fill the window",
    "floor": "What no compaction takes out stays over the thresholds",
    "burst": "One turn's new messages pushed it over",
    "growth": "Steady growth that compaction did not hold down",
    "summarizer_failed": "The summariser failed",
    "undercount": "The estimate was too low",
    "manual": "A manual /compact",
}
RESULT_WORDS = {True: "avoids it", False: "does not avoid it", None: "not replayed"}
NOT_REPRODUCED = (
    "Not reproduced: replaying the session as it was did not reach Emergency at turn {turn}, so "
    "no change can be said to avoid it and none was replayed. The cause above still stands; the "
    "counterfactuals do not."
)


def cause_title(item: Mapping[str, Any]) -> str:
    cause = item.get("cause")
    return CAUSE_TITLES.get(str(cause), f"Cause: {cause or 'not known'}")


def show_cause(item: Mapping[str, Any]) -> None:
    """The heading (the cause, then the turn) and the sentence a person reads first."""
    st.subheader(f"{cause_title(item)} — emergency at turn {item['turn']}")
    st.markdown(md_escape(str(item.get("explanation") or "No explanation was recorded.")))


def group_title(group: Mapping[str, Any]) -> str:
    """A group of a session's emergencies (``postmortem_json``'s ``groups``) as its heading:
    the cause in words, how many, at which turns."""
    n = int(group["count"])
    return f"{cause_title(group)} — {n:,} emergenc{'y' if n == 1 else 'ies'}, {group['turns_text']}"


def show_group(group: Mapping[str, Any]) -> None:
    """A group's heading, its representative's sentence, the fix in words (the window needed
    when no config avoids it) and how many of its emergencies are settled."""
    st.subheader(group_title(group))
    turn = group["representative"]["turn"]
    said = md_escape(str(group.get("explanation") or "No explanation was recorded."))
    st.markdown(f"**Turn {turn}**, the one shown below: {said}")
    fix = group["fix"]
    st.markdown(f"**Fix:** {md_escape(fix_text(str(fix['words'])))}")
    needed = group.get("window_needed")
    cols = st.columns(4)
    cols[0].metric(
        "settled",
        f"{group['settled']:,} of {group['count']:,}",
        help="Emergencies with a fix verified on the whole session, or whose cause no config "
        "can avoid at this window (with the window that would).",
    )
    dropped = group.get("dropped") or {}
    cols[1].metric("messages dropped", f"{dropped.get('messages') or 0:,}")
    cols[2].metric("tokens dropped", f"{dropped.get('tokens') or 0:,}")
    if needed and not fix.get("verified"):
        cols[3].metric(
            "window needed",
            f"{needed:,} tokens",
            help="The smallest window that avoids every emergency of this group (the largest "
            "any of them needs).",
        )


def show_fix(item: Mapping[str, Any]) -> None:
    """The fix in words; the window needed when no config can avoid a fixed prompt."""
    st.markdown(f"**Fix:** {md_escape(fix_text(fix_words(item)))}")
    needed = item.get("window_needed")
    if item.get("cause") == "fixed_prompt" and needed:
        st.metric(
            "window needed",
            f"{needed:,} tokens",
            help="The smallest window at which the prompt every turn carries stays under Warn.",
        )


def counterfactual_rows(item: Mapping[str, Any]) -> pl.DataFrame:
    """The changes tried, each with what it changes and its result in words."""
    rows = [
        {
            "change": str(c.get("change")),
            "what it changes": str(c.get("detail") or ""),
            "kind": str(c.get("kind") or "single"),
            "result": RESULT_WORDS.get(c.get("emergency_avoided"), "not replayed"),
            "tokens billed": c.get("tokens_billed"),
        }
        for c in item.get("counterfactuals") or []
    ]
    schema = {
        "change": pl.String,
        "what it changes": pl.String,
        "kind": pl.String,
        "result": pl.String,
        "tokens billed": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema)


def show_counterfactuals(item: Mapping[str, Any]) -> None:
    """The computed counterfactuals: not reproduced in words, or the table and the smallest
    change; ``unavailable`` says why. (Not computed yet is the page's: it offers a button.)"""
    status = str(item.get("counterfactual_status") or "")
    if status.startswith("unavailable"):
        st.warning(f"Counterfactuals {md_escape(status)}")
        return
    rows = counterfactual_rows(item)
    # an unavoidable cause: the search replays the baseline and tries no config change
    baseline_only = item.get("search") == "baseline" or item.get("cause") == "fixed_prompt"
    if item.get("reproduced") is False:
        st.warning(NOT_REPRODUCED.format(turn=item["turn"]))
    elif baseline_only and rows.height == 0:
        st.caption(
            "Only the baseline was replayed: it reproduces the emergency, and no change of "
            "config takes out what caused it (the window needed above would)."
        )
    else:
        smallest = item.get("smallest_change_detail") or item.get("smallest_change")
        found = smallest or f"none of the {plural(rows.height, 'change')} tried"
        st.markdown(f"Smallest change that avoids it: **{md_escape(str(found))}**")
    if rows.height:
        st.table(rows)
    show_config(item)


def config_file_name(item: Mapping[str, Any]) -> str:
    """A file name for the smallest change's config: session start, turn and change."""
    raw = f"{str(item['session_id'])[:24]}-turn{item['turn']}-{item.get('smallest_change')}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw).strip("_") + ".toml"


def show_config(item: Mapping[str, Any]) -> None:
    """The smallest change's whole config as TOML to download, and whether it was verified."""
    config = item.get("smallest_change_config")
    if not config or item.get("reproduced") is False:
        return
    try:
        text = config_toml(config)
    except ValueError as exc:
        st.error(md_escape(str(exc)))
        return
    if item.get("smallest_change_verified"):
        st.success(
            f"Verified: replaying the whole session with this config has no emergency at turn "
            f"{item['turn']}."
        )
    else:
        st.warning(
            "Not verified: this change avoids the emergency in the replay up to its turn, but a "
            "replay of the whole session with it did not confirm it."
        )
    st.download_button(
        "download this config (TOML, for compactlens replay --config)",
        text,
        config_file_name(item),
        "application/toml",
        key=f"toml_{item['compaction_id']}",
    )
    with st.expander("the config file"):
        st.code(text, language="toml")
