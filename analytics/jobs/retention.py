"""Anchor retention at item level (issue 8, item 4): what each summary kept of the one before.

:func:`retention_detail` matches the ``anchor_items`` of each compaction to those of the one
before (see :mod:`analytics.jobs.anchor_matching`: normalised text, equal texts ``kept``, the
rest scored with rapidfuzz's ``token_sort_ratio``: >= 90 ``kept``, >= 60 ``changed``, else
``added``/``dropped``). Call it once and hand its result to :func:`anchor_survival`,
:func:`silent_drops` and :func:`intent_drift`; :func:`retention_items` is its SPEC 5.3 columns.
This module reads nothing and writes nothing: DataFrames in, DataFrames out.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from analytics.jobs.anchor_matching import (
    ANCHOR_ORDER,
    CHANGED_SIMILARITY,
    KEPT_SIMILARITY,
    match_anchor_items,
    similarities,
)
from analytics.jobs.common import deleted_ids, is_effective, tier_name

__all__ = [
    "CHANGED_SIMILARITY",
    "DROP_REASON_COLUMNS",
    "ITEM_COLUMNS",
    "KEPT_SIMILARITY",
    "SILENT_DROP_COLUMNS",
    "WATCHED_TYPES",
    "anchor_survival",
    "intent_drift",
    "retention_detail",
    "retention_items",
    "silent_drops",
]

WATCHED_TYPES = ("user_intent", "key_decision")
"""Anchor types whose unreplaced drops are reported as silent drops."""

ITEM_COLUMNS = (
    "session_id",
    "compaction_id",
    "compaction_seq",
    "anchor_type",
    "item",
    "status",
    "similarity",
)
"""The columns of :func:`retention_items` (SPEC 5.3 ``retention --json`` items)."""
SILENT_DROP_COLUMNS = ("session_id", "anchor_type", "item", "introduced_at", "dropped_at")
DROP_REASON_COLUMNS = ("reason", "age", "dropped_turn", "dropped_tier", "introduced_turn")
"""What ``silent_drops`` adds: why (``cap``: the summary held as many items of that type as
before and took a new one in its place, the summariser's own cap at work; ``age``: the item
had lasted ``AGE_COMPACTIONS`` compactions or more; ``unknown``), the item's age in
compactions, and the compactions by turn and tier."""
AGE_COMPACTIONS = 3


def retention_detail(
    anchor_items: pl.DataFrame,
    compactions: pl.DataFrame | None = None,
    sessions: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """:data:`ITEM_COLUMNS` plus ``item_norm``, ``introduced_at`` (compaction id where the item's
    kept/changed chain began), ``reaches_last`` (that chain is present in the session's last
    compaction) and ``last_compaction`` (the row's compaction is its session's last): the input
    of :func:`anchor_survival`, :func:`silent_drops` and :func:`intent_drift`. Rows are in
    session, compaction, anchor type and position order, dropped rows after the others.
    Given ``compactions``/``sessions``, items of no-op compactions (``effective`` false) and
    of deleted sessions (``deleted_at`` set) are left out first."""
    return match_anchor_items(anchor_items, _counted(compactions, sessions))


def retention_items(
    anchor_items: pl.DataFrame,
    compactions: pl.DataFrame | None = None,
    sessions: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per item per compaction with its status (SPEC 5.3 ``items``)."""
    return retention_detail(anchor_items, compactions, sessions).select(ITEM_COLUMNS)


def _counted(compactions: pl.DataFrame | None, sessions: pl.DataFrame | None) -> pl.Expr | None:
    """The predicate on item rows: of an effective compaction, of a live session (when those
    frames are given); None when it would keep every row. Folded into the matching's first pass,
    so that no filtered copy of the items is made."""
    keep = []
    if compactions is not None:
        noops = compactions.filter(~is_effective())["id"].cast(pl.String)
        if noops.len():  # a filter on a set: cheaper than an anti-join over every item
            keep.append(~pl.col("compaction_id").is_in(noops.implode()))
    deleted = deleted_ids(sessions) if sessions is not None else None
    if deleted is not None and deleted.len():
        keep.append(~pl.col("session_id").is_in(deleted.implode()))
    return pl.all_horizontal(keep) if keep else None


def _share(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    return pl.when(denominator > 0).then(numerator / denominator)


def anchor_survival(detail: pl.DataFrame) -> pl.DataFrame:
    """Per anchor type (from :func:`retention_detail`): ``survival_next``, the share of the items
    of a compaction k kept or changed in k+1 (over every k that has a next); ``survival_last``,
    the share of the items ever introduced (added) before a session's last compaction whose
    kept/changed chain is still present in that last compaction. Null when nothing to count."""
    counts = detail.group_by("anchor_type").agg(
        items_next=((pl.col("status") != "dropped") & ~pl.col("last_compaction")).sum(),
        dropped=(pl.col("status") == "dropped").sum(),
        items_ever=((pl.col("status") == "added") & ~pl.col("last_compaction")).sum(),
        reached=(
            (pl.col("status") == "added") & ~pl.col("last_compaction") & pl.col("reaches_last")
        ).sum(),
    )
    order = pl.DataFrame({"anchor_type": ANCHOR_ORDER, "order": range(len(ANCHOR_ORDER))})
    return (
        counts.join(order, on="anchor_type", how="left")
        .sort("order", "anchor_type", nulls_last=True)
        .select(
            pl.col("anchor_type").cast(pl.String),
            pl.col("items_next").cast(pl.Int64),
            survival_next=_share(pl.col("items_next") - pl.col("dropped"), pl.col("items_next")),
            items_ever=pl.col("items_ever").cast(pl.Int64),
            survival_last=_share(pl.col("reached"), pl.col("items_ever")),
        )
        .cast({"survival_next": pl.Float64, "survival_last": pl.Float64})
    )


def silent_drops(
    detail: pl.DataFrame,
    compactions: pl.DataFrame | None = None,
    turns: pl.DataFrame | None = None,
    *,
    model_calls: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Dropped ``user_intent``/``key_decision`` items (from :func:`retention_detail`) that no item
    of the same session and anchor type at that or any later compaction resembles (similarity
    >= 60): :data:`SILENT_DROP_COLUMNS` (compaction ids), then :data:`DROP_REASON_COLUMNS`
    (turn and tier where ``compactions`` and ``turns`` are given; an imported session has no
    turns: its compactions' turns come from ``model_calls``, the seq of each assistant
    message)."""
    drops = (
        detail.filter((pl.col("status") == "dropped") & pl.col("anchor_type").is_in(WATCHED_TYPES))
        .select(
            "session_id",
            "anchor_type",
            "item",
            "item_norm",
            "introduced_at",
            dropped_at="compaction_id",
            dropped_seq="compaction_seq",
        )
        .with_row_index("drop")
    )
    later = (
        detail.filter((pl.col("status") != "dropped") & pl.col("anchor_type").is_in(WATCHED_TYPES))
        .join(drops.select("session_id", "anchor_type").unique(), on=["session_id", "anchor_type"])
        .group_by("session_id", "anchor_type", "item_norm")
        .agg(last_seq=pl.col("compaction_seq").max())
    )
    pairs = drops.join(later, on=["session_id", "anchor_type"], suffix="_later").filter(
        pl.col("last_seq") >= pl.col("dropped_seq")
    )
    pairs = pairs.with_columns(similarities(pairs["item_norm"], pairs["item_norm_later"]))
    replaced = pairs.filter(pl.col("similarity") >= CHANGED_SIMILARITY).select("drop").unique()
    silent = drops.join(replaced, on="drop", how="anti").sort("drop")
    reasons = _drop_reasons(detail, silent, compactions, turns, model_calls)
    return (
        silent.select(SILENT_DROP_COLUMNS)
        .cast(dict.fromkeys(SILENT_DROP_COLUMNS, pl.String))
        .hstack(reasons)
    )


def _drop_reasons(
    detail: pl.DataFrame,
    silent: pl.DataFrame,
    compactions: pl.DataFrame | None,
    turns: pl.DataFrame | None,
    model_calls: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """:data:`DROP_REASON_COLUMNS` for each row of ``silent``, in its order. "cap" is offered
    only for our own compactions (a harness's summary has no cap we know of)."""
    present = detail.filter(pl.col("status") != "dropped")
    index = (
        present.select("session_id", "compaction_id", "compaction_seq")
        .unique()
        .sort("session_id", "compaction_seq")
        .with_columns(ordinal=pl.int_range(pl.len()).over("session_id"))
    )
    counts = present.group_by("compaction_id", "anchor_type").agg(
        n=pl.len(), added=(pl.col("status") == "added").sum()
    )
    ordinal = index.select("compaction_id", "ordinal")
    at_drop = silent.join(
        ordinal.rename({"compaction_id": "dropped_at"}), on="dropped_at", how="left"
    ).join(
        ordinal.rename({"compaction_id": "introduced_at", "ordinal": "born"}),
        on="introduced_at",
        how="left",
    )
    before = index.select(
        "session_id",
        (pl.col("ordinal") + 1).alias("ordinal"),
        pl.col("compaction_id").alias("prev"),
    )
    at_drop = (
        at_drop.join(before, on=["session_id", "ordinal"], how="left")
        .join(
            counts.rename({"compaction_id": "dropped_at"}),
            on=["dropped_at", "anchor_type"],
            how="left",
        )
        .join(
            counts.select(pl.col("compaction_id").alias("prev"), "anchor_type", n_prev="n"),
            on=["prev", "anchor_type"],
            how="left",
        )
        .sort("drop")
    )
    age = (pl.col("ordinal") - pl.col("born")).cast(pl.Int64)
    capped = (
        (pl.col("added").fill_null(0) > 0)
        & (pl.col("n").fill_null(0) >= pl.col("n_prev").fill_null(0))
        & ~pl.col("dropped_at").is_in(_harness_ids(compactions).implode())
    )
    out = at_drop.select(
        pl.when(capped)
        .then(pl.lit("cap"))
        .when(age >= AGE_COMPACTIONS)
        .then(pl.lit("age"))
        .otherwise(pl.lit("unknown"))
        .alias("reason"),
        age.alias("age"),
        "dropped_at",
        "introduced_at",
    )
    where = _compaction_turns(compactions, turns, model_calls)
    out = out.join(
        where.rename(
            {"compaction_id": "dropped_at", "turn": "dropped_turn", "tier": "dropped_tier"}
        ),
        on="dropped_at",
        how="left",
        maintain_order="left",
    ).join(
        where.select(pl.col("compaction_id").alias("introduced_at"), introduced_turn="turn"),
        on="introduced_at",
        how="left",
        maintain_order="left",
    )
    return out.select(
        "reason",
        "age",
        pl.col("dropped_turn").cast(pl.Int64),
        pl.col("dropped_tier").cast(pl.String),
        pl.col("introduced_turn").cast(pl.Int64),
    )


def _harness_ids(compactions: pl.DataFrame | None) -> pl.Series:
    """The ids of the compactions a harness made (imported), not our compactor."""
    if compactions is None or "origin" not in compactions.columns:
        return pl.Series([], dtype=pl.String)
    native = compactions.filter(pl.col("origin") == "native")
    return native["id"].cast(pl.String)


def _compaction_turns(
    compactions: pl.DataFrame | None,
    turns: pl.DataFrame | None,
    model_calls: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """compaction_id, turn (the first turn its session prepared after it; in a session with no
    turns, the model call after it: 1 + the assistant messages before it), tier name."""
    schema = {"compaction_id": pl.String, "turn": pl.Int64, "tier": pl.String}
    if compactions is None or compactions.is_empty():
        return pl.DataFrame(schema=schema)
    records = compactions.select(
        pl.col("id").cast(pl.String).alias("compaction_id"),
        pl.col("session_id").cast(pl.String),
        pl.col("seq").cast(pl.Int64).alias("c_seq"),
        tier_name("tier").alias("tier"),
    )
    marks = (
        pl.DataFrame(schema={"session_id": pl.String, "seq": pl.Int64, "turn": pl.Int64})
        if turns is None
        else turns.select(pl.col("session_id").cast(pl.String), "seq", "turn")
    )
    if model_calls is not None and not model_calls.is_empty():
        calls = model_calls.join(marks, on="session_id", how="anti").select(
            pl.col("session_id").cast(pl.String),
            pl.col("seq").cast(pl.Int64),
            (pl.int_range(pl.len()).over("session_id", order_by="seq") + 1).alias("turn"),
        )
        marks = pl.concat([marks.cast({"seq": pl.Int64, "turn": pl.Int64}), calls])
    after = (
        records.join(marks, on="session_id")
        .filter(pl.col("seq") > pl.col("c_seq"))
        .sort("seq")
        .group_by("compaction_id")
        .agg(pl.col("turn").first())
    )
    return records.join(after, on="compaction_id", how="left").select(
        "compaction_id", pl.col("turn").cast(pl.Int64), "tier"
    )


def intent_drift(detail: pl.DataFrame) -> pl.DataFrame:
    """Per session and compaction with a user intent (from :func:`retention_detail`): its intent
    (normalised items joined by a space, in anchor order) and its similarity 0..100 to the
    session's first intent."""
    items = detail.filter(
        (pl.col("status") != "dropped") & (pl.col("anchor_type") == "user_intent")
    ).with_columns(g=pl.col("compaction_id").rle_id())  # the detail is in compaction order
    intents = items.group_by("g", maintain_order=True).agg(
        pl.col("compaction_id", "session_id", "compaction_seq").first(),
        n=pl.len(),
        intent=pl.col("item_norm").first(),
    )
    if (intents["n"] > 1).any():  # joining strings in groups is slow: only where needed
        joined = (
            items.join(
                intents.filter(pl.col("n") > 1).select("g"),
                on="g",
                how="semi",
                maintain_order="left",
            )
            .group_by("g")
            .agg(joined=pl.col("item_norm").str.join(" "))
        )
        intents = intents.join(joined, on="g", how="left", maintain_order="left").with_columns(
            intent=pl.coalesce("joined", "intent")
        )
    intents = intents.with_columns(
        first=pl.col("intent").first().over("session_id")
    ).with_row_index("i")
    # an unchanged intent is 100 without scoring it
    moved = intents.filter(pl.col("intent") != pl.col("first"))
    score = np.full(intents.height, 100.0)
    score[moved["i"].to_numpy()] = similarities(moved["intent"], moved["first"]).to_numpy()
    return intents.select(
        pl.col("session_id").cast(pl.String),
        pl.col("compaction_id").cast(pl.String),
        pl.col("compaction_seq").cast(pl.Int64),
        pl.col("intent").cast(pl.String),
        similarity=pl.Series(score, dtype=pl.Float64),
    )
