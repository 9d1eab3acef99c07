"""The prompt-cache model against what the providers reported (issue 18 item 3).

The dev transcripts are replayed with a window nothing reaches, so every view is the prompt the
agent really sent; the costs job's predicted cache reads are compared, turn by turn where the
transcript reported a cache read, with the reads the transcripts' own usage records (read here
from the imported sessions, not from the job): within 10% in aggregate per provider family,
within 25% for at least 80% of sessions. Families: Claude Code (Anthropic, explicit
breakpoints) and mini-swe-agent on DeepSeek (automatic caching in 64-token units); aider ran
without prompt caching (0 reads on almost every call) and says nothing about the model.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from analytics.importers import ImportedSession, import_path
from analytics.jobs.costs import turn_costs
from analytics.queries import frames
from analytics.queries.materialize import refresh
from analytics.store import open_store
from analytics.tuning.cachecheck import (
    CACHING_FAMILIES,
    compare_reads,
    family_ratios,
    reported_cache_reads,
)
from tests.analytics.replayed import DevReplays
from tests.transcripts import DEV, TRANSCRIPTS

WINDOW = 100_000_000

pytestmark = pytest.mark.skipif(not DEV, reason=f"the dev transcripts are not at {TRANSCRIPTS}")


@pytest.fixture(scope="module")
def compared(dev_replays: DevReplays) -> pl.DataFrame:
    home = dev_replays.home(WINDOW)
    imported: list[ImportedSession] = []
    for folder in DEV:
        found, _issues = import_path(folder)
        imported += [s for s in found if s.agent in CACHING_FAMILIES]
    with open_store(home) as store:
        refresh(store)
        costs = frames.turn_costs_frame(store)
        sessions = frames.sessions_frame(store)
    return compare_reads(costs, sessions, reported_cache_reads(imported))


def test_every_family_is_priced_under_its_providers_profile(compared: pl.DataFrame) -> None:
    profiles = dict(compared.select("agent", "profile").unique().iter_rows())
    assert profiles == CACHING_FAMILIES


def test_predicted_cache_reads_match_the_reported_ones_within_10_percent_per_family(
    compared: pl.DataFrame,
) -> None:
    ratios = family_ratios(compared)
    assert set(ratios["agent"]) == set(CACHING_FAMILIES)
    for row in ratios.iter_rows(named=True):
        assert row["turns"] >= 50 and row["reported"] > 1_000_000, row
        assert abs(row["ratio"] - 1) <= 0.10, row


def test_predicted_cache_reads_are_within_25_percent_for_80_percent_of_sessions(
    compared: pl.DataFrame,
) -> None:
    per = (
        compared.group_by("imported")
        .agg(pl.col("cache_read_tokens").sum(), pl.col("reported").sum())
        .filter(pl.col("reported") > 0)
        .with_columns(ratio=pl.col("cache_read_tokens") / pl.col("reported"))
    )
    close = per.filter((pl.col("ratio") - 1).abs() <= 0.25)
    assert per.height >= 15
    assert close.height >= 0.8 * per.height, per.sort("ratio")


def test_pricing_the_same_replays_twice_gives_identical_costs(
    dev_replays: DevReplays,
) -> None:
    home: Path = dev_replays.home(WINDOW)
    with open_store(home) as store:
        refresh(store)
        stored = frames.turn_costs_frame(store)
        inputs = (
            frames.turns_frame(store),
            frames.messages_frame(store),
            frames.views_frame(store),
            frames.compactions_frame(store),
            frames.sessions_frame(store),
            frames.usage_frame(store),
        )
    first, second = turn_costs(*inputs), turn_costs(*inputs)
    assert stored.height > 1000 and stored["cost"].sum() > 0
    assert first.equals(second)
    assert first.select(stored.columns).equals(stored)


def _store_usage(home: Path) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    with open_store(home) as store:
        refresh(store)
        return (
            store.query(
                """SELECT u.session_id, u.turn, u.history_messages, u.cache_read_tokens,
                          s.agent
                   FROM usage u JOIN sessions s USING (session_id)"""
            ),
            frames.turns_frame(store),
            frames.turn_costs_frame(store),
        )


def test_every_usage_row_names_the_turn_it_reports_on(dev_replays: DevReplays) -> None:
    """``usage.turn`` is a ``turns.turn`` of its session, the one whose prepared view the
    report describes: the history then had as many messages as the report says."""
    usage, turns, _costs = _store_usage(dev_replays.home(WINDOW))
    joined = usage.join(
        turns.select("session_id", "turn", pl.col("history_messages").alias("at_turn")),
        on=["session_id", "turn"],
        how="left",
    )
    assert usage.height > 1000
    assert joined.height == usage.height  # one turn row per report, never two
    assert joined.filter(pl.col("at_turn").is_null()).is_empty()
    assert (joined["at_turn"] == joined["history_messages"]).all()


def test_store_joined_cache_reads_match_the_reported_ones_within_10_percent_per_family(
    dev_replays: DevReplays,
) -> None:
    """As anyone querying the store would: the costs job's predicted reads joined to the
    ``usage`` table on (session_id, turn), summed per family, against the reported reads."""
    usage, _turns, costs = _store_usage(dev_replays.home(WINDOW))
    joined = costs.select("session_id", "turn", "cache_read_tokens").join(
        usage.filter(pl.col("cache_read_tokens").is_not_null()).select(
            "session_id", "turn", "agent", pl.col("cache_read_tokens").alias("reported")
        ),
        on=["session_id", "turn"],
    )
    per = joined.group_by("agent").agg(
        pl.len().alias("turns"), pl.col("cache_read_tokens").sum(), pl.col("reported").sum()
    )
    assert set(per["agent"]) >= set(CACHING_FAMILIES)
    for row in per.filter(pl.col("agent").is_in(list(CACHING_FAMILIES))).iter_rows(named=True):
        assert row["turns"] >= 50 and row["reported"] > 1_000_000, row
        assert abs(row["cache_read_tokens"] / row["reported"] - 1) <= 0.10, row
