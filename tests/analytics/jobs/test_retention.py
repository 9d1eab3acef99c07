"""Anchor retention on hand-built ``anchor_items`` frames whose answers are written as literals."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from analytics.jobs.anchor_matching import pair_codes
from analytics.jobs.retention import (
    anchor_survival,
    intent_drift,
    retention_detail,
    retention_items,
    silent_drops,
)

Row = tuple[str, str, int, str, int, str]
COLUMNS = ["session_id", "compaction_id", "seq", "anchor_type", "position", "item"]
INTENT = "Fix the flaky cache invalidation bug in core/cache.py"


def frame(rows: list[Row]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "session_id": pl.String,
            "compaction_id": pl.String,
            "seq": pl.Int64,
            "anchor_type": pl.String,
            "position": pl.Int64,
            "item": pl.String,
        },
        orient="row",
    )


def three_compactions() -> pl.DataFrame:
    """c2's summary forgets a key decision that nothing later restores."""
    return frame(
        [
            ("s1", "c1", 10, "user_intent", 0, INTENT),
            ("s1", "c1", 10, "key_decision", 0, "Use Redis for the session cache"),
            ("s1", "c1", 10, "key_decision", 1, "Never retry failed writes"),
            ("s1", "c2", 20, "user_intent", 0, INTENT),
            ("s1", "c2", 20, "key_decision", 0, "Use Redis for the session cache"),
            ("s1", "c3", 30, "user_intent", 0, INTENT),
            ("s1", "c3", 30, "key_decision", 0, "Use Redis for the session cache"),
            ("s1", "c3", 30, "key_decision", 1, "Add a TTL of 60 seconds"),
        ]
    )


def statuses(items: pl.DataFrame) -> list[tuple[str, str, str]]:
    return [(r["compaction_id"], r["item"], r["status"]) for r in items.iter_rows(named=True)]


def test_a_key_decision_dropped_and_never_replaced_is_a_silent_drop() -> None:
    drops = silent_drops(retention_detail(three_compactions()))
    assert drops.to_dicts() == [
        {
            "session_id": "s1",
            "anchor_type": "key_decision",
            "item": "Never retry failed writes",
            "introduced_at": "c1",
            "dropped_at": "c2",
            # c2 held fewer decisions than c1 and took no new one: not the cap; one compaction old
            "reason": "unknown",
            "age": 1,
            "dropped_turn": None,
            "dropped_tier": None,
            "introduced_turn": None,
        }
    ]


def test_a_drop_to_make_room_for_a_new_item_is_the_summarisers_cap() -> None:
    detail = retention_detail(
        frame(
            [
                ("s1", "c1", 10, "key_decision", 0, "Use Redis for the session cache"),
                ("s1", "c1", 10, "key_decision", 1, "Never retry failed writes"),
                ("s1", "c2", 20, "key_decision", 0, "Use Redis for the session cache"),
                ("s1", "c2", 20, "key_decision", 1, "Add a TTL of 60 seconds"),
            ]
        )
    )
    (drop,) = silent_drops(detail).to_dicts()
    assert (drop["item"], drop["reason"], drop["age"]) == ("Never retry failed writes", "cap", 1)


def test_an_old_item_dropped_says_its_age_and_names_the_compactions_by_turn_and_tier() -> None:
    rows: list[Row] = []
    for k in range(1, 5):  # the TTL decision lasts c1..c3 and vanishes at c4
        rows.append(("s1", f"c{k}", 10 * k, "key_decision", 0, "Use Redis for the session cache"))
        if k < 4:
            rows.append(("s1", f"c{k}", 10 * k, "key_decision", 1, "Add a TTL of 60 seconds"))
    compactions = pl.DataFrame(
        {
            "id": ["c1", "c2", "c3", "c4"],
            "session_id": ["s1"] * 4,
            "seq": [10, 20, 30, 40],
            "tier": [2, 3, 2, 3],
            "effective": [True] * 4,
        }
    )
    turns = pl.DataFrame({"session_id": ["s1"] * 4, "seq": [11, 21, 31, 41], "turn": [3, 6, 9, 12]})
    detail = retention_detail(frame(rows), compactions)
    (drop,) = silent_drops(detail, compactions, turns).to_dicts()
    assert drop["item"] == "Add a TTL of 60 seconds"
    assert (drop["reason"], drop["age"]) == ("age", 3)
    assert (drop["dropped_turn"], drop["dropped_tier"], drop["introduced_turn"]) == (12, "FULL", 3)


def test_items_carry_their_status_at_each_compaction() -> None:
    items = retention_items(three_compactions())
    assert statuses(items) == [
        ("c1", INTENT, "added"),
        ("c1", "Use Redis for the session cache", "added"),
        ("c1", "Never retry failed writes", "added"),
        ("c2", INTENT, "kept"),
        ("c2", "Use Redis for the session cache", "kept"),
        ("c2", "Never retry failed writes", "dropped"),
        ("c3", INTENT, "kept"),
        ("c3", "Use Redis for the session cache", "kept"),
        ("c3", "Add a TTL of 60 seconds", "added"),
    ]
    dropped = items.filter(pl.col("status") == "dropped").row(0, named=True)
    assert dropped["compaction_seq"] == 20
    assert dropped["similarity"] is None
    assert items.filter(pl.col("status") == "kept")["similarity"].to_list() == [100.0] * 4


def test_output_columns_match_the_cli_json_keys() -> None:
    assert retention_items(three_compactions()).columns == [
        "session_id",
        "compaction_id",
        "compaction_seq",
        "anchor_type",
        "item",
        "status",
        "similarity",
    ]


def test_a_reworded_decision_is_changed_with_its_similarity() -> None:
    items = retention_items(
        frame(
            [
                ("s1", "c1", 1, "key_decision", 0, "Use Redis for the session cache"),
                ("s1", "c2", 2, "key_decision", 0, "Decided: use Redis as the session cache"),
            ]
        )
    )
    reworded = items.filter(pl.col("compaction_id") == "c2").row(0, named=True)
    assert reworded["status"] == "changed"
    assert 60.0 <= reworded["similarity"] < 90.0
    assert reworded["similarity"] == pytest.approx(80.0)
    assert items.filter(pl.col("status") == "dropped").height == 0


def test_case_whitespace_bullets_and_end_punctuation_do_not_change_an_item() -> None:
    items = retention_items(
        frame(
            [
                ("s1", "c1", 1, "next_step", 0, "Run the cache tests"),
                ("s1", "c2", 2, "next_step", 0, "-  run THE cache\ttests."),
            ]
        )
    )
    assert items.filter(pl.col("compaction_id") == "c2")[["status", "similarity"]].rows() == [
        ("kept", 100.0)
    ]


def test_an_unrelated_replacement_is_a_drop_plus_an_add() -> None:
    items = retention_items(
        frame(
            [
                ("s1", "c1", 1, "tried_solution", 0, "Pinned urllib3 to 1.26"),
                ("s1", "c2", 2, "tried_solution", 0, "Cleared the Redis keyspace nightly"),
            ]
        )
    )
    assert statuses(items) == [
        ("c1", "Pinned urllib3 to 1.26", "added"),
        ("c2", "Cleared the Redis keyspace nightly", "added"),
        ("c2", "Pinned urllib3 to 1.26", "dropped"),
    ]


def test_a_drop_restored_later_is_not_silent() -> None:
    detail = retention_detail(
        frame(
            [
                ("s1", "c1", 1, "user_intent", 0, "Add rate limiting to the login endpoint"),
                ("s1", "c2", 2, "execution_progress", 0, "Read api/auth.py"),
                ("s1", "c3", 3, "user_intent", 0, "Add rate limiting to the login endpoint now"),
            ]
        )
    )
    assert statuses(detail.filter(pl.col("anchor_type") == "user_intent")) == [
        ("c1", "Add rate limiting to the login endpoint", "added"),
        ("c2", "Add rate limiting to the login endpoint", "dropped"),
        ("c3", "Add rate limiting to the login endpoint now", "added"),
    ]
    assert silent_drops(detail).height == 0


def test_only_intents_and_decisions_can_be_silent_drops() -> None:
    detail = retention_detail(
        frame(
            [
                ("s1", "c1", 1, "next_step", 0, "Rerun the flaky test"),
                ("s1", "c1", 1, "key_decision", 0, "Keep the public API unchanged"),
                ("s1", "c2", 2, "execution_progress", 0, "Opened core/db.py"),
            ]
        )
    )
    assert silent_drops(detail)["item"].to_list() == ["Keep the public API unchanged"]


def test_compactions_are_ordered_by_seq_and_sessions_never_mix() -> None:
    items = retention_items(
        frame(
            [
                ("s2", "b2", 7, "key_decision", 0, "Use Postgres"),
                ("s1", "a2", 9, "key_decision", 0, "Use SQLite"),
                ("s1", "a1", 3, "key_decision", 0, "Use SQLite"),
                ("s2", "b1", 5, "key_decision", 0, "Use MongoDB for everything"),
            ]
        )
    )
    assert statuses(items) == [
        ("a1", "Use SQLite", "added"),
        ("a2", "Use SQLite", "kept"),
        ("b1", "Use MongoDB for everything", "added"),
        ("b2", "Use Postgres", "added"),
        ("b2", "Use MongoDB for everything", "dropped"),
    ]


def test_survival_to_the_next_and_to_the_last_compaction() -> None:
    survival = anchor_survival(retention_detail(three_compactions()))
    assert survival.rows() == [
        # user_intent: c1 -> c2 and c2 -> c3 both keep it; the one intent reaches c3
        ("user_intent", 2, 1.0, 1, 1.0),
        # key_decision: 3 items had a next compaction, 1 dropped; of the 2 introduced before
        # c3, only the Redis decision reaches it (the TTL one is introduced at c3: not counted)
        ("key_decision", 3, 2 / 3, 2, 0.5),
    ]
    assert survival.columns == [
        "anchor_type",
        "items_next",
        "survival_next",
        "items_ever",
        "survival_last",
    ]


def test_a_changed_chain_counts_as_surviving_to_the_last_and_keeps_its_origin() -> None:
    detail = retention_detail(
        frame(
            [
                ("s1", "c1", 1, "key_decision", 0, "Use Redis for the session cache"),
                ("s1", "c2", 2, "key_decision", 0, "Decided: use Redis as the session cache"),
                ("s1", "c3", 3, "key_decision", 0, "Use Redis as the session cache"),
            ]
        )
    )
    assert detail["introduced_at"].to_list() == ["c1", "c1", "c1"]
    assert anchor_survival(detail).rows() == [("key_decision", 2, 1.0, 1, 1.0)]


def test_an_intent_identical_across_compactions_has_no_drift() -> None:
    drift = intent_drift(retention_detail(three_compactions()))
    assert drift.rows() == [
        ("s1", "c1", 10, "fix the flaky cache invalidation bug in core/cache.py", 100.0),
        ("s1", "c2", 20, "fix the flaky cache invalidation bug in core/cache.py", 100.0),
        ("s1", "c3", 30, "fix the flaky cache invalidation bug in core/cache.py", 100.0),
    ]


def test_an_intent_that_drifts_scores_lower_than_the_first() -> None:
    drift = intent_drift(
        retention_detail(
            frame(
                [
                    ("s1", "c1", 1, "user_intent", 0, "Fix the billing rounding error"),
                    ("s1", "c2", 2, "user_intent", 0, "Rewrite the email templates"),
                ]
            )
        )
    )
    assert drift["similarity"][0] == 100.0
    assert drift["similarity"][1] < 60.0


def test_empty_input_gives_empty_outputs_with_their_columns() -> None:
    empty = frame([])
    detail = retention_detail(empty)
    assert retention_items(empty).shape == (0, 7)
    assert silent_drops(detail).columns == [
        *("session_id", "anchor_type", "item", "introduced_at", "dropped_at"),
        *("reason", "age", "dropped_turn", "dropped_tier", "introduced_turn"),
    ]
    assert anchor_survival(detail).height == 0
    assert intent_drift(detail).columns == [
        "session_id",
        "compaction_id",
        "compaction_seq",
        "intent",
        "similarity",
    ]
    assert intent_drift(detail).height == 0


def test_an_intent_of_several_items_is_joined_in_anchor_order() -> None:
    drift = intent_drift(
        retention_detail(
            frame(
                [
                    ("s1", "c1", 1, "user_intent", 1, "Keep the API stable."),
                    ("s1", "c1", 1, "user_intent", 0, "Fix the cache"),
                    ("s1", "c2", 2, "user_intent", 0, "Fix the cache"),
                ]
            )
        )
    )
    assert drift.select("compaction_id", "intent").rows() == [
        ("c1", "fix the cache keep the api stable"),
        ("c2", "fix the cache"),
    ]
    assert 0.0 < drift["similarity"][1] < 100.0


def test_noop_compactions_and_deleted_sessions_are_left_out() -> None:
    items = frame(
        [
            ("s1", "c1", 1, "key_decision", 0, "Use SQLite"),
            ("s1", "noop", 2, "key_decision", 0, "Use SQLite"),
            ("s1", "c3", 3, "key_decision", 0, "Use SQLite"),
            ("gone", "g1", 1, "key_decision", 0, "Use SQLite"),
        ]
    )
    compactions = pl.DataFrame(
        {"id": ["c1", "noop", "c3", "g1"], "effective": [True, False, True, True]}
    )
    sessions = pl.DataFrame(
        {"session_id": ["s1", "gone"], "deleted_at": [None, "2026-11-30T00:00:00Z"]}
    )
    assert statuses(retention_items(items, compactions, sessions)) == [
        ("c1", "Use SQLite", "added"),
        ("c3", "Use SQLite", "kept"),
    ]


def test_a_repeated_item_counts_once_and_keeps_its_chain() -> None:
    """The same decision twice in c1 (once as a bullet) is one item; c2 keeps it, and the extra
    copy is neither an item of its own nor dropped at c2."""
    detail = retention_detail(
        frame(
            [
                ("s1", "c1", 1, "key_decision", 0, "Use SQLite"),
                ("s1", "c1", 1, "key_decision", 1, "- use sqlite."),
                ("s1", "c1", 1, "key_decision", 2, "Pin numpy"),
                ("s1", "c2", 2, "key_decision", 0, "use SQLite"),
                ("s1", "c2", 2, "key_decision", 1, "Use  SQLite"),
            ]
        )
    )
    assert [
        (r["compaction_id"], r["item"], r["status"], r["introduced_at"])
        for r in detail.iter_rows(named=True)
    ] == [
        ("c1", "Use SQLite", "added", "c1"),
        ("c1", "Pin numpy", "added", "c1"),
        ("c2", "use SQLite", "kept", "c1"),
        ("c2", "Pin numpy", "dropped", "c1"),
    ]


def test_the_same_text_across_a_session_boundary_is_not_kept() -> None:
    """s1's last compaction and s2's first hold the same text: s2's is added, not kept."""
    items = retention_items(
        frame(
            [
                ("s1", "a1", 1, "next_step", 0, "Run the tests"),
                ("s2", "b1", 1, "next_step", 0, "Run the tests"),
                ("s2", "b2", 2, "next_step", 0, "Run the tests"),
            ]
        )
    )
    assert statuses(items) == [
        ("a1", "Run the tests", "added"),
        ("b1", "Run the tests", "added"),
        ("b2", "Run the tests", "kept"),
    ]


def test_rows_in_any_order_give_the_store_order_result() -> None:
    """The store hands rows over in compaction order; any other order (a hand-built frame)
    gives the same result, item for item, when nothing ties (an item repeated in one anchor
    keeps its first row, and equal fuzzy scores go to the first item: both follow the input)."""
    words = ["alpha parser", "billing retry", "cache schema", "router queue", "index auth"]
    rows = [
        (session, f"{session}-c{k}", k, kind, position, f"{kind}: {words[k // 2 + position]}")
        for session in ("s1", "s2")
        for k in range(1, 5)
        for kind in ("user_intent", "key_decision", "next_step")
        for position in range(3)
    ]
    ordered = retention_detail(frame(rows))
    shuffled = retention_detail(frame(rows).sample(fraction=1.0, shuffle=True, seed=3))
    dropped = ordered.filter(pl.col("status") == "dropped")
    assert ordered.height == len(rows) + dropped.height
    assert {"added", "kept", "dropped"} <= set(ordered["status"])
    assert shuffled.equals(ordered)


def test_unknown_and_missing_anchor_types_are_matched_within_themselves() -> None:
    items = retention_items(
        frame(
            [
                ("s1", "c1", 1, "custom_note", 0, "Keep the logs"),
                ("s1", "c1", 1, None, 0, "Keep the logs"),  # type: ignore[list-item]
                ("s1", "c2", 2, "custom_note", 0, "Keep the logs"),
                ("s1", "c2", 2, None, 0, "Something else entirely"),  # type: ignore[list-item]
            ]
        )
    )
    assert [
        (r["compaction_id"], r["anchor_type"], r["status"]) for r in items.iter_rows(named=True)
    ] == [
        ("c1", "custom_note", "added"),
        ("c1", None, "added"),
        ("c2", "custom_note", "kept"),
        ("c2", None, "added"),
        ("c2", None, "dropped"),
    ]


def test_pairs_of_texts_keep_distinct_codes_past_four_byte_products() -> None:
    """Items are numbered with 4-byte ids; a pair's code, ``a * n + b``, must not wrap (it did
    past 46,341 distinct texts, and fuzzy scores were joined to the wrong pairs)."""
    n = 100_000
    a = np.array([n - 1, n - 2, 46_341], dtype=np.int32)
    b = np.array([n - 1, 0, 46_340], dtype=np.int32)
    codes = pair_codes(a, b, n)
    assert codes.tolist() == [(n - 1) * n + n - 1, (n - 2) * n, 46_341 * n + 46_340]


@pytest.mark.parametrize(
    "merged_into",
    ["Use SQLite for the cache", "Use SQLite for the caches"],
    ids=["exact copy", "near copy"],
)
def test_an_item_merged_into_another_survives_alike_into_an_exact_or_a_near_copy(
    merged_into: str,
) -> None:
    """Two decisions of c1 merged into one at c2: whether c2's text equals one of them
    exactly or only nearly, both of c1's items have a match at c2 (none is dropped)."""
    detail = retention_detail(
        frame(
            [
                ("s1", "c1", 10, "key_decision", 0, "Use SQLite for the cache"),
                ("s1", "c1", 10, "key_decision", 1, "Use SQLite for the cache layer"),
                ("s1", "c2", 20, "key_decision", 0, merged_into),
            ]
        )
    )
    assert detail.filter(pl.col("status") == "dropped").is_empty()
    survival = anchor_survival(detail).row(0, named=True)
    assert survival["anchor_type"] == "key_decision"
    assert survival["survival_next"] == 1.0
