"""What the issue-8 jobs share: conforming an input frame to the columns a job reads, dropping
deleted sessions, and naming tiers.

Every job receives frames shaped like the store's tables (see the jobs contract); these helpers
make a job's first step the same everywhere: keep only the columns it reads, with the dtypes it
expects, so that an empty or partly-null frame still flows through and yields an empty result
with the right columns. They do no I/O and know nothing about DuckDB.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from compactor import ByteEstimator, CompactionTier

BYTES_PER_TOKEN = ByteEstimator.bytes_per_token
"""The default estimator's bytes per token (SPEC 3.1 ``estimate_tokens``): the one definition
every job, replay and strategy divides by."""

TIER_NAMES: dict[int, str] = {tier.value: tier.name for tier in CompactionTier}
"""Tier number → the CompactionTier name used in every job output ("WARN", …)."""


def conform(frame: pl.DataFrame, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """Select ``schema``'s columns from ``frame`` cast to their dtypes; a column the frame lacks
    (an older store, a hand-built test frame) comes back as nulls of that dtype."""
    present = set(frame.columns)
    return frame.select(
        pl.col(name).cast(dtype) if name in present else pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in schema.items()
    )


def deleted_ids(sessions: pl.DataFrame) -> pl.Series:
    """The ids of the sessions marked deleted (``deleted_at`` not null); usually empty."""
    if "deleted_at" not in sessions.columns:
        return pl.Series("session_id", [], dtype=pl.String)
    return sessions.filter(pl.col("deleted_at").is_not_null())["session_id"].cast(pl.String)


def drop_deleted(frame: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """``frame`` without the rows of sessions marked deleted (``deleted_at`` not null). Rows of
    sessions absent from ``sessions`` are kept: the store may be mid-projection."""
    deleted = deleted_ids(sessions)
    if deleted.is_empty():  # the usual case: no pass over the frame at all
        return frame
    return frame.filter(~pl.col("session_id").is_in(deleted.implode()).fill_null(False))


def in_session_order(frame: pl.DataFrame, by: str = "seq") -> pl.DataFrame:
    """``frame`` sorted by session_id then ``by`` (nulls last). Frames read from the store come
    in that order already: a check over the rows is then all it costs, not a sort of them."""
    session, key = pl.col("session_id"), pl.col(by)
    after = (session < session.shift(-1)) | (
        (session == session.shift(-1)) & (key <= key.shift(-1))
    )
    ordered = frame.select(
        after.fill_null(True).all() & session.is_not_null().all() & key.is_not_null().all()
    ).item()
    return frame if ordered else frame.sort("session_id", by, nulls_last=True)


def live_sessions(sessions: pl.DataFrame) -> pl.DataFrame:
    """The sessions not marked deleted, all columns kept."""
    if "deleted_at" not in sessions.columns:
        return sessions
    return sessions.filter(pl.col("deleted_at").is_null())


def tier_name(column: str = "tier") -> pl.Expr:
    """The CompactionTier name of the integer tier in ``column`` (null for unknown numbers)."""
    return pl.col(column).replace_strict(TIER_NAMES, default=None, return_dtype=pl.String)


def is_effective() -> pl.Expr:
    """A compaction that changed the view. A null ``effective`` (records written before the
    flag existed, e.g. harness9's) counts as effective: every job reads it the same way."""
    return pl.col("effective").fill_null(True)
