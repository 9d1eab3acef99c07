"""The overview's cohorts (issue 27, item 5): split by agent unless the URL says otherwise, the
chosen cohort drives every figure and chart of the page, its numbers formatted, and the choice
kept in the URL. The truth is ``stats --json --by agent`` of the fixture store (``fleet_stats``
read through the app's own handle, which owns the store).
"""

from __future__ import annotations

import json
from typing import Any

from analytics import THEME
from analytics.queries.stats import CohortKey, fleet_stats
from app.owner import shared_owner
from app.words import cohort_label, cohort_value
from tests.app.fixtures import FixtureHome
from tests.app.pages import open_page


def _by(home: FixtureHome, key: CohortKey) -> list[dict[str, Any]]:
    stats = shared_owner(home.home).read(lambda store: fleet_stats(store, by=[key]))
    groups: list[dict[str, Any]] = stats["groups"]
    return groups


def _bars(at: Any, title: str) -> dict[str, Any]:
    """The spec of the chart whose title holds ``title``."""
    spec: dict[str, Any] = json.loads(
        next(c for c in at.get("plotly_chart") if title in c.proto.spec).proto.spec
    )
    return spec


def _tier_bars(at: Any) -> dict[str, int]:
    spec = _bars(at, "Compactions per tier")
    bar = spec["data"][0]
    return dict(zip(bar["x"], bar["y"], strict=True))


def test_the_overview_splits_the_sessions_by_agent_first(fixture_home: FixtureHome) -> None:
    at = open_page("overview")

    assert at.selectbox(key="by").value == "agent"
    (table,) = [t.value for t in at.table if "cohort" in t.value.columns]
    groups = _by(fixture_home, "agent")
    assert list(table["cohort"]) == [cohort_label(g["key"]).replace("-", "\\-") for g in groups]
    big = [int(g["stats"]["tokens"]["billed"]) for g in groups]
    assert list(table["tokens billed"]) == [f"{n:,}" for n in big]
    assert any(n >= 1_000 for n in big)  # so the separators were needed


def test_choosing_a_cohort_draws_its_figures_and_charts(fixture_home: FixtureHome) -> None:
    groups = _by(fixture_home, "agent")
    mini = next(g for g in groups if g["key"]["agent"] == "mini-swe-agent")
    at = open_page("overview")
    fleet_tiers = _tier_bars(at)

    label = cohort_label(mini["key"])
    at.selectbox(key="cohort").select(label).run()

    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["sessions"] == f"{mini['stats']['sessions']:,}" != f"{len(groups):,}"
    assert metrics["compactions"] == f"{mini['stats']['compactions']['total']:,}"
    by_tier = mini["stats"]["compactions"]["by_tier"]
    assert _tier_bars(at) == {t: n for t, n in by_tier.items() if t in fleet_tiers or n}
    assert _tier_bars(at) != fleet_tiers
    assert f"Anchor survival, {label}" in _bars(at, "Anchor survival")["layout"]["title"]["text"]
    assert at.query_params["cohort"] == label and "by" not in at.query_params  # agent: default


def test_a_shared_cohort_link_opens_on_that_cohort(fixture_home: FixtureHome) -> None:
    groups = _by(fixture_home, "window")
    small = next(g for g in groups if g["key"]["window"] == 8_000)
    label = cohort_label(small["key"])

    at = open_page("overview", by="window", cohort=label)

    metrics = {m.label: m.value for m in at.metric}
    assert metrics["sessions"] == f"{small['stats']['sessions']:,}"
    assert label == "window 8,000"


def test_an_import_has_no_window_and_a_source_says_what_it_is() -> None:
    assert cohort_value("window", 0) == cohort_value("window", None)
    assert "no window" in cohort_value("window", 0) and "0" not in cohort_value("window", 0)
    assert cohort_value("window", 16_000) == "window 16,000"
    assert cohort_value("source", "import") == "imported (the harness's own run)"
    assert cohort_value("source", "replay") == "replayed by compactlens"
    assert cohort_value("agent", None) == "agent unknown"


def test_the_app_draws_its_charts_in_the_theme_the_report_shares(
    fixture_home: FixtureHome,
) -> None:
    pages = [
        open_page("overview"),
        open_page("timeline", session=fixture_home.decisions),
        open_page("retention", session=fixture_home.decisions),
    ]

    charts = [c for at in pages for c in at.get("plotly_chart")]
    assert len(charts) >= 6
    for chart in charts:
        assert chart.proto.theme == ""  # Streamlit adds no theme of its own
        template = json.loads(chart.proto.spec)["layout"]["template"]["layout"]
        assert template["font"]["family"] == THEME.layout.font.family
        assert template["colorway"] == list(THEME.layout.colorway)


def test_the_overview_says_the_share_of_compactions_that_paid_for_themselves(
    fixture_home: FixtureHome,
) -> None:
    ledger = fixture_home.stats["ledger"]
    assert ledger["priced"] and ledger["paid_share"] is not None

    at = open_page("overview")

    said = " ".join(str(c.value) for c in at.caption)
    assert (
        f"Ledger: {ledger['paid_share']:.0%} of {ledger['priced']:,} priced compactions paid "
        "for themselves"
    ) in said
    assert f"{ledger['grew']:,} compactions grew the context" in said
