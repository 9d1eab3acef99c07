"""Matching the anchor items of each compaction to those of the one before (issue 8, item 4).

Within a session the compactions that have items are ordered by ``seq``; the items of compaction
k+1 are matched to those of k per anchor type on normalised text (lowercased, whitespace
collapsed, bullets and punctuation stripped at both ends). Equal normalised texts are ``kept``
with similarity 100 through an integer-key join (64-bit hashes of the text); only the leftovers
are scored, in bulk, with rapidfuzz's ``token_sort_ratio`` (word order does not matter): the
best match >= 90 is ``kept``, >= 60 ``changed``, else the item of k+1 is ``added``; an item of k
with no match >= 60 in k+1 is ``dropped`` at k+1. The first compaction's items are ``added``.
Matching is best-match, not one-to-one (two items merged into one both count as matched).
Following each item's kept/changed links back (pointer jumping over dense row ids) gives where
it was introduced and whether it reaches the session's last compaction.

Everything heavy runs on integer columns; strings are gathered once, at the end. The job
functions built on this are in :mod:`analytics.jobs.retention`. No I/O.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from rapidfuzz import fuzz, process

from compactor import AnchorType

KEPT_SIMILARITY = 90.0
CHANGED_SIMILARITY = 60.0
ANCHOR_ORDER = tuple(t.value for t in AnchorType)
_GOLDEN = 0x9E3779B97F4A7C15
_STATUSES = ("added", "changed", "kept", "dropped")
_ADDED, _CHANGED, _KEPT, _DROPPED = range(4)
_STRIP = " \t\r\n-*•·+>.,;:!?\"'`()[]{}"
_INPUT_SCHEMA = {
    "session_id": pl.String,
    "compaction_id": pl.String,
    "seq": pl.Int64,
    "anchor_type": pl.String,
    "position": pl.Int64,
    "item": pl.String,
}
_DETAIL_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "session_id": pl.String,
    "compaction_id": pl.String,
    "compaction_seq": pl.Int64,
    "anchor_type": pl.String,
    "item": pl.String,
    "status": pl.String,
    "similarity": pl.Float64,
    "item_norm": pl.String,
    "introduced_at": pl.String,
    "reaches_last": pl.Boolean,
    "last_compaction": pl.Boolean,
}


def normalise_item(text: pl.Expr) -> pl.Expr:
    """Casefolded, whitespace collapsed, bullets and punctuation stripped at both ends."""
    lower = text.str.to_lowercase()
    # the regex only where there is something to collapse: most items have single spaces
    collapsed = (
        pl.when(lower.str.contains(r"\s\s|[\t\n\r\f\v]"))
        .then(lower.str.replace_all(r"\s+", " "))
        .otherwise(lower)
    )
    return collapsed.str.strip_chars(_STRIP)


def similarities(left: pl.Series, right: pl.Series) -> pl.Series:
    """0..100 similarity of each pair (left[i], right[i]), computed in bulk by rapidfuzz."""
    return _scores(left.fill_null("").to_numpy(), right.fill_null("").to_numpy())


def _scores(left: np.ndarray, right: np.ndarray) -> pl.Series:
    if len(left) == 0:
        return pl.Series("similarity", [], dtype=pl.Float64)
    scores = process.cpdist(left, right, scorer=fuzz.token_sort_ratio, dtype=np.float64, workers=-1)
    return pl.Series("similarity", scores, dtype=pl.Float64)


def _base(anchor_items: pl.DataFrame) -> pl.DataFrame:
    """The usable input rows (ids present, non-empty normalised text) with a row number."""
    return (
        anchor_items.lazy()
        .select(pl.col(c).cast(t) for c, t in _INPUT_SCHEMA.items())
        .with_columns(item_norm=normalise_item(pl.col("item")))
        .filter(
            pl.col("session_id").is_not_null()
            & pl.col("compaction_id").is_not_null()
            & pl.col("item_norm").is_not_null()
            & (pl.col("item_norm") != "")
        )
        .with_row_index("row")
        .with_columns(cid_h=pl.col("compaction_id").hash())
        .collect()
    )


def _compactions(base: pl.DataFrame) -> pl.DataFrame:
    """One row per compaction: its index ``ci`` (the row number; consecutive within a session, in
    ``seq`` order), whether it is its session's first/last, and ``cid_h`` (its id's hash)."""
    return (
        base.lazy()
        .select("cid_h", "compaction_id", "session_id", "seq")
        .filter(pl.col("cid_h").is_first_distinct())
        .sort("session_id", "seq", "compaction_id")
        .with_row_index("ci")
        .with_columns(
            pl.col("ci").cast(pl.Int64),
            first=pl.col("session_id") != pl.col("session_id").shift(1).fill_null(""),
            last=pl.col("session_id") != pl.col("session_id").shift(-1).fill_null(""),
        )
        .collect()
    )


def _mixed(group: pl.Expr, text_hash: pl.Expr) -> pl.Expr:
    """One 64-bit key for (group, text): the text's hash xor the group times a large odd number
    (wrapping), so that equal keys mean equal pairs with overwhelming probability."""
    return text_hash ^ (group.cast(pl.UInt64) * pl.lit(_GOLDEN, dtype=pl.UInt64))


def _items(base: pl.DataFrame, comps: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Integer columns only: one row per distinct normalised text per anchor of a compaction (the
    first in input order), ``rid`` = row number. ``group`` numbers (compaction, anchor type) so
    that ``group + n_types`` is the same type at the next compaction (``n_types`` is returned
    too); ``key`` mixes it with the text's hash, so matching k to k+1 is a join of the key of
    ``group + n_types`` on ``key``."""
    order = {t: i for i, t in enumerate(ANCHOR_ORDER)}
    extra = sorted(set(base["anchor_type"].unique().drop_nulls().to_list()) - set(order))
    order.update({t: len(order) + i for i, t in enumerate(extra)})
    n_types = len(order) + 1  # + null
    items = (
        base.lazy()
        .select(
            "row",
            "cid_h",
            "position",
            h=pl.col("item_norm").hash(),
            torder=pl.col("anchor_type").replace_strict(
                order, default=len(order), return_dtype=pl.Int64
            ),
        )
        .join(
            comps.lazy().select("cid_h", "ci", "first", "last"),
            on="cid_h",
            maintain_order="left",
        )
        .with_columns(group=pl.col("ci") * n_types + pl.col("torder"))
        .with_columns(key=_mixed(pl.col("group"), pl.col("h")))
        .filter(pl.col("key").is_first_distinct())
        .drop("cid_h")
        .with_row_index("rid")
        .with_columns(pl.col("rid").cast(pl.Int64))
        .collect()
    )
    return items, n_types


def _best_matches(
    items: pl.DataFrame, n_types: int, norms: pl.Series
) -> tuple[pl.DataFrame, np.ndarray]:
    """(best match in k of each item of k+1 with similarity >= 60: b_rid, a_rid, similarity;
    whether each row, as an item of k, matched something in k+1). Equal texts by a join, the
    rest compared in bulk within (pair of compactions, anchor type)."""
    # lazily, so that only the columns each side reads are filtered (the frame has a dozen)
    prev = (
        items.lazy()
        .filter(~pl.col("last"))
        .select(
            a_rid="rid",
            key=_mixed(pl.col("group") + n_types, pl.col("h")),
            group=pl.col("group") + n_types,
        )
        .collect()
    )
    curr = items.select(b_rid="rid", key="key", group="group").filter(~items["first"])
    exact = prev.select("a_rid", "key").join(curr.select("b_rid", "key"), on="key")
    done_a = np.zeros(items.height, dtype=bool)
    done_a[exact["a_rid"].to_numpy()] = True
    done_b = np.zeros(items.height, dtype=bool)
    done_b[exact["b_rid"].to_numpy()] = True
    pairs = (
        prev.select("a_rid", "group")
        .filter(~done_a[prev["a_rid"].to_numpy()])
        .join(curr.select("b_rid", "group").filter(~done_b[curr["b_rid"].to_numpy()]), on="group")
    )
    # each distinct pair of texts is scored once (items recur from compaction to compaction)
    h = items["h"]
    pairs = pairs.with_columns(a_h=h.gather(pairs["a_rid"]), b_h=h.gather(pairs["b_rid"]))
    distinct = pairs.select("a_rid", "b_rid", "a_h", "b_h").unique(["a_h", "b_h"])
    row = items["row"]
    a_text = norms.gather(row.gather(distinct["a_rid"])).to_numpy()
    b_text = norms.gather(row.gather(distinct["b_rid"])).to_numpy()
    scored = distinct.select("a_h", "b_h", _scores(a_text, b_text))
    fuzzy = (
        pairs.join(scored, on=["a_h", "b_h"])
        .select("b_rid", "a_rid", "similarity")
        .filter(pl.col("similarity") >= CHANGED_SIMILARITY)
        .sort(["b_rid", "similarity", "a_rid"], descending=[False, True, False])
    )
    done_a[fuzzy["a_rid"].to_numpy()] = True
    best = pl.concat(
        [
            exact.select("b_rid", "a_rid", similarity=pl.lit(100.0)),
            fuzzy.unique(subset="b_rid", keep="first", maintain_order=True),
        ]
    )
    return best, done_a


def _chains(items: pl.DataFrame, best: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(root rid of each row through its kept/changed links, whether that root's chain reaches
    the session's last compaction), by pointer jumping over the dense row ids."""
    n_rows = items.height
    root = np.arange(n_rows, dtype=np.int64)
    root[best["b_rid"].to_numpy()] = best["a_rid"].to_numpy()
    jumped = np.empty_like(root)  # reused: a fresh 8-byte-per-row array each round page-faults
    while True:
        np.take(root, root, out=jumped)
        if np.array_equal(jumped, root):
            break
        root, jumped = jumped, root
    reached = np.zeros(n_rows, dtype=bool)
    reached[root[items.filter("last")["rid"].to_numpy()]] = True
    return root, reached[root]


def _status_rows(items: pl.DataFrame, best: pl.DataFrame, matched: np.ndarray) -> pl.DataFrame:
    """Integer rows of the result: every item with its status, then every dropped item at the
    next compaction (``ci`` + 1), sorted; ``row`` points into the input, ``root_ci`` is the
    compaction where the item's chain began."""
    similarity = np.full(items.height, np.nan)
    similarity[best["b_rid"].to_numpy()] = best["similarity"].to_numpy()
    root, reaches = _chains(items, best)
    ints = items.select("row", "ci", "torder", "position", "last").with_columns(
        similarity=pl.Series(similarity).fill_nan(None),
        root_ci=items["ci"].gather(root),
        reaches_last=pl.Series(reaches),
    )
    present = ints.with_columns(
        status=pl.when(pl.col("similarity") >= KEPT_SIMILARITY)
        .then(pl.lit(_KEPT, dtype=pl.Int64))
        .when(pl.col("similarity").is_not_null())
        .then(pl.lit(_CHANGED, dtype=pl.Int64))
        .otherwise(pl.lit(_ADDED, dtype=pl.Int64)),
    )
    dropped = ints.filter(~pl.col("last") & ~pl.Series(matched)).with_columns(
        ci=pl.col("ci") + 1, status=pl.lit(_DROPPED, dtype=pl.Int64)
    )
    # one packed integer key (multi-column sorts cost ten times more); dropped after the others
    order = (
        (pl.col("ci") * 64 + pl.col("torder").clip(0, 63)) * 2
        + (pl.col("status") == _DROPPED).cast(pl.Int64)
    ) * (1 << 20) + pl.col("position").fill_null(0).clip(0, (1 << 20) - 1)
    return pl.concat([present, dropped]).sort(order, maintain_order=True)


def match_anchor_items(anchor_items: pl.DataFrame) -> pl.DataFrame:
    """One row per item per compaction with its status, plus each dropped item at the compaction
    where it vanished: session_id, compaction_id, compaction_seq, anchor_type, item, status,
    similarity, item_norm, introduced_at, reaches_last, last_compaction. Rows are in session,
    compaction, anchor type and position order, dropped rows after the others."""
    base = _base(anchor_items)
    if base.height == 0:
        return pl.DataFrame(schema=_DETAIL_SCHEMA)
    comps = _compactions(base)
    items, n_types = _items(base, comps)
    best, matched = _best_matches(items, n_types, base["item_norm"])
    rows = _status_rows(items, best, matched)
    # strings gathered frame by frame: Polars gathers the columns of one select in parallel
    at, ci = rows["row"], rows["ci"]
    of_comp = comps.select(
        pl.col("session_id", "compaction_id").gather(ci),
        pl.col("seq").gather(ci).alias("compaction_seq"),
        pl.col("last").gather(ci).alias("last_compaction"),
        pl.col("compaction_id").gather(rows["root_ci"]).alias("introduced_at"),
    )
    of_item = base.select(pl.col("anchor_type", "item", "item_norm").gather(at))
    return pl.concat(
        [
            of_comp,
            of_item,
            rows.select(
                pl.Series(_STATUSES).gather(rows["status"]).alias("status"),
                "similarity",
                "reaches_last",
            ),
        ],
        how="horizontal",
    ).select(pl.col(name).cast(dtype) for name, dtype in _DETAIL_SCHEMA.items())
