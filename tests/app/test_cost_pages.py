"""Cost and cohorts on the overview, sessions and timeline pages (issue 18 items 4, 5).

The store is the package's (``conftest.fixture_home``: real mini-swe-agent and Claude Code
transcripts replayed at 16k, priced by their models' profiles, and two live sessions at 8k).
Each figure a page shows is compared with ``stats --json`` (``fleet_stats``, with ``--by
window``) or with the costs job's table and ``usage`` read with SQL when the store was built.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from tests.app.fixtures import FixtureHome
from tests.app.pages import open_page, session_with, shown


def _money(value: float, currency: str) -> str:
    return f"{value:,.4f} {currency}"


def test_the_overview_shows_the_cost_block_of_stats_json(fixture_home: FixtureHome) -> None:
    cost = fixture_home.stats["cost"]
    assert cost["total"] > 0 and cost["currency"] == "USD"
    # the replays at 16k outgrow their window: no uncompacted alternative to price
    assert cost["uncompacted_feasible"] is False and cost["infeasible_turns"] > 0

    at = open_page("overview")

    metrics = {m.label: m.value for m in at.metric}
    assert metrics["cost"] == _money(cost["total"], "USD")
    assert metrics["cost uncompacted"] == "not possible"
    assert metrics["cost saved"] == f"{cost['saved_share']:.0%}"
    assert metrics["cut by truncation"] == _money(cost["cut"], "USD")
    (helped,) = [m for m in at.metric if m.label == "cost uncompacted"]
    assert (
        f"without compaction: not possible — {cost['infeasible_turns']:,} of "
        f"{cost['priced_turns']:,} turns would not fit the window"
    ) in helped.proto.help
    tables = [t.value for t in at.table]
    (tiers,) = [t for t in tables if "tier" in t.columns]
    assert list(tiers.columns) == ["tier", "saved", "cut", "summarizer", "net (USD)"]
    rows = {r["tier"]: r for r in tiers.to_dict("records")}
    assert rows == {
        t: {
            "tier": t,
            "saved": f"{f['saved']:,.4f}",
            "cut": f"{f['cut']:,.4f}",
            "summarizer": f"{f['summarizer']:,.4f}",
            "net (USD)": f"{f['net']:,.4f}",
        }
        for t, f in cost["by_tier"].items()
    }
    (profiles,) = [t for t in tables if "profile" in t.columns]
    # every profile's sessions outgrow their window somewhere: each row says "not possible"
    assert not any(p["uncompacted_feasible"] for p in cost["by_profile"].values())
    assert profiles.to_dict("records") == [
        {
            "profile": name,
            "currency": p["currency"],
            "sessions": p["sessions"],
            "cost": f"{p['total']:,.4f}",
            "uncompacted": f"{p['uncompacted']:,.4f}"
            if p["uncompacted_feasible"]
            else f"not possible ({p['infeasible_turns']:,} of {p['priced_turns']:,} turns)",
            "saved": f"{p['saved_share']:.0%}",
        }
        for name, p in cost["by_profile"].items()
    ]


def test_the_overview_gives_emergency_truncation_its_own_line_never_as_saved(
    fixture_home: FixtureHome,
) -> None:
    stats = fixture_home.stats
    emergency, tokens = stats["emergency"], stats["tokens"]
    assert emergency["truncations"] > 0 and emergency["cut_tokens"] > 0

    at = open_page("overview")

    text = shown(at)
    assert (
        f"cut by emergency truncation: {emergency['cut_tokens']:,} tokens, "
        f"{emergency['cut_turns']:,} turns affected"
    ) in text
    assert f"{emergency['messages_dropped']:,} messages dropped" in text
    assert (
        f"without compaction: not possible — {tokens['infeasible_turns']:,} of "
        f"{stats['turns']:,} turns would not fit the window"
    ) in text
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["tokens saved"] == f"{tokens['saved_share']:.0%}"
    # the share saved leaves the cut out: it is below what billed/uncompacted alone would say
    assert tokens["saved_share"] < 1 - tokens["billed"] / tokens["uncompacted"]


def test_the_overview_sets_cohorts_side_by_side_as_stats_by_window(
    fixture_home: FixtureHome,
) -> None:
    groups = fixture_home.by_window["groups"]
    assert Counter(fixture_home.windows.values()) == {
        g["key"]["window"]: g["stats"]["sessions"] for g in groups
    }
    at = open_page("overview")

    at.selectbox(key="by").select("window").run()

    assert not at.exception
    (table,) = [t.value for t in at.table if "cohort" in t.value.columns]
    rows = table.to_dict("records")
    assert [r["cohort"] for r in rows] == [f"window {g['key']['window']:,}" for g in groups]
    for row, group in zip(rows, groups, strict=True):  # the numbers formatted
        stats: dict[str, Any] = group["stats"]
        assert row["sessions"] == f"{stats['sessions']:,}"
        assert row["turns"] == f"{stats['turns']:,}"
        assert row["compactions"] == f"{stats['compactions']['total']:,}"
        assert row["tokens billed"] == f"{stats['tokens']['billed']:,}"
        assert row["cost"] == _money(stats["cost"]["total"], stats["cost"]["currency"])


def test_the_sessions_page_filters_on_a_cohort_and_shows_it_as_a_column(
    fixture_home: FixtureHome,
) -> None:
    at = open_page("sessions")
    at.selectbox(key="by").select("window").run()
    at.selectbox(key="is").select("window 8,000").run()

    assert not at.exception
    at_8k = sorted(s for s, w in fixture_home.windows.items() if w == 8000)
    assert at_8k
    total = len(fixture_home.sessions)
    assert f"{len(at_8k)} of {total} sessions" in shown(at)
    table = at.dataframe[0].value
    assert sorted(table["session_id"]) == at_8k
    assert set(table["window"]) == {"window 8,000"}
    assert dict(at.query_params) == {"by": "window", "is": "window 8,000"}  # shareable


def test_a_shared_sessions_address_reopens_its_filters_and_defaults_stay_out_of_it(
    fixture_home: FixtureHome,
) -> None:
    """Every filter of the sessions page is in its address: a person who picks them and sends
    the address shows the same list; the defaults add nothing to it."""
    at = open_page("sessions")
    at.selectbox(key="sort").select("most turns").run()
    at.checkbox(key="emergencies").check().run()
    at.text_input(key="contains").input("@16000").run()
    at.selectbox(key="sort").select("newest first").run()  # back to the default

    assert dict(at.query_params) == {"emergencies": "1", "contains": "@16000"}
    with_emergencies = {
        sid for sid, rows in fixture_home.effective.items() if any(r["tier"] == 4 for r in rows)
    }
    expected = sorted(s for s in with_emergencies if "@16000" in s)
    assert 0 < len(expected) < sum("@16000" in s for s in fixture_home.sessions)  # both narrow
    assert sorted(at.dataframe[0].value["session_id"]) == expected

    shared = open_page("sessions", **dict(at.query_params))

    assert shared.checkbox(key="emergencies").value is True
    assert shared.text_input(key="contains").value == "@16000"
    assert sorted(shared.dataframe[0].value["session_id"]) == expected


def _traces(at: Any) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    for chart in at.get("plotly_chart"):
        figure = json.loads(chart.proto.spec)
        names = {t.get("name", ""): t for t in figure["data"]}
        if any(n.startswith("cost per turn") for n in names):
            return names, figure["layout"]
    raise AssertionError("no cost chart on the page")


@pytest.mark.parametrize("prefix", ["sqlfluff", "1af7fc5e"])
def test_the_timeline_draws_the_cost_per_turn_beside_the_reported_cache_reads(
    fixture_home: FixtureHome, prefix: str
) -> None:
    sid = session_with(fixture_home, prefix)
    truth = fixture_home.turn_costs[sid]
    assert truth["cost"] > 0 and truth["reported_cache_read"] > 0

    at = open_page("timeline", session=sid)

    traces, layout = _traces(at)
    cost = traces["cost per turn (USD)"]
    assert cost["yaxis"] == "y2" and len(cost["y"]) == truth["turns"]
    assert sum(cost["y"]) == pytest.approx(truth["cost"])
    assert sum(traces["cache read (predicted)"]["y"]) == truth["cache_read"]
    reported = traces["cache read (provider reported)"]["y"]
    assert sum(v for v in reported if v is not None) == truth["reported_cache_read"]
    assert layout["yaxis2"]["title"]["text"] == "cost (USD)"
    assert layout["yaxis"]["title"]["text"] == "prompt tokens"
    assert f"price profile {truth['profile']}" in shown(at)
