"""Estimator calibration (issue 8, job 7): how far the compactor's token estimates are from what
the provider reported, per model and prompt kind, and how much CJK text each session carries
(CJK text packs more tokens per byte, the usual reason an estimate runs low).

Inputs are the store's ``usage`` rows (estimated vs reported input tokens), ``messages`` (their
``content``, for the CJK share) and ``sessions`` (deleted ones ignored; the session's model when
a usage row has none). Per report, ``reported / estimated`` is the *ratio*:

- bias = mean(ratio - 1) (positive: the estimator under-counts);
- spread = standard deviation of the ratio (sample, null with one report);
- learned_factor = median(reported / raw_estimated_tokens), the factor a session's calibration
  would learn from bytes/4.

Reports without a positive estimate or without a reported count are left out. This module does
no I/O and does not change the estimator.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from analytics.jobs.common import conform, drop_deleted, live_sessions

CJK_PATTERN = (
    r"[\x{1100}-\x{11FF}\x{2E80}-\x{2FDF}\x{3000}-\x{303F}\x{3040}-\x{30FF}\x{3100}-\x{31FF}"
    r"\x{3400}-\x{4DBF}\x{4E00}-\x{9FFF}\x{A960}-\x{A97F}\x{AC00}-\x{D7FF}\x{F900}-\x{FAFF}"
    r"\x{FE30}-\x{FE4F}\x{FF00}-\x{FFEF}\x{20000}-\x{3134F}]"
)
"""Code points counted as CJK: Hangul Jamo and syllables, CJK radicals, symbols and punctuation,
kana, bopomofo, unified and compatibility ideographs (with extensions A–G), CJK compatibility
forms and half/full-width forms."""

_USAGE = {
    "session_id": pl.String(),
    "model": pl.String(),
    "prompt": pl.String(),
    "estimated_input_tokens": pl.Int64(),
    "raw_estimated_tokens": pl.Int64(),
    "input_tokens": pl.Int64(),
}
_MESSAGES = {"session_id": pl.String(), "content": pl.String()}


def estimator_calibration(
    usage: pl.DataFrame, sessions: pl.DataFrame, by: Sequence[str] = ("model", "prompt")
) -> pl.DataFrame:
    """One row per group of ``by`` (model and prompt kind by default; ("model",) for per-model
    figures): the ``by`` columns, reports, bias, spread, learned_factor (see the module text).
    The model is the usage row's, else the session's."""
    models = conform(live_sessions(sessions), {"session_id": pl.String(), "model": pl.String()})
    frame = (
        drop_deleted(conform(usage, _USAGE), sessions)
        .join(models.unique("session_id"), on="session_id", how="left", suffix="_session")
        .with_columns(model=pl.coalesce("model", "model_session"))
        .filter((pl.col("estimated_input_tokens") > 0) & pl.col("input_tokens").is_not_null())
    )
    ratio = pl.col("input_tokens") / pl.col("estimated_input_tokens")
    raw = pl.when(pl.col("raw_estimated_tokens") > 0).then(
        pl.col("input_tokens") / pl.col("raw_estimated_tokens")
    )
    return (
        frame.group_by(*by)
        .agg(
            reports=pl.len().cast(pl.Int64),
            bias=(ratio - 1).mean(),
            spread=ratio.std(),
            learned_factor=raw.median(),
        )
        .sort(*by, nulls_last=True)
    )


def cjk_share(messages: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """One row per live session (and per session seen only in ``messages``): session_id,
    characters (non-whitespace characters of all content), cjk_characters, cjk_share
    (cjk/characters; null when the session has no content, e.g. metadata capture)."""
    known = conform(live_sessions(sessions), {"session_id": pl.String()})
    frame = drop_deleted(conform(messages, _MESSAGES), sessions)
    counts = frame.group_by("session_id").agg(
        characters=pl.col("content").str.count_matches(r"\S").sum().cast(pl.Int64),
        cjk_characters=pl.col("content").str.count_matches(CJK_PATTERN).sum().cast(pl.Int64),
    )
    base = pl.concat([known, frame.select("session_id")]).unique()
    return (
        base.join(counts, on="session_id", how="left")
        .with_columns(pl.col("characters", "cjk_characters").fill_null(0))
        .with_columns(
            cjk_share=pl.when(pl.col("characters") > 0).then(
                pl.col("cjk_characters") / pl.col("characters")
            )
        )
        .sort("session_id")
    )
