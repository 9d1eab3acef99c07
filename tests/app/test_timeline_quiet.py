"""The decisions not taken on the timeline page (issue 31 item 5): the page's table lists the
turns ``compactlens timeline --json`` lists (``quiet_json``) for that session, each with its
reason in words; the turns are recomputed here from the store's raw ``turns`` rows."""

from __future__ import annotations

from analytics.jobs.quiet import MARGIN
from analytics.queries.quiet import quiet_json
from app.owner import shared_owner
from compactor import CompactorConfig
from tests.app.fixtures import FixtureHome
from tests.app.pages import open_page, session_with, shown

DEFAULTS = CompactorConfig()


def _quiet_from_rows(fixture_home: FixtureHome, sid: str) -> set[int]:
    """The turns that changed nothing while a tier was due or within the margin below the
    next threshold (the fixture's sessions use the default thresholds)."""
    rows = shared_owner(fixture_home.home).read(
        lambda store: store.query(
            "SELECT turn, tokens, tokens_before, tier, reserve_tokens, context_window "
            "FROM turns WHERE session_id = ?",
            [sid],
        )
    )
    thresholds = (DEFAULTS.warn, DEFAULTS.soft, DEFAULTS.full, DEFAULTS.emergency)
    found = set()
    for r in rows.iter_rows(named=True):
        if r["tokens"] < r["tokens_before"]:
            continue
        ratio = (r["tokens_before"] + (r["reserve_tokens"] or 0)) / r["context_window"]
        above = [t for t in thresholds if ratio < t]
        if r["tier"] > 0 or (above and min(above) - ratio <= MARGIN):
            found.add(int(r["turn"]))
    return found


def test_the_timeline_lists_the_decisions_not_taken_with_their_reasons(
    fixture_home: FixtureHome,
) -> None:
    sid = session_with(fixture_home, "sqlfluff")
    expected = _quiet_from_rows(fixture_home, sid)
    assert expected, "the session comes near no threshold: the test would prove nothing"
    found = shared_owner(fixture_home.home).read(lambda store: quiet_json(store, sid))
    cli = {t["turn"]: t["words"] for t in found["turns"]}
    assert set(cli) == expected

    at = open_page("timeline", session=sid)

    assert "Decisions not taken" in shown(at)
    table = at.dataframe[-1].value
    assert set(table["turn"].to_list()) == expected
    assert dict(zip(table["turn"], table["why nothing fired"], strict=True)) == cli
