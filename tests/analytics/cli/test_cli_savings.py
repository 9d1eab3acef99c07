"""Savings that could have happened (issue 26 item 7): ``stats`` on real replays at 8k.

Two mini-swe-agent trajectories replayed at an 8,000-token window with the byte estimate
(``--uncalibrated``: the store's ``turns.tokens`` and ``history_tokens`` are then the figures
the costs job prices, so plain SQL can check them exactly). Emergency truncations and summariser
fallback trims fire, and the uncompacted history outgrows the window. Every expected figure is
computed here from the store's raw tables (``turns``, ``compactions``, ``compaction_views``,
``sessions``) with SQL written for this test: what a truncation cut (the bytes of the messages
it dropped and what it took off those it shortened, in the compactor's own token count), the
turns that lack it, the headline saving without it, and the turns whose uncompacted prompt would
not have fit the window.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.store import open_store
from tests.analytics.cli_helpers import TRANSCRIPTS
from tests.analytics.savings_sql import CUT_SQL

MINI = TRANSCRIPTS / "mini-swe-agent" / "output"
FILES = (
    MINI / "deepseek_chat_dev/sqlfluff__sqlfluff-1763/sqlfluff__sqlfluff-1763.traj.json",
    MINI / "deepseek_chat_test_1-100/django__django-11910/django__django-11910.traj.json",
)
WINDOW = 8_000

pytestmark = pytest.mark.skipif(not all(f.is_file() for f in FILES), reason="no transcripts")

SUMMARIZER_SQL = """
SELECT tier, CAST(sum(summarizer_input_tokens + summarizer_output_tokens) AS BIGINT)
FROM compactions
WHERE coalesce(effective, true) AND tier > 0 AND summarizer_model IS NOT NULL GROUP BY tier
"""
"""The summariser's tokens per tier (replays record the offline summariser's as an LLM's)."""

INFEASIBLE_SQL = """
SELECT t.session_id, count(*) AS turns,
  count(*) FILTER (WHERE t.history_tokens + coalesce(t.reserve_tokens, 0)
                   > coalesce(t.context_window, s.context_window)) AS infeasible
FROM turns t JOIN sessions s USING (session_id) GROUP BY t.session_id ORDER BY t.session_id
"""


def _sql(home: Path, sql: str) -> Any:
    with open_store(home, read_only=True) as store:
        return store.query(sql)


def _stats(home: Path, *extra: str) -> dict[str, Any]:
    done = CliRunner().invoke(app, ["stats", "--json", "--home", str(home), *extra])
    assert done.exit_code == 0, done.output
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.fixture(scope="module")
def at_8k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("savings-8k")
    done = CliRunner().invoke(
        app,
        [
            "replay",
            *map(str, FILES),
            "--uncalibrated",
            "--window",
            str(WINDOW),
            "--home",
            str(home),
        ],
    )
    assert done.exit_code == 0, done.output
    return home


def test_what_emergency_cut_is_not_counted_as_saved_tokens(at_8k: Path) -> None:
    found = _stats(at_8k)
    cut, emergency_cut, emergency_turns = _sql(
        at_8k,
        CUT_SQL + "SELECT CAST(sum(cut) AS BIGINT), CAST(sum(emergency_cut) AS BIGINT), "
        "count(*) FILTER (WHERE emergency_cut > 0) FROM per_turn",
    ).row(0)
    summarizer = sum(n for _, n in _sql(at_8k, SUMMARIZER_SQL).iter_rows())
    views, uncompacted, dropped = _sql(
        at_8k,
        """SELECT (SELECT CAST(sum(tokens) AS BIGINT) FROM turns),
                  (SELECT CAST(sum(history_tokens) AS BIGINT) FROM turns),
                  (SELECT CAST(sum(n_dropped) AS BIGINT) FROM compactions
                   WHERE tier = 4 AND coalesce(effective, true))""",
    ).row(0)
    assert found["compactions"]["by_tier"]["EMERGENCY"] > 0 and 0 < emergency_cut < cut

    tokens, emergency = found["tokens"], found["emergency"]
    assert tokens["views"] == views and tokens["uncompacted"] == uncompacted
    assert tokens["summarizer"] == summarizer > 0
    assert tokens["cut"] == cut
    saved = uncompacted - views - summarizer - cut
    assert tokens["saved"] == saved
    assert tokens["saved_share"] == pytest.approx(saved / uncompacted)
    # before issue 26 the headline was 1 - billed / uncompacted: what was cut counted as saved
    assert tokens["saved_share"] < 1 - tokens["billed"] / uncompacted - 0.05
    assert emergency["cut_tokens"] == emergency_cut
    assert emergency["cut_turns"] == emergency_turns
    assert emergency["messages_dropped"] == dropped > 0


def test_the_cost_headline_and_each_tier_leave_out_what_truncations_cut(at_8k: Path) -> None:
    """Under ``none`` (every token at one per million, no cache) a turn's saving is what it
    did not send, so the priced figures can be checked against the tokens."""
    cost = _stats(at_8k, "--price-profile", "none")["cost"]
    per_tier = {
        tier: (difference, cut)
        for tier, difference, cut in _sql(
            at_8k,
            CUT_SQL + "SELECT coalesce(view_tier, 0), CAST(sum(difference) AS BIGINT), "
            "CAST(sum(cut_as_priced) AS BIGINT) FROM per_turn GROUP BY view_tier",
        ).iter_rows()
    }
    calls = dict(_sql(at_8k, SUMMARIZER_SQL).iter_rows())
    unsent = sum(u for u, _ in per_tier.values())
    cut = sum(c for _, c in per_tier.values())
    assert per_tier[4][1] > 0  # the turns whose view Emergency made lack what it cut

    assert cost["cut"] * 1e6 == pytest.approx(cut)
    assert cost["saved"] * 1e6 == pytest.approx(unsent - cut - sum(calls.values()))
    assert cost["saved_share"] == pytest.approx(cost["saved"] / cost["uncompacted"])
    for name, tier in (("SOFT", 2), ("FULL", 3), ("EMERGENCY", 4)):
        figures = cost["by_tier"][name]
        tier_unsent, tier_cut = per_tier.get(tier, (0, 0))
        assert figures["cut"] * 1e6 == pytest.approx(tier_cut), name
        assert figures["saved"] * 1e6 == pytest.approx(tier_unsent - tier_cut), name
        assert figures["net"] * 1e6 == pytest.approx(tier_unsent - tier_cut - calls.get(tier, 0))


def test_without_compaction_is_flagged_not_possible_with_the_turns_over_the_window(
    at_8k: Path,
) -> None:
    found = _stats(at_8k)
    per_session = _sql(at_8k, INFEASIBLE_SQL)
    infeasible = int(per_session["infeasible"].sum())
    turns = int(per_session["turns"].sum())
    assert 0 < infeasible < turns

    cost, tokens = found["cost"], found["tokens"]
    assert cost["infeasible_turns"] == tokens["infeasible_turns"] == infeasible
    assert cost["priced_turns"] == turns  # both sessions are DeepSeek's, priced in USD
    assert cost["uncompacted_feasible"] is tokens["uncompacted_feasible"] is False
    assert cost["infeasible_sessions"] == [
        {"session_id": r["session_id"], "infeasible_turns": r["infeasible"], "turns": r["turns"]}
        for r in per_session.iter_rows(named=True)
        if r["infeasible"]
    ]
    assert cost["feasible"]["sessions"] == 0  # neither session fits 8k uncompacted
    assert cost["net_negative_sessions"] == []  # not possible, so never "cost more than"

    done = CliRunner().invoke(app, ["stats", "--home", str(at_8k)], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    said = f"not possible — {infeasible:,} of {turns:,} turns would not fit the window"
    assert said in done.output
    lines = [line for line in done.output.splitlines() if "without compaction" in line]
    assert len(lines) == 2 and all(said in line for line in lines)  # tokens and cost


def test_the_stats_table_gives_emergency_its_own_cut_line(at_8k: Path) -> None:
    emergency = _stats(at_8k)["emergency"]
    done = CliRunner().invoke(app, ["stats", "--home", str(at_8k)], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    (line,) = [line for line in done.output.splitlines() if "cut by emergency truncation" in line]
    assert (
        f"{emergency['cut_tokens']:,} tokens, {emergency['cut_turns']:,} turns affected, "
        f"{emergency['messages_dropped']:,} messages dropped"
    ) in line
    assert "share saved (cut tokens not counted)" in done.output
