"""The helpers every job starts with (analytics.jobs.common), on hand-built frames."""

from __future__ import annotations

import datetime as dt

import polars as pl

from analytics.jobs.common import drop_deleted, in_session_order

DELETED_AT = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


def _frame() -> pl.DataFrame:
    return pl.DataFrame({"session_id": ["a", "b", None, "c", "b"], "n": [1, 2, 3, 4, 5]})


def _sessions(deleted: dict[str, dt.datetime | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {"session_id": list(deleted), "deleted_at": list(deleted.values())},
        schema={"session_id": pl.String, "deleted_at": pl.Datetime("us", "UTC")},
    )


def test_rows_of_deleted_sessions_go_while_null_and_unknown_sessions_stay() -> None:
    kept = drop_deleted(_frame(), _sessions({"a": None, "b": DELETED_AT}))

    # "c" is not in sessions (the store may be mid-projection); a null id is not a deleted one
    assert kept["n"].to_list() == [1, 3, 4]


def test_with_nothing_deleted_the_frame_comes_back_whole() -> None:
    frame = _frame()

    assert drop_deleted(frame, _sessions({"a": None, "b": None})).equals(frame)
    assert drop_deleted(frame, pl.DataFrame({"session_id": ["a"]})).equals(frame)


def test_a_frame_in_session_order_is_returned_as_it_is() -> None:
    frame = pl.DataFrame({"session_id": ["a", "a", "b", "b"], "seq": [1, 5, 2, 2]})

    assert in_session_order(frame) is frame


def test_a_frame_out_of_order_is_sorted_with_null_keys_last() -> None:
    frame = pl.DataFrame(
        {"session_id": ["b", "a", "a", "a", None], "seq": [1, None, 7, 3, 0], "n": [1, 2, 3, 4, 5]}
    )

    ordered = in_session_order(frame)

    assert ordered["n"].to_list() == [4, 3, 2, 1, 5]
    # a null seq inside a session is out of order even where the ids are in order
    with_null = pl.DataFrame({"session_id": ["a", "a"], "seq": [None, 1], "n": [1, 2]})
    assert in_session_order(with_null)["n"].to_list() == [2, 1]
