"""``stats --json`` on replays of every dev transcript at 16k agrees with plain SQL.

The SQL below is written here, independently of the jobs (Polars) and of
``analytics.queries.stats``: if a job miscounts a tier, a percentile, an emergency kind or the
tokens billed, the two disagree. Fuzzy anchor matching and artifact extraction have their own
hand-built tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.store import open_store
from tests.analytics.replayed import DevReplays
from tests.analytics.savings_sql import CUT_SQL

LIVE = "session_id IN (SELECT session_id FROM sessions WHERE deleted_at IS NULL)"
EFFECTIVE = f"FROM compactions WHERE tier > 0 AND coalesce(effective, true) AND {LIVE}"
TRUNCATION = (
    "(emergency = 'truncation' OR (emergency IS NULL AND (n_dropped > 0 OR coalesce(cut, 0) > 0)))"
)


@pytest.fixture(scope="module")
def replayed(dev_replays: DevReplays) -> tuple[Path, dict[str, Any]]:
    home = dev_replays.home(16_000)
    runner = CliRunner()
    stats = runner.invoke(app, ["stats", "--json", "--home", str(home)])
    assert stats.exit_code == 0, stats.output
    return home, json.loads(stats.stdout)


NOOP_CALLS = """
WITH v AS (
  SELECT session_id, seq, CAST(payload->>'tier' AS INT) AS tier,
         lag(seq) OVER (PARTITION BY session_id ORDER BY seq) AS prev
  FROM events WHERE type = 'view_prepared'),
c AS (
  SELECT session_id, seq FROM events WHERE type = 'compaction_recorded'
    AND CAST(payload->'record'->>'tier' AS INT) > 0
    AND coalesce(CAST(payload->'record'->>'effective' AS BOOLEAN), true))
SELECT count(*) FROM v WHERE tier > 0 AND NOT EXISTS (
  SELECT 1 FROM c WHERE c.session_id = v.session_id AND c.seq < v.seq
    AND c.seq > coalesce(v.prev, -1))
"""
"""Every prepare that decided a tier and compacted nothing, from the raw events (replays make
no manual compactions): a session emits only the first no-op record of a run."""


def _sql(home: Path, sql: str) -> Any:
    with open_store(home, read_only=True) as store:
        return store.query(sql).row(0)


def test_counts_agree(replayed: tuple[Path, dict[str, Any]]) -> None:
    home, figures = replayed
    sessions, turns, total, noops, quarantined = _sql(
        home,
        # sessions and turns counted from the raw events, not from the projections stats reads
        f"""SELECT (SELECT count(DISTINCT session_id) FROM events
                     WHERE type = 'session_started' AND session_id NOT IN (
                       SELECT session_id FROM events WHERE type = 'session_deleted')),
                   (SELECT count(*) FROM events WHERE type = 'view_prepared'
                     AND session_id NOT IN (
                       SELECT session_id FROM events WHERE type = 'session_deleted')),
                   (SELECT count(*) {EFFECTIVE}),
                   ({NOOP_CALLS}),
                   (SELECT count(*) FROM quarantine)""",
    )
    assert sessions > 1000 and turns > 5000  # the whole dev set was replayed
    assert figures["sessions"] == sessions
    assert figures["turns"] == turns
    assert figures["compactions"]["total"] == total
    assert figures["compactions"]["noops"] == noops
    assert figures["quarantined"] == quarantined
    for tier, name in enumerate(("WARN", "SOFT", "FULL", "EMERGENCY"), start=1):
        (n,) = _sql(home, f"SELECT count(*) {EFFECTIVE} AND tier = {tier}")
        assert figures["compactions"]["by_tier"][name] == n, name


def test_compression_percentiles_and_savings_agree(replayed: tuple[Path, dict[str, Any]]) -> None:
    home, figures = replayed
    assert set(figures["compression"]) >= {"WARN", "SOFT", "FULL", "EMERGENCY"}
    for tier, name in enumerate(("WARN", "SOFT", "FULL", "EMERGENCY"), start=1):
        count, p50, p90, p99, saved = _sql(
            home,
            f"""SELECT count(*), quantile_cont(compression_ratio, 0.5),
                       quantile_cont(compression_ratio, 0.9),
                       quantile_cont(compression_ratio, 0.99),
                       CAST(sum(tokens_before - tokens_after) AS BIGINT)
                {EFFECTIVE} AND tier = {tier}""",
        )
        got = figures["compression"][name]
        assert got["count"] == count, name
        assert got["ratio_p50"] == pytest.approx(p50), name
        assert got["ratio_p90"] == pytest.approx(p90), name
        assert got["ratio_p99"] == pytest.approx(p99), name
        assert got["tokens_saved"] == saved, name


def test_emergencies_and_tokens_billed_agree(replayed: tuple[Path, dict[str, Any]]) -> None:
    home, figures = replayed
    truncations, offloads, emergencies, turns, billed, uncompacted = _sql(
        home,
        f"""SELECT (SELECT count(*) {EFFECTIVE} AND tier = 4 AND {TRUNCATION}),
                   (SELECT count(*) {EFFECTIVE} AND tier = 4 AND NOT {TRUNCATION}
                       AND (emergency = 'offload' OR n_offloaded > 0)),
                   (SELECT count(*) {EFFECTIVE} AND tier = 4),
                   (SELECT count(*) FROM turns WHERE {LIVE}),
                   (SELECT CAST(sum(tokens) AS BIGINT) FROM turns WHERE {LIVE}),
                   (SELECT CAST(sum(history_tokens) AS BIGINT) FROM turns WHERE {LIVE})""",
    )
    assert emergencies > 0
    assert figures["emergency"]["truncations"] == truncations
    assert figures["emergency"]["offload_only"] == offloads
    assert figures["emergency"]["per_100_turns"] == pytest.approx(emergencies * 100 / turns)
    (summarizer,) = _sql(
        home,
        f"""SELECT CAST(coalesce(sum(CASE
                WHEN coalesce(summarizer_input_tokens, 0) + coalesce(summarizer_output_tokens, 0)
                     > 0 OR summarizer_model <> 'extractive'
                THEN coalesce(summarizer_input_tokens, 0) + coalesce(summarizer_output_tokens, 0)
                ELSE (SELECT coalesce(sum(v.bytes), 0) FROM compaction_views v
                      WHERE v.compaction_id = c.id AND v.side = 'before'
                        AND v.status = 'summarized') // 4
                     + octet_length(encode(coalesce(summary_text, ''))) // 4 END), 0) AS BIGINT)
            FROM compactions c
            WHERE coalesce(effective, true) AND tier > 0 AND summarizer_model IS NOT NULL
              AND {LIVE}""",
    )
    assert summarizer > 0  # the offline summariser is billed as an LLM would have been
    assert figures["tokens"]["views"] == billed
    assert figures["tokens"]["summarizer"] == summarizer
    assert figures["tokens"]["billed"] == billed + summarizer
    assert figures["tokens"]["uncompacted"] == uncompacted
    # what truncations cut is not saved (issue 26): the share leaves it out
    cut, emergency_cut = _sql(
        home,
        CUT_SQL + "SELECT CAST(sum(cut) AS BIGINT), CAST(sum(emergency_cut) AS BIGINT) "
        f"FROM per_turn WHERE {LIVE}",
    )
    assert 0 < emergency_cut <= cut
    assert figures["tokens"]["cut"] == cut
    assert figures["emergency"]["cut_tokens"] == emergency_cut
    assert figures["tokens"]["saved"] == uncompacted - billed - summarizer - cut
    assert figures["tokens"]["saved_share"] == pytest.approx(
        1 - (billed + summarizer + cut) / uncompacted
    )
