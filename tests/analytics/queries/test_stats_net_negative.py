"""A live loop whose compaction costs more than it saves is said so (issue 26 item 7).

The store holds three 40-turn live sessions of one Claude agent (``tests.analytics.live_loop``):
one compacting every few turns of a 100k window its history never fills, one never compacting,
one at 8k that must compact. The costs under Anthropic's prices are computed here from the
store's raw tables with SQL (each turn's prompt and uncompacted history from ``turns``, the
prefix a compaction keeps from ``compaction_views``, each answer from ``messages``, the
summariser's tokens from ``compactions``) with the cache rules the price profile states: a
prefix of at least 1,024 tokens read at $0.30 per million, the rest of the prompt written at
$3.75, a shorter prompt uncached at $3.00, answers and summariser output at $15.00, summariser
input at $3.00.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.store import open_store
from tests.analytics.live_loop import EAGER, NEVER, TIGHT, TURNS, build_loops

COSTS_SQL = """
WITH shared AS (  -- per compaction: the bytes of the leading positions it left unchanged
  SELECT b.compaction_id, coalesce(sum(b.bytes) FILTER (WHERE b.position < coalesce((
      SELECT min(x.position) FROM compaction_views x
      LEFT JOIN compaction_views y ON y.compaction_id = x.compaction_id AND y.side = 'after'
        AND y.position = x.position
      WHERE x.compaction_id = b.compaction_id AND x.side = 'before'
        AND y.sha256 IS DISTINCT FROM x.sha256), 1000000000)), 0) AS bytes
  FROM compaction_views b WHERE b.side = 'before' GROUP BY b.compaction_id),
c AS (
  SELECT c.session_id, c.seq, s.bytes AS shared_bytes,
         c.summarizer_input_tokens AS read, c.summarizer_output_tokens AS wrote
  FROM compactions c JOIN shared s ON s.compaction_id = c.id
  WHERE coalesce(c.effective, true) AND c.tier > 0),
t AS (
  SELECT t.session_id, t.seq, t.tokens AS prompt, t.history_tokens AS whole,
    lag(t.seq) OVER w AS prev_seq, lag(t.tokens) OVER w AS prev_prompt,
    lag(t.history_tokens) OVER w AS prev_whole,
    t.history_tokens + coalesce(t.reserve_tokens, 0) > t.context_window AS over_window,
    (SELECT b.bytes FROM sessions s JOIN message_blobs b ON b.sha256 = s.system_prompt_sha256
     WHERE s.session_id = t.session_id LIMIT 1) // 4 AS system_tokens,
    coalesce((SELECT m.bytes FROM messages m
              WHERE m.session_id = t.session_id AND m.idx = t.history_messages), 0) // 4
      AS answer
  FROM turns t WINDOW w AS (PARTITION BY t.session_id ORDER BY t.seq)),
p AS (
  SELECT t.*,
    CASE WHEN prev_seq IS NULL THEN system_tokens
         WHEN EXISTS (SELECT 1 FROM c WHERE c.session_id = t.session_id
                      AND c.seq > t.prev_seq AND c.seq <= t.seq)
         THEN (SELECT c.shared_bytes FROM c WHERE c.session_id = t.session_id
               AND c.seq > t.prev_seq AND c.seq <= t.seq ORDER BY c.seq LIMIT 1) // 4
         ELSE prev_prompt END AS prefix,
    coalesce(prev_whole, system_tokens) AS whole_prefix
  FROM t),
priced AS (
  SELECT session_id, over_window,
    CASE WHEN prompt < 1024 THEN 3.00 * prompt
         WHEN least(prefix, prompt) >= 1024
         THEN 0.30 * least(prefix, prompt) + 3.75 * (prompt - least(prefix, prompt))
         ELSE 3.75 * prompt END + 15.0 * answer AS cost,
    CASE WHEN whole < 1024 THEN 3.00 * whole
         WHEN least(whole_prefix, whole) >= 1024
         THEN 0.30 * least(whole_prefix, whole) + 3.75 * (whole - least(whole_prefix, whole))
         ELSE 3.75 * whole END + 15.0 * answer AS uncompacted
  FROM p)
SELECT session_id,
  (sum(cost) + coalesce((SELECT sum(3.00 * read + 15.0 * wrote) FROM c
                         WHERE c.session_id = priced.session_id), 0)) / 1e6 AS total,
  sum(uncompacted) / 1e6 AS uncompacted,
  count(*) FILTER (WHERE over_window) AS infeasible,
  count(*) AS turns
FROM priced GROUP BY session_id ORDER BY session_id
"""


@pytest.fixture(scope="module")
def loops(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_loops(tmp_path_factory.mktemp("loops"))


@pytest.fixture(scope="module")
def truth(loops: Path) -> dict[str, dict[str, Any]]:
    with open_store(loops, read_only=True) as store:
        rows = store.query(COSTS_SQL)
    return {str(r.pop("session_id")): r for r in rows.iter_rows(named=True)}


def test_a_loop_whose_compaction_costs_more_is_named_with_what_it_cost(
    loops: Path, truth: dict[str, dict[str, Any]]
) -> None:
    assert all(t["turns"] == TURNS for t in truth.values())
    eager = truth[EAGER]
    assert eager["infeasible"] == 0 and eager["total"] > 1.2 * eager["uncompacted"]
    assert truth[NEVER]["total"] == pytest.approx(truth[NEVER]["uncompacted"])
    assert truth[TIGHT]["infeasible"] > 0

    done = CliRunner().invoke(app, ["stats", "--json", "--home", str(loops)])
    assert done.exit_code == 0, done.output
    cost = json.loads(done.stdout)["cost"]

    expected = [
        {
            "session_id": sid,
            "total": pytest.approx(t["total"]),
            "uncompacted": pytest.approx(t["uncompacted"]),
            "extra": pytest.approx(t["total"] - t["uncompacted"]),
            "currency": "USD",
        }
        for sid, t in truth.items()
        if t["infeasible"] == 0 and t["total"] > t["uncompacted"] * (1 + 1e-9)
    ]
    assert [e["session_id"] for e in expected] == [EAGER]
    assert cost["net_negative_sessions"] == expected
    assert cost["total"] == pytest.approx(sum(t["total"] for t in truth.values()))
    assert cost["uncompacted"] == pytest.approx(sum(t["uncompacted"] for t in truth.values()))
    # the --json run says so on stderr too (its stdout was one JSON object, read above)
    assert EAGER in done.stderr and "compaction cost more than not compacting" in done.stderr


def test_stats_warns_naming_the_session_and_counts_it_in_the_table(
    loops: Path, truth: dict[str, dict[str, Any]]
) -> None:
    done = CliRunner().invoke(app, ["stats", "--home", str(loops)], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output

    extra = truth[EAGER]["total"] - truth[EAGER]["uncompacted"]
    (warning,) = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert "compaction cost more than not compacting in 1 session" in warning
    assert f"{EAGER} (+{extra:,.4f} USD)" in warning
    assert NEVER not in warning and TIGHT not in warning
    (row,) = [line for line in done.stdout.splitlines() if "compaction cost more" in line]
    assert row.rstrip(" │").endswith(" 1")


def test_only_the_fleet_warns_not_each_cohort(loops: Path) -> None:
    done = CliRunner().invoke(
        app, ["stats", "--home", str(loops), "--by", "window"], env={"COLUMNS": "400"}
    )
    assert done.exit_code == 0, done.output
    assert done.stdout.count("compactlens: window") == 2
    assert len([line for line in done.stderr.splitlines() if EAGER in line]) == 1
