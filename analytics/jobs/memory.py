"""How fast memory fades: survival of anchor items by the number of compactions they went
through (issue 31, item 4).

From ``retention_detail`` rows (one per item per compaction, ``introduced_at`` naming the
compaction where the item's kept/changed chain began): an item introduced at a session's i-th
compaction (counting the compactions that carry anchors) *went through* k compactions when the
session has a compaction i + k; it *survived* them when its chain is still present there
(kept or changed). The survivors of k compactions are the chains (``chain``) with a row k
compactions after their start. ``items`` and ``survived`` for k = 1, 2, … make the curve; a
session with one compaction adds nothing. Pure: frame in, frame out.
"""

from __future__ import annotations

import polars as pl

SURVIVAL_COLUMNS: dict[str, pl.DataType] = {
    "anchor_type": pl.String(),
    "compactions": pl.Int64(),
    "items": pl.Int64(),
    "survived": pl.Int64(),
}


def survival_by_compactions(detail: pl.DataFrame, *, by_type: bool = False) -> pl.DataFrame:
    """``SURVIVAL_COLUMNS`` rows, k ascending (per anchor type with ``by_type``, else one
    curve with ``anchor_type`` null)."""
    if detail.is_empty():
        return pl.DataFrame(schema=SURVIVAL_COLUMNS)
    order = (
        detail.select("session_id", "compaction_id", "compaction_seq")
        .unique()
        .with_columns(
            index=pl.col("compaction_seq").rank("dense").over("session_id").cast(pl.Int64) - 1,
            last=pl.col("compaction_seq")
            .rank("dense")
            .over("session_id")
            .max()
            .over("session_id")
            .cast(pl.Int64)
            - 1,
        )
    )
    where = order.select("compaction_id", "index", "last")
    rows = (
        detail.join(where, on="compaction_id", how="left")
        .join(
            where.select("compaction_id", start="index"),
            left_on="introduced_at",
            right_on="compaction_id",
            how="left",
        )
        .with_columns(age=pl.col("index") - pl.col("start"))
    )
    keys = ["anchor_type"] if by_type else []
    added = rows.filter(pl.col("status") == "added").with_columns(
        faced=pl.col("last") - pl.col("index")
    )
    alive = rows.filter(pl.col("status").is_in(["kept", "changed"]) & (pl.col("age") > 0))
    horizon = int(added.select(pl.col("faced").max().fill_null(0)).item()) if added.height else 0
    if horizon < 1:
        return pl.DataFrame(schema=SURVIVAL_COLUMNS)
    ks = pl.DataFrame(
        {"compactions": list(range(1, horizon + 1))}, schema={"compactions": pl.Int64}
    )
    went = (
        added.join(ks, how="cross")
        .filter(pl.col("faced") >= pl.col("compactions"))
        .group_by(*keys, "compactions")
        .agg(items=pl.struct("session_id", "chain").n_unique().cast(pl.Int64))
    )
    kept = (
        alive.rename({"age": "compactions"})
        .group_by(*keys, "compactions")
        .agg(survived=pl.struct("session_id", "chain").n_unique().cast(pl.Int64))
    )
    out = went.join(kept, on=[*keys, "compactions"], how="left").with_columns(
        pl.col("survived").fill_null(0)
    )
    if not by_type:
        out = out.with_columns(anchor_type=pl.lit(None, dtype=pl.String))
    return out.select(list(SURVIVAL_COLUMNS)).sort("anchor_type", "compactions", nulls_last=True)
