"""Offloads job: per-tool volume and read-backs on a hand-built history whose later messages name
(or do not name) the offload files; answers written as literals."""

from __future__ import annotations

import json
from datetime import datetime

import polars as pl

from analytics.jobs.offloads import offload_read_backs, offloads_by_tool

ROOT = ".compactlens/tool_results"


def _offloads(*rows: tuple[str, str, str, str, int, int]) -> pl.DataFrame:
    """rows: session_id, tool_call_id, tool_name, file_path, bytes, lines."""
    return pl.DataFrame(
        [(f"rec-{row[0]}", *row) for row in rows],
        schema={
            "record_id": pl.String,
            "session_id": pl.String,
            "tool_call_id": pl.String,
            "tool_name": pl.String,
            "file_path": pl.String,
            "bytes": pl.Int64,
            "lines": pl.Int64,
        },
        orient="row",
    )


def _call(call_id: str, name: str, arguments: dict[str, str]) -> str:
    return json.dumps([{"id": call_id, "name": name, "arguments": json.dumps(arguments)}])


def _messages(*rows: tuple[str, int, str | None, str | None, str | None]) -> pl.DataFrame:
    """rows: session_id, idx, tool_call_id, tool_calls, content."""
    return pl.DataFrame(
        rows,
        schema={
            "session_id": pl.String,
            "idx": pl.Int64,
            "tool_call_id": pl.String,
            "tool_calls": pl.String,
            "content": pl.String,
        },
        orient="row",
    )


SESSIONS = pl.DataFrame(
    {
        "session_id": ["s", "meta", "gone"],
        "capture": ["full", "metadata", "full"],
        "deleted_at": [None, None, datetime(2026, 1, 1)],
    }
)

OFFLOADS = _offloads(
    ("s", "c1", "bash", f"{ROOT}/s/c1.txt", 30000, 300),
    ("s", "c2", "bash", f"{ROOT}/s/c2.txt", 10000, 100),
    ("s", "c3", "read_file", f"{ROOT}/s/c3.txt", 5000, 50),
    ("meta", "m1", "bash", f"{ROOT}/meta/m1.txt", 2000, 20),
    ("gone", "g1", "bash", f"{ROOT}/gone/g1.txt", 99999, 9),
)

# s: c1 is read back through a later read_file call naming its full path (idx 6); c3 is named by
# file name only, in a user's text (idx 7); c2 is named only BEFORE its own result (idx 0), which
# is not a read-back.
MESSAGES = _messages(
    ("s", 0, None, None, "earlier note mentioning c2.txt"),
    ("s", 1, None, _call("c1", "bash", {"cmd": "make"}), None),
    ("s", 2, "c1", None, "build log"),
    ("s", 3, "c2", None, "test log"),
    ("s", 4, "c3", None, "file body"),
    ("s", 5, None, None, "[offloaded to .compactlens/tool_results/s/c1.txt]"),
    ("s", 6, None, _call("c9", "read_file", {"path": f"{ROOT}/s/c1.txt"}), None),
    ("s", 7, None, None, "please look at c3.txt again"),
    ("s", 8, None, _call("c10", "read_file", {"path": f"{ROOT}/s/c1.txt"}), None),
    ("meta", 0, "m1", None, None),
    ("meta", 1, None, None, None),
    ("gone", 0, "g1", None, None),
    ("gone", 1, None, None, f"{ROOT}/gone/g1.txt"),
)


def test_each_offload_says_whether_and_where_it_was_first_named_again() -> None:
    frame = offload_read_backs(OFFLOADS, MESSAGES, SESSIONS)
    picked = ["tool_call_id", "result_index", "read_back", "first_read_index"]
    assert frame.select(picked).to_dicts() == [
        {"tool_call_id": "c1", "result_index": 2, "read_back": True, "first_read_index": 5},
        {"tool_call_id": "c2", "result_index": 3, "read_back": False, "first_read_index": None},
        {"tool_call_id": "c3", "result_index": 4, "read_back": True, "first_read_index": 7},
        {"tool_call_id": "m1", "result_index": 0, "read_back": None, "first_read_index": None},
    ]


def test_a_tool_call_naming_the_path_is_a_read_back() -> None:
    only_call = MESSAGES.filter(pl.col("idx") != 5)
    frame = offload_read_backs(OFFLOADS, only_call, SESSIONS)
    row = frame.filter(pl.col("tool_call_id") == "c1").row(0, named=True)
    assert row["read_back"] is True
    assert row["first_read_index"] == 6


def test_without_the_tool_result_any_message_naming_the_file_counts() -> None:
    no_result = MESSAGES.filter(pl.col("idx") != 3)
    frame = offload_read_backs(OFFLOADS, no_result, SESSIONS)
    row = frame.filter(pl.col("tool_call_id") == "c2").row(0, named=True)
    assert row["result_index"] is None
    assert row["first_read_index"] == 0


def test_per_tool_volume_and_read_back_rate_leave_metadata_sessions_unknown() -> None:
    frame = offloads_by_tool(OFFLOADS, MESSAGES, SESSIONS)
    assert frame.to_dicts() == [
        {
            "tool_name": "bash",
            "files": 3,
            "bytes": 42000,
            "lines": 420,
            "sessions": 2,
            "read_back": 1,
            "read_back_known": 2,
            "read_back_rate": 0.5,
        },
        {
            "tool_name": "read_file",
            "files": 1,
            "bytes": 5000,
            "lines": 50,
            "sessions": 1,
            "read_back": 1,
            "read_back_known": 1,
            "read_back_rate": 1.0,
        },
    ]


def test_a_tool_seen_only_in_metadata_sessions_has_no_rate() -> None:
    frame = offloads_by_tool(OFFLOADS.filter(pl.col("session_id") == "meta"), MESSAGES, SESSIONS)
    assert frame.select("tool_name", "read_back_known", "read_back_rate").to_dicts() == [
        {"tool_name": "bash", "read_back_known": 0, "read_back_rate": None}
    ]


def test_empty_frames_give_empty_results_with_their_columns() -> None:
    per_offload = offload_read_backs(OFFLOADS.head(0), MESSAGES.head(0), SESSIONS.head(0))
    assert per_offload.height == 0
    assert per_offload.columns == [
        "session_id",
        "record_id",
        "tool_call_id",
        "tool_name",
        "file_path",
        "bytes",
        "lines",
        "result_index",
        "read_back",
        "first_read_index",
    ]
    by_tool = offloads_by_tool(OFFLOADS.head(0), MESSAGES.head(0), SESSIONS.head(0))
    assert by_tool.height == 0
    assert by_tool.columns == [
        "tool_name",
        "files",
        "bytes",
        "lines",
        "sessions",
        "read_back",
        "read_back_known",
        "read_back_rate",
    ]


def test_offloads_with_no_messages_at_all_are_not_read_back() -> None:
    frame = offload_read_backs(OFFLOADS.head(1), MESSAGES.head(0), SESSIONS)
    assert frame.select("read_back", "first_read_index").to_dicts() == [
        {"read_back": False, "first_read_index": None}
    ]
