"""Each compaction's ledger on the timeline (issue 31): on hover over its marker, and in words
beside its link; a compaction that grew the context ringed on the chart.

The ledger the page shows is compared with ``ledger --json`` of the same store (``ledger_json``
read through the app's own handle). Growth is checked on a crafted session: a real one recorded
through ``CompactionSession`` into a spool, in which the first effective compaction's record is
rewritten to be 1,234 tokens larger after than before (as a summary longer than what it
replaced would be) before the projector reads it.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import streamlit as st

from analytics.queries.ledger import ledger_json
from analytics.queries.materialize import refresh
from analytics.store import open_store
from analytics.store.projector import Projector
from app.owner import shared_owner
from compactor import CompactionSession, Message, SpoolSink
from tests.app.fixtures import FixtureHome, compactor_at
from tests.app.pages import link_params, open_page, session_with, shown

GROWN_ID = "grown-session"
GROWTH = 1_234


@dataclass(frozen=True)
class Grown:
    home: Path
    compaction: str
    """The id of the compaction that grew the context."""


def _grow_first_compaction(spool: Path) -> str:
    """Rewrite the first effective compaction's record in ``spool``: ``GROWTH`` tokens more
    after than before. Its id."""
    for path in sorted(spool.glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            event = json.loads(line)
            record = event.get("payload", {}).get("record") or {}
            if event.get("type") == "compaction_recorded" and record.get("effective"):
                record["tokens_after"] = record["tokens_before"] + GROWTH
                lines[i] = json.dumps(event)
                path.write_text("\n".join(lines) + "\n", encoding="utf-8")
                return str(record["id"])
    raise AssertionError("no effective compaction was recorded")


@pytest.fixture(scope="module")
def grown_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grown]:
    home = tmp_path_factory.mktemp("grown-home")
    sink = SpoolSink(home / "spool")
    session = CompactionSession(
        compactor_at(home, 8_000, GROWN_ID),
        "You are an agent.",
        session_id=GROWN_ID,
        event_sink=sink,
    )
    session.append(Message(role="user", content="Fix the flaky test."))
    for i in range(12):
        session.prepare()
        session.append(Message(role="assistant", content=f"Step {i}: " + "reading code. " * 150))
        session.append(Message(role="user", content=f"Result {i}: " + "looks fine. " * 150))
    session.close()
    sink.close()
    grown = _grow_first_compaction(home / "spool")
    with open_store(home) as store:
        Projector(store, home / "spool").ingest()
        refresh(store)
    yield Grown(home, grown)
    st.cache_resource.clear()  # close the owner this module opened
    st.cache_data.clear()


@pytest.fixture
def on_grown(
    fixture_home: FixtureHome, grown_home: Grown, monkeypatch: pytest.MonkeyPatch
) -> Grown:
    monkeypatch.setenv("COMPACTLENS_HOME", str(grown_home.home))
    return grown_home


def _timeline(at: Any) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(at.get("plotly_chart")[0].proto.spec)
    return spec


def _hovers(spec: dict[str, Any]) -> dict[str, str]:
    """Each compaction id's hover text, from the tier traces."""
    return {
        cid: text
        for t in spec["data"]
        if t.get("name") in {"WARN", "SOFT", "FULL", "EMERGENCY"}
        for cid, text in zip(t["customdata"], t["hovertext"], strict=True)
    }


def _diff_links(at: Any) -> dict[str, str]:
    """Each compaction linked from the page (its id) and its link's label, unescaped."""
    out = {}
    for link in at.get("page_link"):
        query = dict(urllib.parse.parse_qsl(str(link.proto.query_string)))
        if "compaction" in query:
            out[query["compaction"]] = str(link.proto.label).replace("\\", "")
    return out


def test_each_marker_says_its_ledger_as_ledger_json_gives_it(fixture_home: FixtureHome) -> None:
    sid = session_with(fixture_home, "sqlfluff")
    truth = shared_owner(fixture_home.home).read(lambda store: ledger_json(store, sid))
    rows = {r["compaction_id"]: r for r in truth["compactions"]}
    assert any(r["paid"] for r in rows.values()) and any(r["paid"] is False for r in rows.values())

    at = open_page("timeline", session=sid)

    hovers = _hovers(_timeline(at))
    assert set(hovers) == set(rows)  # every effective compaction has its ledger
    for cid, row in rows.items():
        said = hovers[cid]
        assert f"cache invalidated: {row['invalidated_tokens']:,} tokens" in said
        assert f"rewrite cost: {row['rewrite_cost']:,.4f} USD" in said
        if row["paid"]:
            assert f"paid for itself at turn {row['break_even_turn']}" in said
        else:
            assert f"did not pay for itself: {row['never']}" in said
    links = _diff_links(at)
    assert len(links) == 20  # the first page of the list
    for cid, label in links.items():
        row = rows[cid]
        note = f"paid for itself at turn {row['break_even_turn']}"
        assert label.endswith(f" · {note if row['paid'] else 'did not pay for itself'} (open diff)")
    paid = sum(bool(r["paid"]) for r in rows.values())
    assert f"{paid:,} of {len(rows):,} priced compactions paid for themselves" in shown(at)


def test_a_compaction_that_grew_the_context_is_ringed_and_said(on_grown: Grown) -> None:
    truth = shared_owner(on_grown.home).read(lambda store: ledger_json(store, GROWN_ID))
    grew = [r for r in truth["compactions"] if r["grew"]]
    assert [r["compaction_id"] for r in grew] == [on_grown.compaction]
    assert grew[0]["growth_tokens"] == GROWTH

    at = open_page("timeline", session=GROWN_ID)

    spec = _timeline(at)
    (ring,) = [t for t in spec["data"] if t.get("name") == "grew the context"]
    assert ring["customdata"] == [on_grown.compaction]  # clicking the ring opens its diff
    said = _hovers(spec)[on_grown.compaction]
    assert f"grew the context</b> by {GROWTH:,} tokens: the summary is longer" in said
    params = link_params(at, f"grew the context by {GROWTH:,} tokens")
    assert params == {"session": GROWN_ID, "compaction": on_grown.compaction}
    assert "1 compaction grew the context (ringed)" in shown(at)
