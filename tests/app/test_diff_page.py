"""The compaction diff (issue 27, item 5): "changed only" shows what a compaction changed and
hides what it kept, and an assistant message that only called tools shows its calls.

The truth is the store's own tables, read with SQL through the app's handle: which messages of
a compaction's views were kept, and which history messages have tool calls and no text.
"""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl

from app.owner import shared_owner
from tests.app.fixtures import FixtureHome
from tests.app.pages import open_page, session_with, shown

POSITION = re.compile(r"^(\d+)\. (\w+) · ")


def _query(home: FixtureHome, sql: str, params: list[Any]) -> pl.DataFrame:
    out: pl.DataFrame = shared_owner(home.home).read(lambda store: store.query(sql, params))
    return out


def _listed(at: Any) -> list[str]:
    """The position captions of the messages on the page, in order (both sides)."""
    return [str(c.value) for c in at.caption if POSITION.match(str(c.value))]


def test_changed_only_shows_the_messages_a_compaction_changed_and_hides_the_kept(
    fixture_home: FixtureHome,
) -> None:
    sid = fixture_home.hostile  # Warn offloads: a few offloaded among many kept
    views = _query(
        fixture_home,
        """SELECT compaction_id, side,
                  count(*) FILTER (WHERE status NOT IN ('kept', 'system')) AS changed,
                  count(*) FILTER (WHERE status IN ('kept', 'system')) AS unchanged
           FROM compaction_views WHERE session_id = ? GROUP BY 1, 2 ORDER BY 1, 2""",
        [sid],
    )
    busy = views.filter((pl.col("unchanged") >= 5) & (pl.col("changed") >= 1))
    cid = str(busy.get_column("compaction_id")[0])
    mine = views.filter(pl.col("compaction_id") == cid)
    changed = int(mine.get_column("changed").sum())
    unchanged = int(mine.get_column("unchanged").sum())
    assert changed + unchanged <= 60  # both sides on their first page

    at = open_page("diff", session=sid, compaction=cid)
    assert len(_listed(at)) == changed + unchanged
    at.toggle(key="changed_only").set_value(True).run()

    assert not at.exception
    assert len(_listed(at)) == changed
    badges = [str(m.value) for m in at.markdown if "-badge[" in str(m.value)]
    assert badges and not any("KEPT" in b or "SYSTEM" in b for b in badges)
    hidden = [c.value for c in at.caption if "unchanged message" in str(c.value)]
    assert sum(int(str(h).split()[0]) for h in hidden) == unchanged


def test_an_assistant_message_that_only_calls_tools_shows_its_calls(
    fixture_home: FixtureHome,
) -> None:
    sid = session_with(fixture_home, "1af7fc5e")
    found = _query(
        fixture_home,
        """SELECT v.compaction_id, CAST(m.tool_calls AS VARCHAR) AS tool_calls
           FROM compaction_views v
           JOIN messages m ON m.session_id = v.session_id AND m.idx = v.history_index
           JOIN message_blobs b ON b.sha256 = m.sha256
           WHERE v.session_id = ? AND m.role = 'assistant' AND coalesce(b.content, '') = ''
             AND json_array_length(m.tool_calls) > 0 AND v.position < 30
           ORDER BY v.compaction_id, v.side, v.position LIMIT 1""",
        [sid],
    )
    assert found.height, "no tool-call-only message in a diff: the test would prove nothing"
    cid, raw = found.row(0)
    call = json.loads(raw)[0]

    at = open_page("diff", session=sid, compaction=cid)

    codes = [str(c.value) for c in at.code]
    assert any(c.startswith(f"{call['name']}(") and call["arguments"][:40] in c for c in codes)
    assert "only calls" in shown(at)
    assert not any(str(t.value) == "" for t in at.text)  # no empty body
