"""Overview (``/[?by=KEY&cohort=NAME]``): headline figures from ``fleet_stats`` and three charts,
of the whole fleet or of one cohort.

Sessions, turns, compactions per tier, emergencies split into truncations and offload-only,
tokens billed against the uncompacted history, the cost block (total and uncompacted in the
profile's currency, the share saved, each tier's saving, cut and net effect, each price
profile), compression by tier and anchor survival. The sessions are split as ``stats --by``
splits them (by agent unless the URL says otherwise); choosing a cohort draws every figure and
chart from that cohort's ``stats`` object, and a table sets all cohorts' headline figures side
by side, numbers formatted. Both choices are in the URL, so the view can be shared. What
truncations cut is shown as cut, on its own line, never as saved; an uncompacted history that
would not have fit the window is "not possible", not a price to compare with; sessions whose
compaction cost more than not compacting get a warning with links to their timelines. It shows
``analytics``' figures as they are; it computes none.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from analytics import (
    COHORT_KEYS,
    compression_figure,
    compression_rows,
    survival_figure,
    survival_rows,
    tier_counts_figure,
)
from app.context import read
from app.widgets import EMPTY_STORE, link, md_escape, url_choice
from app.words import COHORT_WORDS, cohort_label, plural, table_text


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _metrics(stats: dict[str, Any]) -> None:
    emergency = stats.get("emergency", {})
    tokens = stats.get("tokens", {})
    cols = st.columns(6)
    cols[0].metric("sessions", f"{stats['sessions']:,}")
    cols[1].metric("turns", f"{stats['turns']:,}")
    cols[2].metric("compactions", f"{stats['compactions']['total']:,}")
    cols[3].metric(
        "emergencies",
        f"{emergency.get('emergencies', stats['compactions']['by_tier'].get('EMERGENCY', 0)):,}",
        help=f"truncations {emergency.get('truncations', 0):,}, "
        f"offload-only {emergency.get('offload_only', 0):,}",
    )
    cols[4].metric(
        "tokens saved",
        _share(tokens.get("saved_share")),
        help=f"what truncations cut is not counted: {tokens.get('cut', 0):,} tokens",
    )
    cols[5].metric("silent anchor drops", f"{stats.get('silent_drops', 0):,}")
    if emergency.get("truncations") or emergency.get("cut_tokens"):
        st.markdown(
            f"**cut by emergency truncation: {emergency.get('cut_tokens', 0):,} tokens, "
            f"{emergency.get('cut_turns', 0):,} turns affected** "
            f"({emergency.get('messages_dropped', 0):,} messages dropped; context lost, "
            "not counted as saved)"
        )
    if not tokens.get("uncompacted_feasible", True):
        st.warning(f"{_not_possible(tokens, stats['turns'])}: compaction was needed there.")
    st.caption(
        f"tokens billed {tokens.get('billed', 0):,} of {tokens.get('uncompacted', 0):,} "
        f"uncompacted · cut by truncation {tokens.get('cut', 0):,} · quarantined spool lines "
        f"{stats.get('quarantined', 0):,} · "
        f"median compression ratio {stats.get('median_compression_ratio') or 0:.2f}"
    )
    _ledger(stats.get("ledger") or {})


def _ledger(ledger: dict[str, Any]) -> None:
    """``stats --json``'s ``ledger``: the share of priced compactions that paid for
    themselves, and how many grew the context or were back above their tier at once."""
    priced = int(ledger.get("priced") or 0)
    if not ledger.get("compactions"):
        return
    paid = (
        f"{_share(ledger.get('paid_share'))} of {plural(priced, 'priced compaction')} paid "
        "for themselves (their cache write and summary repaid by cheaper turns after)"
        if priced
        else "no compaction's turns are priced yet"
    )
    st.caption(
        f"Ledger: {paid} · {plural(int(ledger.get('grew') or 0), 'compaction')} grew the "
        f"context · {int(ledger.get('rebounded') or 0):,} back above their tier within a few "
        "turns. Each compaction's ledger is on its timeline."
    )


def _not_possible(block: dict[str, Any], turns: int) -> str:
    n, of = block.get("infeasible_turns", 0), block.get("priced_turns", turns)
    return f"without compaction: not possible — {n:,} of {of:,} turns would not fit the window"


def _money(value: float | None, currency: str) -> str:
    return "–" if value is None else f"{value:,.4f} {currency}"


def _cost(stats: dict[str, Any]) -> None:
    """The ``cost`` block of ``stats --json``: totals, per tier, per profile."""
    cost = stats.get("cost") or {}
    if not cost.get("sessions"):
        st.info(
            "No turn is priced yet: costs come from replayed turns (compactlens replay PATH "
            "--window 32000) once the costs job has run (compactlens stats)."
        )
        return
    currency = str(cost["currency"])  # a price file's: text from the user, not ours
    st.subheader(f"Cost ({md_escape(currency)}, predicted from the prompt cache)")
    _net_negative(cost)
    feasible = cost.get("uncompacted_feasible", True)
    cols = st.columns(5)
    cols[0].metric("cost", _money(cost["total"], currency))
    cols[1].metric(
        "cost uncompacted",
        _money(cost["uncompacted"], currency) if feasible else "not possible",
        help=None
        if feasible
        else f"{_not_possible(cost, 0)}; priced as if it did: "
        f"{_money(cost['uncompacted'], currency)}",
    )
    cols[2].metric(
        "cost saved",
        _share(cost["saved_share"]),
        help=f"{_money(cost.get('saved'), currency)}; truncation cuts not counted",
    )
    cols[3].metric("cut by truncation", _money(cost.get("cut", 0.0), currency))
    cols[4].metric("summariser calls", _money(cost["summarizer"], currency))
    fits = cost.get("feasible") or {}
    if not feasible and fits.get("sessions"):
        saved = float(fits["saved"])
        share = abs(fits["saved_share"]) if fits["saved_share"] is not None else None
        effect = "saved" if saved >= 0 else "cost more by"
        st.caption(
            "Where the uncompacted history would have fit "
            f"({plural(fits['sessions'], 'session')}), "
            f"compaction {effect} {_share(share)} ({_money(abs(saved), md_escape(currency))})."
        )
    tiers = [
        {"tier": tier, **{k: f"{v:,.4f}" for k, v in figures.items()}}
        for tier, figures in cost.get("by_tier", {}).items()
    ]
    st.caption(
        f"Each tier ({md_escape(currency)}): saved on the turns whose view its compactions "
        "made, less what truncations cut from them (cut, never saved), less its summariser "
        "calls (net)"
    )
    st.table(pl.DataFrame(tiers).rename({"net": f"net ({md_escape(currency)})"}))
    profiles = [
        {
            "profile": name,
            "currency": p["currency"],
            "sessions": p["sessions"],
            "cost": f"{p['total']:,.4f}",
            "uncompacted": f"{p['uncompacted']:,.4f}"
            if p.get("uncompacted_feasible", True)
            else f"not possible ({p['infeasible_turns']:,} of {p['priced_turns']:,} turns)",
            "saved": _share(p["saved_share"]),
        }
        for name, p in cost.get("by_profile", {}).items()
    ]
    st.caption("Per price profile, each in its own currency")
    st.table(table_text(pl.DataFrame(profiles), "profile", "currency"))


def _net_negative(cost: dict[str, Any], shown: int = 5) -> None:
    """A warning naming the sessions whose compaction cost more than not compacting."""
    losing = cost.get("net_negative_sessions") or []
    if not losing:
        return
    st.warning(
        f"Compaction cost more than not compacting in {len(losing):,} "
        f"session{'s' if len(losing) != 1 else ''} that would have fit the window uncompacted "
        "(summariser calls and cache writes included). The worst:"
    )
    for entry in losing[:shown]:
        link(
            "timeline",
            f"{entry['session_id']}: +{entry['extra']:,.4f} {entry['currency']}",
            session=str(entry["session_id"]),
        )


def _headline(key: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """One cohort's headline figures, as the overview shows them for the whole store: counts
    with thousands separators, shares as percentages, money in its currency."""
    cost, tokens = stats.get("cost") or {}, stats.get("tokens") or {}
    currency = str(cost.get("currency", ""))
    return {
        "cohort": cohort_label(key),
        "sessions": f"{stats['sessions']:,}",
        "turns": f"{stats['turns']:,}",
        "compactions": f"{stats['compactions']['total']:,}",
        "emergencies": f"{stats['compactions']['by_tier'].get('EMERGENCY', 0):,}",
        "tokens billed": f"{tokens.get('billed', 0):,}",
        "tokens saved": _share(tokens.get("saved_share")),
        "cost": _money(cost.get("total"), currency),
        "cost uncompacted": _money(cost.get("uncompacted"), currency)
        if cost.get("uncompacted_feasible", True)
        else "not possible",
        "cost saved": _share(cost.get("saved_share")),
        "compaction cost more": f"{len(cost.get('net_negative_sessions') or []):,}",
    }


DEFAULT_SPLIT = "agent"
"""The split people see first: by the agent that ran each session (``source`` is how a
session reached the store, which is not what "which agent" asks)."""
WHOLE_FLEET = "whole fleet"


def _scope(fleet: dict[str, Any]) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    """The figures the page shows (the whole fleet's, or one cohort's), their name, and every
    cohort of the split. The split (``by``) and the cohort are the URL's, so a view of one
    cohort can be shared."""
    keys = [str(k) for k in COHORT_KEYS]
    by = url_choice("by", keys, "split the sessions by", default=DEFAULT_SPLIT, words=COHORT_WORDS)
    groups: list[dict[str, Any]] = read("fleet_by", by).get("groups", [])
    labels = {cohort_label(g["key"]): g for g in groups}
    chosen = url_choice("cohort", [WHOLE_FLEET, *labels], "show", default=WHOLE_FLEET)
    if chosen == WHOLE_FLEET:
        return fleet, WHOLE_FLEET, groups
    return labels[chosen]["stats"], chosen, groups


def _cohorts(groups: list[dict[str, Any]]) -> None:
    """Every cohort of the split, its headline figures side by side."""
    st.subheader("Cohorts side by side")
    if not groups:
        return
    st.caption(
        f"{plural(len(groups), 'cohort')}, as `compactlens stats --by` groups them; choose one "
        "above to see its own figures and charts."
    )
    rows = [_headline(g["key"], g["stats"]) for g in groups]
    st.table(table_text(pl.DataFrame(rows), "cohort"))


def _charts(stats: dict[str, Any], name: str) -> None:
    """The chosen scope's compactions per tier, compression ratios and anchor survival."""
    left, right = st.columns(2)
    left.plotly_chart(tier_counts_figure(stats["compactions"]["by_tier"]), key="tiers", theme=None)
    ratios = compression_rows(stats.get("compression") or {})
    right.plotly_chart(compression_figure(ratios), key="ratios", theme=None)
    survival = survival_rows(stats.get("anchor_retention") or {})
    st.plotly_chart(
        survival_figure(survival, f"Anchor survival, {name}"), key="survival", theme=None
    )


def render() -> None:
    st.title("compactlens")
    fleet: dict[str, Any] = read("fleet")
    if not fleet["sessions"]:
        st.info(EMPTY_STORE)
        return
    stats, name, groups = _scope(fleet)
    if name != WHOLE_FLEET:
        st.caption(
            f"{md_escape(name)}: {plural(stats['sessions'], 'session')} of "
            f"{fleet['sessions']:,}; every figure and chart below is this cohort's."
        )
    _metrics(stats)
    _cost(stats)
    _charts(stats, name)
    _cohorts(groups)
    st.subheader("Where to go next")
    link("sessions", "Browse sessions")
    link("emergencies", "Emergency post-mortems")
    link("retention", "Anchor retention and silent drops")


render()
