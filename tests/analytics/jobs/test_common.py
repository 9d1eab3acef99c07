"""The helpers every job starts with (analytics.jobs.common), on hand-built frames."""

from __future__ import annotations

import datetime as dt

import polars as pl

from analytics.jobs.common import drop_deleted

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
