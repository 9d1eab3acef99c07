"""The prompt-cache model checked against what providers reported (issue 18 item 3).

``reported_cache_reads`` reads the cache reads the transcripts' own usage recorded, turn by
turn, from imported sessions (never from the costs job); ``compare_reads`` joins them with the
job's predictions of a replay whose window nothing reached (so every view was the prompt really
sent) and ``family_ratios`` sums both per family. The reality test and ``bench/cache_model.py``
use these; nothing here replays or opens a store.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from analytics.importers import ImportedSession

CACHING_FAMILIES = {"claude-code": "anthropic", "mini-swe-agent": "deepseek"}
"""Agents whose transcripts report prompt-cache reads, and the profile their model gets. aider
ran without prompt caching (no reads on almost every call), so it checks nothing."""
REPLAY_ID = r"@\d+#[0-9a-f]+$"
"""What a replay appends to the imported session id (``@<window>#<config hash>``)."""


def reported_cache_reads(sessions: Iterable[ImportedSession]) -> pl.DataFrame:
    """(imported session id, turn number from 1, reported cache read) of every turn whose
    usage reports a cache read."""
    rows = [
        {"imported": s.session_id, "turn": n, "reported": usage.cache_read_tokens}
        for s in sessions
        for n, index in enumerate(s.turns, start=1)
        if (usage := s.usage_at(index)) is not None and usage.cache_read_tokens is not None
    ]
    schema = {"imported": pl.String, "turn": pl.Int64, "reported": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def compare_reads(
    costs: pl.DataFrame, sessions: pl.DataFrame, reported: pl.DataFrame
) -> pl.DataFrame:
    """The costs job's rows (``turn_costs_frame``) of the caching families' sessions joined
    with ``reported`` on (imported session, turn): agent, profile, imported, turn,
    cache_read_tokens (predicted), reported."""
    agents = sessions.select("session_id", "agent")
    return (
        costs.join(agents, on="session_id")
        .filter(pl.col("agent").is_in(list(CACHING_FAMILIES)))
        .with_columns(imported=pl.col("session_id").str.replace(REPLAY_ID, ""))
        .select("agent", "profile", "imported", "turn", "cache_read_tokens")
        .join(reported, on=["imported", "turn"], how="inner")
    )


def family_ratios(compared: pl.DataFrame) -> pl.DataFrame:
    """Per agent: sessions, turns, predicted and reported reads, ratio (predicted/reported),
    and the share of sessions whose own ratio is within 25%."""
    per_session = (
        compared.group_by("agent", "imported")
        .agg(pl.col("cache_read_tokens").sum(), pl.col("reported").sum())
        .filter(pl.col("reported") > 0)
        .with_columns(close=((pl.col("cache_read_tokens") / pl.col("reported")) - 1).abs() <= 0.25)
        .group_by("agent")
        .agg(sessions=pl.len(), sessions_within_25pct=pl.col("close").mean())
    )
    return (
        compared.group_by("agent")
        .agg(
            turns=pl.len(),
            predicted=pl.col("cache_read_tokens").sum(),
            reported=pl.col("reported").sum(),
        )
        .with_columns(ratio=pl.col("predicted") / pl.col("reported"))
        .join(per_session, on="agent", how="left")
        .sort("agent")
    )
