"""The emergencies page of a session with more than a hundred emergencies: one block per cause.

The store replays a real Claude Code session at 16k (``native/claude-code/44``: it starts
mid-session, and almost every turn of it ends in an Emergency at that window), projects it and
runs the jobs, as ``compactlens replay`` and the app do. The truth is read with SQL before the
app opens the store: the session with the most effective Emergency compactions, how many it
has, and how many causes the post-mortem job gave them. The page must draw one chart per cause,
not one (or two) per emergency as it did when one session's page drew 285 plots.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import streamlit as st

from analytics.cli.commands import run_replay
from analytics.jobs.causes import CAUSES
from analytics.queries.materialize import refresh
from analytics.store import open_store
from analytics.store.projector import Projector
from app.postmortem import CAUSE_TITLES
from app.words import APP_NOT_COMPUTED
from tests.app.findings import MARSHMALLOW
from tests.app.fixtures import TRANSCRIPTS, compactor_at
from tests.app.pages import open_page, shown

MANY = TRANSCRIPTS / "native" / "claude-code" / "44" / "785715c3f5" / "2" / "full.jsonl"
WINDOW = 16_000
HEADING = re.compile(r" — ([\d,]+) emergenc(?:y|ies), turns? ")


@dataclass(frozen=True)
class Many:
    session: str
    emergencies: int
    causes: int


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Many]:
    home = tmp_path_factory.mktemp("many-emergencies")
    run_replay([MANY], home, compactor_at(home, WINDOW))
    with open_store(home) as store:
        Projector(store, home / "spool").ingest()
        refresh(store)
        sid, count = store.query(
            """SELECT session_id, count(*) FROM compactions
               WHERE tier = 4 AND coalesce(effective, true)
               GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1"""
        ).row(0)
        causes = store.query(
            """SELECT count(DISTINCT coalesce(cause, '')) FROM job_emergencies
               WHERE session_id = ?""",
            [sid],
        ).item()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPACTLENS_HOME", str(home))
        yield Many(str(sid), int(count), int(causes))
        st.cache_resource.clear()  # closes the store and stops its projector thread
        st.cache_data.clear()


def test_a_session_with_a_hundred_emergencies_draws_one_chart_per_cause(many: Many) -> None:
    assert many.emergencies >= 100, "fewer emergencies than the case this test is about"

    at = open_page("emergencies", session=many.session)

    assert len(at.get("plotly_chart")) == many.causes < many.emergencies
    headings = [h.value for h in at.subheader]
    assert len(headings) == many.causes
    counts = [int(m[1].replace(",", "")) for h in headings if (m := HEADING.search(h))]
    assert len(counts) == len(headings) and sum(counts) == many.emergencies
    assert f"{many.emergencies:,} emergencies in {many.causes:,} group" in shown(at)
    listed = sum(len(f.value) for f in at.dataframe if "fix" in f.value.columns)
    assert listed == sum(n for n in counts if n > 1)  # each group lists all of its emergencies


def test_every_cause_has_a_title_on_the_page() -> None:
    assert set(CAUSE_TITLES) == set(CAUSES)


@pytest.fixture(scope="module")
def not_computed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A store whose emergencies have avoidable causes and no counterfactuals yet (the
    mini-swe-agent run ``marshmallow-1359`` replayed at 16k, jobs run, the replay job not):
    the session id."""
    home = tmp_path_factory.mktemp("not-computed")
    run_replay([TRANSCRIPTS / MARSHMALLOW], home, compactor_at(home, WINDOW))
    with open_store(home) as store:
        Projector(store, home / "spool").ingest()
        refresh(store)
        sid = store.query(
            "SELECT session_id FROM job_emergencies WHERE cause NOT IN ('fixed_prompt') LIMIT 1"
        ).item()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPACTLENS_HOME", str(home))
        yield str(sid)
        st.cache_resource.clear()
        st.cache_data.clear()


def test_counterfactuals_not_computed_point_at_the_page_s_button_not_a_flag(
    not_computed: str,
) -> None:
    at = open_page("emergencies", session=not_computed)

    fixes = [str(v) for f in at.dataframe if "fix" in f.value.columns for v in f.value["fix"]]
    said = shown(at).replace("\\", "") + " ".join(fixes)
    assert "compute counterfactuals" in [b.label for b in at.button]
    assert "--no-counterfactuals" not in said
    assert APP_NOT_COMPUTED in said
