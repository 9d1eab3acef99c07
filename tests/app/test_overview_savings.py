"""The overview on live loops whose compaction costs more than it saves (issue 26 item 7).

The store is ``tests.analytics.live_loop``'s: three 40-turn live sessions of one Claude agent,
one compacting every few turns of a window its history never fills (compacting costs more:
each compaction turns a cached prefix into a cache write), one never compacting, one at 8k that
must compact. What the page says is compared with ``stats --json`` of that store
(``fleet_stats``), whose figures ``tests/analytics/queries/test_stats_net_negative.py`` checks
against the raw tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st

from analytics.queries.stats import fleet_stats
from analytics.store import open_store
from tests.analytics.live_loop import EAGER, NEVER, TIGHT, build_loops
from tests.app.fixtures import FixtureHome
from tests.app.pages import link_params, open_page, shown


@pytest.fixture(scope="module")
def loops_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield build_loops(tmp_path_factory.mktemp("loops-home"))
    # close the owner this module opened, as test_harness_page does
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def on_loops(
    fixture_home: FixtureHome, loops_home: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    with open_store(loops_home, read_only=True) as store:
        stats = fleet_stats(store)
    monkeypatch.setenv("COMPACTLENS_HOME", str(loops_home))
    return stats


def test_the_overview_warns_of_the_session_whose_compaction_cost_more(
    on_loops: dict[str, Any],
) -> None:
    losing = on_loops["cost"]["net_negative_sessions"]
    assert [s["session_id"] for s in losing] == [EAGER]

    at = open_page("overview")

    (warning,) = [w.value for w in at.warning if "cost more" in w.value]
    assert "Compaction cost more than not compacting in 1 session" in warning
    assert "would have fit the window uncompacted" in warning
    assert link_params(at, EAGER) == {"session": EAGER}
    label = f"{EAGER}: +{losing[0]['extra']:,.4f} USD"
    assert label in shown(at).replace("\\", "")
    assert NEVER not in shown(at) and TIGHT not in shown(at)
    # one of three sessions could not have run uncompacted: the alternative is "not possible"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["cost uncompacted"] == "not possible"
    assert metrics["cost saved"] == f"{on_loops['cost']['saved_share']:.0%}"
    assert on_loops["cost"]["saved_share"] < 0
    fits = on_loops["cost"]["feasible"]
    assert fits["sessions"] == 2 and fits["saved"] < 0  # the eager and the never loops
    assert (
        "Where the uncompacted history would have fit (2 sessions), compaction cost more by "
        f"{-fits['saved_share']:.0%} ({-fits['saved']:,.4f} USD)"
    ) in shown(at)
