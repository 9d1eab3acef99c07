"""Matching the anchor items of each compaction to those of the one before (issue 8, item 4).

Within a session the compactions that have items are ordered by ``seq``; the items of compaction
k+1 are matched to those of k per anchor type on normalised text (lowercased, whitespace
collapsed, bullets and punctuation stripped at both ends). Equal normalised texts are ``kept``
with similarity 100; only the leftovers are scored, in bulk, with rapidfuzz's
``token_sort_ratio`` (word order does not matter): the best match >= 90 is ``kept``, >= 60
``changed``, else the item of k+1 is ``added``; an item of k with no match >= 60 in k+1 (any
item of k+1, exact copies of other items included) is ``dropped`` at k+1. The first compaction's
items are ``added``. Matching is best-match, not one-to-one (two items merged into one both count
as matched). Following each item's kept/changed links back (pointer jumping over dense row ids)
gives where it was introduced and whether it reaches the session's last compaction.

How it stays fast on millions of items: texts are normalised once per distinct text; each
(anchor type, normalised text) gets a dense id, and sorting the rows by (that id, compaction)
puts every item right after itself at the compaction before, so that one pass finds the equal
texts and the repeats within a compaction (rows from the store come in compaction order, and
then the sort is a group-by). Everything heavy runs on 4-byte integer columns; strings are
gathered once, at the end, from the small tables of distinct texts and compactions. The job
functions built on this are in :mod:`analytics.jobs.retention`. No I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray
from rapidfuzz import fuzz, process

from analytics.jobs.common import conform
from compactor import AnchorType

KEPT_SIMILARITY = 90.0
CHANGED_SIMILARITY = 60.0
ANCHOR_ORDER = tuple(t.value for t in AnchorType)
_GOLDEN = 0x9E3779B97F4A7C15
_MAX_ROWS = 1 << 31
_MAX_POSITION = (1 << 20) - 1  # positions beyond sort together (an anchor has a few lines)
_STRIP = " \t\r\n-*•·+>.,;:!?\"'`()[]{}"
_INPUT_SCHEMA: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "compaction_id": pl.String(),
    "seq": pl.Int64(),
    "anchor_type": pl.String(),
    "position": pl.Int64(),
    "item": pl.String(),
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
    "chain": pl.Int64,
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


def _mixed(group: pl.Expr, text_hash: pl.Expr) -> pl.Expr:
    """One 64-bit key for (group, text): the text's hash xor the group (an integer or another
    hash) times a large odd number (wrapping), so that equal keys mean equal pairs with
    overwhelming probability."""
    return text_hash ^ (group.cast(pl.UInt64) * pl.lit(_GOLDEN, dtype=pl.UInt64))


def _source(anchor_items: pl.DataFrame) -> pl.DataFrame:
    """The input's six columns, plus ``raw_h``: one 64-bit hash of each item as written (anchor
    type and text), computed once for the distinct texts and the rows alike."""
    return conform(anchor_items, _INPUT_SCHEMA).with_columns(
        raw_h=_mixed(pl.col("anchor_type").hash(), pl.col("item").hash())
    )


def _texts(source: pl.DataFrame) -> pl.DataFrame:
    """One row per distinct item as written (``raw_h``, see ``_source``) whose normalised
    text is non-empty: ``tid`` (row number), ``torder`` (the type's rank: :data:`ANCHOR_ORDER`,
    then other types sorted, then null), ``item_norm`` and ``nid``, a dense id of (type,
    normalised text): equal nids are equal items. Items recur from compaction to compaction, so
    working on the distinct ones is several times cheaper than on every row."""
    distinct = (
        source.lazy().select("anchor_type", "item", "raw_h").unique("raw_h", keep="any").collect()
    )
    order = {t: i for i, t in enumerate(ANCHOR_ORDER)}
    extra = sorted(set(distinct["anchor_type"].drop_nulls().unique().to_list()) - set(order))
    order.update({t: len(order) + i for i, t in enumerate(extra)})
    return (
        distinct.lazy()
        .select(
            "raw_h",
            "anchor_type",
            "item",
            torder=pl.col("anchor_type")
            .replace_strict(order, default=len(order), return_dtype=pl.Int64)
            .fill_null(len(order)),
            item_norm=normalise_item(pl.col("item")),
        )
        .filter(pl.col("item_norm").is_not_null() & (pl.col("item_norm") != ""))
        .with_row_index("tid")
        .with_columns(
            nid=_mixed(pl.col("torder"), pl.col("item_norm").hash()).rank("dense").cast(pl.Int64)
            - 1
        )
        .collect()
    )


def _rows(source: pl.DataFrame, texts: pl.DataFrame, keep: pl.Expr) -> pl.DataFrame:
    """Integer columns of the usable input rows (ids present, ``keep`` true, a non-empty
    normalised text), in input order: ``row`` (index into the input), ``position`` (0 when
    null, clipped to ``_MAX_POSITION``), ``cid_h`` (the compaction id's hash) and the text's
    ``tid``, ``torder`` and ``nid``. Four-byte integers: on big inputs, fresh memory (page
    faults) is what costs most."""
    return (
        source.lazy()
        .select(  # integers first, then the filter: no string column is copied
            "raw_h",
            row=pl.int_range(pl.len(), dtype=pl.Int32),
            position=pl.col("position").fill_null(0).clip(0, _MAX_POSITION).cast(pl.Int32),
            cid_h=pl.col("compaction_id").hash(),
            usable=pl.all_horizontal(
                pl.col("session_id").is_not_null(), pl.col("compaction_id").is_not_null(), keep
            ),
        )
        .filter("usable")
        .join(
            texts.lazy().select("raw_h", pl.col("tid", "torder", "nid").cast(pl.Int32)),
            on="raw_h",
            maintain_order="left",
        )
        .drop("raw_h", "usable")
        .collect()
    )


def _compactions(source: pl.DataFrame, rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """(one row per compaction: its index ``ci`` (the row number; consecutive within a session,
    in ``seq`` order), session_id, compaction_id, seq (of its first row), whether it is its
    session's first/last; each row's ``ci``). Rows come grouped by compaction from the store, so
    the work is per run of equal compaction ids, not per row."""
    run = rows["cid_h"].rle_id()
    runs = rows.select("row", "cid_h").filter(run != run.shift(1).fill_null(-1))
    grouped = runs["cid_h"].n_unique() == runs.height  # one run per compaction
    firsts = runs if grouped else runs.filter(pl.col("cid_h").is_first_distinct())
    unsorted = source.select(pl.col("session_id", "compaction_id", "seq").gather(firsts["row"]))
    # a null seq last in its session, as in every other job (``common.in_session_order``)
    order = unsorted.select(
        pl.arg_sort_by("session_id", "seq", "compaction_id", nulls_last=True)
    ).to_series()
    comps = (
        unsorted.with_columns(cid_h=firsts["cid_h"])
        .select(pl.all().gather(order))
        .with_row_index("ci")
        .with_columns(
            pl.col("ci").cast(pl.Int32),
            # ne_missing: the edges (a null neighbour) differ even from an empty session id
            first=pl.col("session_id").ne_missing(pl.col("session_id").shift(1)),
            last=pl.col("session_id").ne_missing(pl.col("session_id").shift(-1)),
        )
    )
    if grouped:  # the compaction of each run: the inverse of the sort
        run_ci = np.empty(runs.height, dtype=np.int32)
        run_ci[order.to_numpy()] = np.arange(runs.height, dtype=np.int32)
        return comps, pl.Series("ci", run_ci).gather(run)
    joined = runs.join(comps.select("cid_h", "ci"), on="cid_h", maintain_order="left")
    return comps, joined["ci"].gather(run)


def _by_text(nid: pl.Series, ci: pl.Series) -> pl.DataFrame:
    """The rows sorted by (text, compaction), ties in input order: rid, nid, ci. Rows from the
    store come in compaction order; then grouping by text, which keeps each group's rows in
    input order, is that sort at a fifth of its cost."""
    frame = pl.DataFrame({"nid": nid, "ci": ci}).with_row_index("rid")
    if (ci.diff().drop_nulls() >= 0).all():
        return frame.group_by("nid").agg("rid", "ci").explode("rid", "ci")
    return frame.sort("nid", "ci", maintain_order=True)


class _Items:
    """The items as numpy columns indexed by ``rid`` (the row number of :func:`_rows`): one per
    distinct normalised text per anchor of a compaction, the first row in input order; the
    others are marked ``dup`` and take no part. The identity pass: sorted by (text, compaction),
    an item right after the same text at the compaction before is kept (``exact_a`` ->
    ``exact_b``); the same text twice in one compaction is a duplicate."""

    dup: np.ndarray
    exact_a: np.ndarray
    exact_b: np.ndarray
    position: np.ndarray
    tid: np.ndarray
    nid: np.ndarray
    torder: np.ndarray
    ci: np.ndarray
    first: np.ndarray
    last: np.ndarray

    def __init__(self, rows: pl.DataFrame, comps: pl.DataFrame, ci: pl.Series) -> None:
        self.n_ci = comps.height
        self.n_nid = int(rows["nid"].max() or 0) + 1  # type: ignore[arg-type]
        self.n_types = int(rows["torder"].max() or 0) + 1  # type: ignore[arg-type]
        first = comps["first"]
        same_text = pl.col("nid") == pl.col("nid").shift(1)
        ids = (
            _by_text(rows["nid"], ci)
            .lazy()
            .select(
                "rid",
                dup=(same_text & (pl.col("ci") == pl.col("ci").shift(1))).fill_null(False),
                # the same text at the compaction before, unless that is another session's last
                link=(
                    same_text
                    & (pl.col("ci") == pl.col("ci").shift(1) + 1)
                    & ~pl.lit(first).gather(pl.col("ci"))
                ).fill_null(False),
            )
            .with_columns(  # the first rid of the run of equal (text, compaction) just before
                before=pl.when("dup").then(None).otherwise(pl.col("rid")).forward_fill().shift(1)
            )
            .collect()
        )
        self.dup = np.zeros(rows.height, dtype=bool)
        self.dup[ids.filter("dup")["rid"].to_numpy()] = True
        exact = ids.filter("link")
        self.exact_b = exact["rid"].to_numpy()
        self.exact_a = exact["before"].to_numpy()
        self.position = rows["position"].to_numpy()
        self.tid = rows["tid"].to_numpy()
        self.nid = rows["nid"].to_numpy()
        self.torder = rows["torder"].to_numpy()
        self.ci = ci.to_numpy()
        self.first = first.gather(ci).to_numpy()
        self.last = comps["last"].gather(ci).to_numpy()

    def __len__(self) -> int:
        return len(self.ci)


def pair_codes(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """One integer per pair of ids below ``n``: ``a * n + b``, in 64 bits (the ids are 4-byte,
    and their product overflows 4 bytes past 46,341 distinct texts)."""
    codes: np.ndarray = a.astype(np.int64) * n + b
    return codes


def _texts_at(texts: pl.DataFrame, tid: np.ndarray, *columns: str) -> pl.DataFrame:
    """``columns`` of the distinct texts at ``tid``, in that order: a join, since gathering
    long strings from a small table costs three times more."""
    table = texts.select(pl.col("tid").cast(pl.Int32), *columns)
    found = pl.DataFrame({"tid": tid}).join(table, on="tid", how="left", maintain_order="left")
    return found.drop("tid")


def _fuzzy_matches(items: _Items, texts: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray]:
    """(b_rid, a_rid, similarity: the best match >= 60 in k of each item of k+1 that has no
    equal text there; whether each item, as an item of k, matched something in k+1, equal or
    not). The texts are compared in bulk within (pair of compactions, anchor type)."""
    matched = items.dup.copy()  # a duplicate takes no part: as if matched
    matched[items.exact_a] = True
    done_b = items.dup.copy()
    done_b[items.exact_b] = True
    # in Polars: over millions of items, numpy's fresh arrays cost more in page faults
    ids = pl.DataFrame({"ci": items.ci, "torder": items.torder}).with_row_index("rid")
    group = pl.col("ci").cast(pl.Int64) * items.n_types + pl.col("torder")
    earlier = ids.filter(pl.Series(~items.last & ~matched)).select(
        a_rid="rid", group=group + items.n_types
    )
    # every item of k+1, its exact copies too: an item of k merged into a copy of another one
    # is matched as when it is merged into a near copy (one rule for both)
    later = ids.filter(pl.Series(~items.first & ~items.dup)).select(b_rid="rid", group=group)
    pairs = earlier.join(later, on="group").select("a_rid", "b_rid")
    # each distinct pair of texts is scored once (items recur from compaction to compaction)
    a_nid, b_nid = items.nid[pairs["a_rid"].to_numpy()], items.nid[pairs["b_rid"].to_numpy()]
    pair = pair_codes(a_nid, b_nid, items.n_nid)
    pairs = pairs.with_columns(pair=pair)
    distinct = pairs.unique("pair")
    a_tid, b_tid = items.tid[distinct["a_rid"].to_numpy()], items.tid[distinct["b_rid"].to_numpy()]
    # as numpy arrays of fresh Python strings: rapidfuzz's threads score strings shared between
    # elements at half the speed
    both = _texts_at(texts, np.concatenate([a_tid, b_tid]), "item_norm")["item_norm"].to_numpy()
    a_text, b_text = both[: len(a_tid)], both[len(a_tid) :]
    scored = distinct.select("pair", _scores(a_text, b_text))
    fuzzy = (
        pairs.join(scored, on="pair")
        .filter(pl.col("similarity") >= CHANGED_SIMILARITY)
        .sort(["b_rid", "similarity", "a_rid"], descending=[False, True, False])
    )
    matched[fuzzy["a_rid"].to_numpy()] = True
    # an item of k+1 with an equal text at k keeps that link; the others take their best match
    fuzzy = fuzzy.filter(~pl.lit(pl.Series(done_b)).gather(pl.col("b_rid")))
    return fuzzy.unique(subset="b_rid", keep="first", maintain_order=True), matched


def _chains(items: _Items, fuzzy: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(root rid of each item through its kept/changed links, whether that root's chain reaches
    the session's last compaction), by pointer jumping over the dense rids. In Polars: its
    allocator reuses the memory of the round before, where numpy's would page-fault afresh."""
    root = (
        pl.Series(np.arange(len(items), dtype=np.int32))  # below _MAX_ROWS
        .scatter(items.exact_b, items.exact_a)
        .scatter(fuzzy["b_rid"], fuzzy["a_rid"])
    )
    while not (jumped := root.gather(root)).equals(root):
        root = jumped
    roots = root.to_numpy()
    reached = np.zeros(len(items), dtype=bool)
    reached[roots[items.last]] = True
    return roots, reached[roots]


def match_anchor_items(anchor_items: pl.DataFrame, keep: pl.Expr | None = None) -> pl.DataFrame:
    """One row per item per compaction with its status, plus each dropped item at the compaction
    where it vanished: session_id, compaction_id, compaction_seq, anchor_type, item, status,
    similarity, item_norm, introduced_at, reaches_last, last_compaction, chain (a number naming the
    kept/changed chain: from where it began and its first item's text). Rows are in session,
    compaction, anchor type and position order, dropped rows after the others. ``keep``, a
    predicate on the six input columns (session_id, compaction_id, seq, anchor_type, position,
    item), leaves out the rows where it is false (or null)."""
    if anchor_items.height >= _MAX_ROWS:
        raise ValueError(
            f"{anchor_items.height:,} anchor items in one call: at most {_MAX_ROWS - 1:,} "
            "(row ids are 4-byte); match the sessions in parts"
        )
    source = _source(anchor_items)
    texts = _texts(source)
    rows = _rows(source, texts, pl.lit(True) if keep is None else keep.fill_null(False))
    if rows.height == 0:
        return pl.DataFrame(schema=_DETAIL_SCHEMA)
    comps, ci = _compactions(source, rows)
    items = _Items(rows, comps, ci)
    fuzzy, matched = _fuzzy_matches(items, texts)
    similarity = pl.select(pl.repeat(None, len(items), dtype=pl.Float64)).to_series()
    similarity.scatter(items.exact_b, 100.0)
    similarity.scatter(fuzzy["b_rid"], fuzzy["similarity"])
    root, reaches = _chains(items, fuzzy)
    # the result: every item, then every dropped item again at the next compaction, in order
    gone = np.flatnonzero(~items.last & ~matched).astype(np.int32)
    at = np.concatenate([np.arange(len(items), dtype=np.int32)[~items.dup], gone])
    dropped = np.zeros(len(at), dtype=bool)
    dropped[len(at) - len(gone) :] = True
    out_ci = items.ci[at] + dropped
    at, dropped, out_ci = _in_order(items, at, dropped, out_ci)
    # strings gathered frame by frame: Polars gathers the columns of one select in parallel
    of_comp = comps.select(
        pl.col("session_id", "compaction_id").gather(out_ci),
        pl.col("seq").gather(out_ci).alias("compaction_seq"),
        pl.col("last").gather(out_ci).alias("last_compaction"),
        pl.col("compaction_id").gather(items.ci[root[at]]).alias("introduced_at"),
    )
    of_text = _texts_at(texts, items.tid[at], "anchor_type", "item", "item_norm")
    # a chain is named by where it began and its first item's text, not by a row id, so the
    # same items give the same chains whatever order they came in
    first = _texts_at(texts, items.tid[root[at]], "item_norm").get_column("item_norm")
    chain = (
        pl.concat_str(
            [of_comp["session_id"], of_comp["introduced_at"], of_text["anchor_type"], first],
            separator="\0",
            ignore_nulls=True,
        )
        .hash(seed=0)
        .reinterpret(signed=True)
    )
    # the status follows from the similarity (none: added); a dropped row has neither
    score = pl.when(~pl.lit(pl.Series(dropped))).then(pl.lit(similarity.gather(at)))
    of_status = pl.select(
        status=pl.when(pl.lit(pl.Series(dropped)))
        .then(3)
        .when(score >= KEPT_SIMILARITY)
        .then(2)
        .when(score.is_not_null())
        .then(1)
        .otherwise(0),
        similarity=score,
        reaches_last=pl.lit(pl.Series(reaches[at])),
    )
    # the names from codes: building 6M strings row by row in the expression costs more
    names = pl.Series(["added", "changed", "kept", "dropped"]).gather(of_status["status"])
    of_status = of_status.with_columns(status=names)
    of_status = of_status.with_columns(chain=chain)
    return pl.concat([of_comp, of_text, of_status], how="horizontal").select(
        pl.col(name).cast(dtype) for name, dtype in _DETAIL_SCHEMA.items()
    )


def _in_order(
    items: _Items, at: np.ndarray, dropped: np.ndarray, ci: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``at``, ``dropped`` and ``ci`` sorted by compaction, anchor type, dropped after present,
    position, ties in their order: one stable sort on one packed key (4 bytes when it fits),
    not a sort on several columns, which costs many times more."""
    positions = int(items.position.max()) + 1
    bound = (items.n_ci + 1) * items.n_types * 2 * positions
    key: NDArray[np.signedinteger[Any]] = ci.astype(np.int32 if bound < (1 << 31) else np.int64)
    key *= items.n_types
    key += items.torder[at]
    key *= 2
    key += dropped
    key *= positions
    key += items.position[at]
    order = pl.DataFrame({"key": key}).select(pl.arg_sort_by("key", maintain_order=True))
    perm = order.to_series().to_numpy()
    return at[perm], dropped[perm], ci[perm]
