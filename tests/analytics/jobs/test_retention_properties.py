"""Anchor retention on generated ``anchor_items`` frames: what must hold whatever the input.

The frames mix what a store or a hand-built frame may hold: null ids, seqs and positions,
empty and punctuation-only items, the same item twice in one anchor (in other case and with a
bullet), unknown and null anchor types, huge and negative positions, and rows in any order.
"""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.jobs.anchor_matching import normalise_item
from analytics.jobs.retention import anchor_survival, intent_drift, retention_detail, silent_drops
from tests.analytics.jobs.test_retention import frame as items_frame
from tests.fuzzing import examples

TEXTS = [
    "Use SQLite",
    "- use  sqlite.",
    "USE SQLITE",
    "Pin numpy below 3",
    "pin numpy below 3 (updated)",
    "Ship the parser fix",
    "",
    "  ",
    "•",
    "emoji 😀 text",
    "tab\there and\nnewline",
    None,
]
TYPES = ["user_intent", "key_decision", "next_step", "custom_note", None]


@st.composite
def frames(draw: st.DrawFn) -> pl.DataFrame:
    rows = []
    for s in range(draw(st.integers(1, 3))):
        for k in range(draw(st.integers(1, 4))):
            # an empty id is an id: only null leaves a row out
            session = draw(st.sampled_from([f"s{s}"] * 5 + [None, ""]))
            compaction = draw(st.sampled_from([f"s{s}c{k}"] * 5 + [None]))
            for _ in range(draw(st.integers(0, 5))):
                rows.append(
                    (
                        session,
                        compaction,
                        draw(st.sampled_from([k, k, k, None])),
                        draw(st.sampled_from(TYPES)),
                        draw(st.sampled_from([0, 1, 2, None, -3, 10**12])),
                        draw(st.sampled_from(TEXTS)),
                    )
                )
    frame = items_frame(rows)  # type: ignore[arg-type]
    if draw(st.booleans()):
        frame = frame.sample(fraction=1.0, shuffle=True, seed=draw(st.integers(0, 99)))
    return frame


@settings(max_examples=examples(150), deadline=None)
@given(frame=frames())
def test_each_distinct_item_is_one_row_and_statuses_follow_the_compactions(
    frame: pl.DataFrame,
) -> None:
    detail = retention_detail(frame)
    usable = frame.with_columns(item_norm=normalise_item(pl.col("item"))).filter(
        pl.col("session_id").is_not_null()
        & pl.col("compaction_id").is_not_null()
        & (pl.col("item_norm").fill_null("") != "")
    )
    present = detail.filter(pl.col("status") != "dropped")
    key = ["compaction_id", "anchor_type", "item_norm"]
    # one row per distinct normalised item of an anchor, none invented, none lost
    assert present.height == usable.unique(key).height
    assert present.select(key).unique().height == present.height
    assert (
        present.select(key)
        .join(usable.select(key), on=key, how="anti", nulls_equal=True)
        .is_empty()
    )

    # a session's first compaction in the detail's order (by seq; a null seq sorts first)
    at_first = detail.filter(
        pl.col("compaction_id") == pl.col("compaction_id").first().over("session_id")
    )
    assert set(at_first["status"].to_list()) <= {"added"}  # nothing before to keep or drop
    kept = detail.filter(pl.col("status") == "kept")
    assert (kept["similarity"] >= 90).all()
    changed = detail.filter(pl.col("status") == "changed")
    assert ((changed["similarity"] >= 60) & (changed["similarity"] < 90)).all()
    assert detail.filter(pl.col("status").is_in(["added", "dropped"]))["similarity"].is_null().all()
    # the jobs built on the detail take whatever it holds
    silent_drops(detail)
    anchor_survival(detail)
    intent_drift(detail)
