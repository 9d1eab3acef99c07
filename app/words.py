"""The sentences pages say about figures analytics returns: why a retention chart is empty, and
why the timeline's line jumps at a turn; and text from transcripts made inert in a table.

``empty_reason`` reads an ``anchor_coverage`` dict, ``move_sentence`` an ``estimate_moves`` row;
both only put them into words (no store, no Streamlit), so each wording is tested on its own.
``table_text`` escapes the columns of a frame that hold text from transcripts, for ``st.table``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from analytics import fix_words
from app.widgets import md_escape

REPLAY = "Replay a transcript at a smaller window: compactlens replay PATH --window 8000"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` in agreement: "1 session", "2 sessions", "1 emergency",
    "3 emergencies" (``many``: the plural when it is not ``word`` + s)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


CLI_NOT_COMPUTED = fix_words({"counterfactual_status": "not computed"})
"""What the command line says of counterfactuals not computed: it names its own flag."""
APP_NOT_COMPUTED = "not computed yet (the “compute counterfactuals” button on this page runs them)"


COHORT_WORDS = {
    "agent": "agent (the harness or agent that ran it)",
    "harness": "harness (Claude Code, Codex, OpenHands: their own compaction)",
    "model": "model",
    "window": "window (the context window it ran at)",
    "config": "config (the compactor's settings, by hash)",
    "source": "source (replayed here, imported as it ran, or live from an agent)",
}
"""What each cohort key (``stats --by``) groups sessions by, as a picker offers it."""
SOURCE_WORDS = {
    "replay": "replayed by compactlens",
    "import": "imported (the harness's own run)",
    "live": "live (recorded by an agent)",
}


def cohort_value(name: str, value: Any) -> str:
    """One cohort's value of key ``name`` in words: an import's window (none, stored as 0) is
    "no window", a window is a number of tokens, a source says what it is."""
    if name == "window":
        return "no window (imported as it ran)" if not value else f"window {int(value):,}"
    if value is None or value == "":
        return f"{name} unknown"
    if name == "source":
        return SOURCE_WORDS.get(str(value), f"source {value}")
    return f"{name} {value}"


def cohort_label(key: Mapping[str, Any]) -> str:
    """A cohort (``stats --by``'s group ``key``: name → value) in words."""
    return ", ".join(cohort_value(name, value) for name, value in key.items()) or "all sessions"


def ledger_note(row: Mapping[str, Any]) -> str:
    """What a compaction's ledger adds to its name in a list ("" when there is nothing to
    add): whether it grew the context, whether it paid for itself."""
    parts = []
    if row.get("grew"):
        parts.append(f"grew the context by {int(row.get('growth_tokens') or 0):,} tokens")
    if row.get("paid") is True:
        parts.append(f"paid for itself at turn {row.get('break_even_turn')}")
    elif row.get("paid") is False:
        parts.append("did not pay for itself")
    return "".join(f" · {p}" for p in parts)


def ledger_summary(markers: pl.DataFrame) -> str:
    """One line over a session's compactions (``markers`` with ledger columns): how many
    paid for themselves of those priced, how many grew the context."""
    if markers.height == 0 or "paid" not in markers.columns:
        return ""
    priced = int(markers.get_column("paid").is_not_null().sum())
    paid = int(markers.get_column("paid").fill_null(value=False).sum())
    grew = int(markers.get_column("grew").fill_null(value=False).sum())
    said = (
        f"{paid:,} of {plural(priced, 'priced compaction')} paid for themselves"
        if priced
        else "No compaction's turns are priced yet, so none has a ledger"
    )
    ringed = f"{plural(grew, 'compaction')} grew the context (ringed)" if grew else "none grew"
    return (
        f"{said}; {ringed}. Point at a marker for its ledger: the cached prefix it "
        "invalidated, what the rewrite cost, what the turns after it saved, and the turn it "
        "paid for itself at."
    )


def fix_text(words: str) -> str:
    """A fix in words (``fix_words``, a group's ``fix.words``) as the app says it: where the
    command line names the flag that computes the counterfactuals, the page names its own
    button."""
    return APP_NOT_COMPUTED if words == CLI_NOT_COMPUTED else words


def empty_reason(cover: Mapping[str, Any], scope: str) -> str:
    """Why ``scope`` (this session, the fleet) has no survival to draw, from its
    ``anchor_coverage``: the first of the reasons that applies."""
    summarising = int(cover["soft"]) + int(cover["full"])
    if not cover["compactions"]:
        return (
            f"No compaction in {scope} yet: the context never reached Warn, and anchors come "
            f"from Soft and Full compactions. {REPLAY}"
        )
    if cover["sessions"] and cover["metadata_sessions"] == cover["sessions"]:
        return (
            f'{scope.capitalize()} was captured as metadata (capture="metadata"): no summary '
            'text is stored, so there are no anchors to follow. Record with capture="full" '
            "to see retention."
        )
    if summarising == 0:
        return (
            f"{scope.capitalize()} has {plural(int(cover['compactions']), 'compaction')}, none "
            f"Soft or Full (Warn offloads {cover['warn']:,}, Emergency truncations "
            f"{cover['emergency']:,}): only Soft and Full compactions write a summary with "
            f"anchors. {REPLAY}"
        )
    if cover["fell_back"] >= summarising:
        return (
            f"Every one of the {plural(summarising, 'Soft/Full compaction')} in {scope} fell "
            "back to trimming without a summary (most often: "
            f"“{cover['fell_back_error'] or 'no error recorded'}”), so none carries anchors. "
            "An LLM summariser, or a larger window, leaves room for a summary."
        )
    if not cover["with_items"]:
        return (
            f"The {plural(summarising, 'summary', 'summaries')} in {scope} carry no anchor "
            "items: every anchor was N/A."
        )
    return (
        f"Only {plural(int(cover['with_items']), 'compaction')} in {scope} carries anchor "
        "items: survival follows items from one compaction to the next, so it needs two."
    )


def move_sentence(row: Mapping[str, Any]) -> str:
    """Why the line moves at ``row['turn']`` (an ``estimate_moves`` row), in words."""
    reported, estimated = int(row["input_tokens"]), int(row["estimated_tokens"])
    after = f"turn {row['reported_turn']}" if row["reported_turn"] is not None else "a turn"
    head = (
        f"Turn {row['turn']}: for {after} the provider counted {reported:,} input tokens where "
        f"the estimate was {estimated:,}"
    )
    if reported > estimated and row["raw_estimated_tokens"] == row["estimated_tokens"]:
        return (
            f"{head} (bytes/4 of the messages the compactor sees). The difference, "
            f"{reported - estimated:,} tokens, is what the harness adds unseen: its system "
            "prompt and tool schemas. The calibrated estimator learned it and counts it in "
            "every turn from here, so the line jumps."
        )
    way = "raised" if reported > estimated else "lowered"
    return f"{head}; the calibrated estimator {way} its estimate from this turn, so the line moves."


def missing_history_sentence(tokens: int | None) -> str | None:
    """What a page says of a session whose transcript starts mid-session (None otherwise)."""
    if not tokens:
        return None
    return (
        f"This transcript starts mid-session: about {tokens:,} tokens of earlier history are "
        "not in this file. Every prompt the provider counted held them until the harness "
        "compacted them away; no replay of the file's messages can compact them, and they are "
        "not the harness's overhead."
    )


def table_text(frame: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """``frame`` with the text of ``columns`` escaped (``md_escape``) for ``st.table``, which
    renders every cell as markdown: an anchor item, a tool name or a session id is shown as
    written, and a ``![](http://…)`` in it loads no image. Columns of our own words are left
    as they are."""
    return frame.with_columns(
        pl.col(c).map_elements(md_escape, return_dtype=pl.String) for c in columns
    )
