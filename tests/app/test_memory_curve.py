"""Memory over repeated compactions on the retention page (issue 31, item 4): the survival by
compaction count curve, of one session and of the fleet, is the one ``retention --json``
gives (``retention_json``, read through the app's own handle), all items and per anchor type.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from analytics.queries.findings import retention_json
from app.owner import shared_owner
from tests.app.fixtures import FixtureHome
from tests.app.pages import open_page, session_with, shown


def _memory_chart(at: Any) -> dict[str, Any]:
    charts: list[dict[str, Any]] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    (spec,) = [c for c in charts if "after k compactions" in c["layout"]["title"]["text"]]
    return spec


def _points(rows: list[dict[str, Any]]) -> list[list[int]]:
    return [[r["survived"], r["items"]] for r in sorted(rows, key=lambda r: r["compactions"])]


@pytest.mark.parametrize("scope", ["session", "fleet"])
def test_the_retention_page_draws_the_survival_by_compaction_count_of_retention_json(
    fixture_home: FixtureHome, scope: str
) -> None:
    sid = fixture_home.decisions if scope == "session" else None
    truth = shared_owner(fixture_home.home).read(lambda store: retention_json(store, sid))
    curve = truth["survival_by_compactions"]
    assert len(curve) >= 2, "no curve to draw: the test would prove nothing"

    at = open_page("retention", **({"session": sid} if sid else {}))

    spec = _memory_chart(at)
    lines = {t["name"]: t for t in spec["data"]}
    whole = lines["all items"]
    assert whole["x"] == [r["compactions"] for r in curve]
    assert whole["customdata"] == _points(curve)
    assert whole["y"] == pytest.approx([r["survived"] / r["items"] for r in curve])
    by_type = truth["survival_by_compactions_by_type"]
    for name in {r["anchor_type"] for r in by_type}:
        mine = [r for r in by_type if r["anchor_type"] == name]
        assert lines[name]["customdata"] == _points(mine)
    assert "Memory over repeated compactions" in shown(at)
    first = curve[0]
    assert f"After 1 compaction {first['survived']:,} of {first['items']:,} item" in shown(at)


def test_a_session_without_a_second_summarising_compaction_says_why_it_has_no_curve(
    fixture_home: FixtureHome,
) -> None:
    sid = session_with(fixture_home, "1af7fc5e")  # Emergency truncations only: no anchors

    at = open_page("retention", session=sid)

    assert not [c for c in at.get("plotly_chart") if "after k compactions" in c.proto.spec]
    assert "Memory over repeated compactions" not in shown(at)  # the survival's reason says why
