"""Emergency post-mortems over hand-built frames whose answers are written out as literals.

Session s1 (window 1000, reserve 100): four turns, then an effective Emergency at seq 8, whose
turn (5) is prepared at seq 9 with 9 history messages, decided on 1000 tokens before it
compacted; a later no-op Emergency and a Full. Session s2 (window 2000): an Emergency at its very
first turn (decided on 2000 tokens), losses only in its views.
Session s3 is deleted. Tokens of a message are bytes // 4.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import polars as pl
import pytest

from analytics.jobs.postmortem import postmortem_frames, postmortems
from analytics.jobs.tools import tool_names


def _calls(*pairs: tuple[str, str]) -> str:
    return json.dumps([{"id": i, "name": n, "arguments": "{}"} for i, n in pairs])


def _turns() -> pl.DataFrame:
    rows = [
        # session, seq, turn, tokens, history_messages, window, reserve, tokens_before
        ("s1", 1, 1, 100, 1, 1000, 100, 100),
        ("s1", 3, 2, 200, 3, 1000, 100, 200),
        ("s1", 5, 3, 400, 5, 1000, 100, 400),
        ("s1", 7, 4, 500, 7, 1000, 100, 500),
        ("s1", 9, 5, 250, 9, 1000, 100, 1000),
        ("s1", 11, 6, 300, 11, 1000, 100, 300),
        ("s2", 3, 1, 500, 1, 2000, 0, 2000),
        ("s3", 3, 1, 500, 1, 2000, 0, 2000),
    ]
    names = ["session_id", "seq", "turn", "tokens", "history_messages", "context_window"]
    return pl.DataFrame(rows, schema=[*names, "reserve_tokens", "tokens_before"], orient="row")


def _compactions() -> pl.DataFrame:
    rows = [
        # id, session, seq, tier, effective, n_dropped, dropped_bytes
        ("e1", "s1", 8, 4, True, 3, 2003),
        ("noop", "s1", 12, 4, False, 0, 0),
        ("full", "s1", 6, 3, True, 0, 0),
        ("e2", "s2", 2, 4, True, None, None),
        ("e3", "s3", 2, 4, True, 1, 40),
    ]
    schema = {
        "id": pl.String,
        "session_id": pl.String,
        "seq": pl.Int64,
        "tier": pl.Int64,
        "effective": pl.Boolean,
        "n_dropped": pl.Int64,
        "dropped_bytes": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _messages() -> pl.DataFrame:
    rows = [
        # session, idx, role, bytes, tool_call_id, tool_calls, name
        ("s1", 0, "user", 400, None, None, None),
        ("s1", 1, "assistant", 80, None, _calls(("c1", "read_file")), None),
        ("s1", 2, "tool", 800, "c1", None, None),
        ("s1", 3, "assistant", 40, None, _calls(("c2", "grep")), None),
        ("s1", 4, "tool", 1600, "c2", None, None),
        ("s1", 5, "assistant", 40, None, _calls(("c3", "bash")), None),
        ("s1", 6, "user", 2000, "c3", None, None),  # harness9: a result sent as role user
        ("s1", 7, "assistant", 1203, None, "[]", None),
        ("s1", 8, "tool", 800, "zz", None, "web_fetch"),  # answers no recorded call
        ("s1", 9, "tool", 99999, "c3", None, None),  # after the emergency's turn
        ("s2", 0, "user", 4000, None, None, None),
        ("s2", 1, "assistant", 8, None, None, None),
        ("s3", 0, "user", 4000, None, None, None),
    ]
    schema = {
        "session_id": pl.String,
        "idx": pl.Int64,
        "role": pl.String,
        "bytes": pl.Int64,
        "tool_call_id": pl.String,
        "tool_calls": pl.String,
        "name": pl.String,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _views() -> pl.DataFrame:
    rows = [
        # compaction, side, position, history_index, role, bytes, status
        ("e2", "before", 0, None, "system", 100, "system"),
        ("e2", "before", 1, 0, "user", 400, "dropped"),
        ("e2", "before", 2, 1, "assistant", 1000, "dropped"),
        ("e2", "before", 3, 2, "tool", 3000, "kept"),
        ("e2", "after", 1, 2, "tool", 3000, "kept"),
        ("e1", "before", 1, 0, "user", 9999, "dropped"),  # ignored: e1 says what it dropped
    ]
    names = ["compaction_id", "side", "position", "history_index", "role", "bytes", "status"]
    frame = pl.DataFrame(rows, schema=names, orient="row")
    return frame.with_columns(session_id=pl.lit("s"), sha256=pl.lit("x"))


def _sessions() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "session_id": ["s1", "s2", "s3"],
            "deleted_at": [None, None, datetime(2026, 1, 2)],
        }
    )


def _run(**kwargs: Any) -> dict[str, dict[str, Any]]:
    found = postmortems(_compactions(), _turns(), _messages(), _views(), _sessions(), **kwargs)
    return {p["compaction_id"]: p for p in found}


def test_only_effective_emergencies_of_live_sessions_get_a_postmortem() -> None:
    found = postmortems(_compactions(), _turns(), _messages(), _views(), _sessions())
    assert [(p["session_id"], p["compaction_id"]) for p in found] == [("s1", "e1"), ("s2", "e2")]


def test_deleted_sessions_count_when_no_sessions_frame_is_given() -> None:
    found = postmortems(_compactions(), _turns(), _messages())
    assert [p["compaction_id"] for p in found] == ["e1", "e2", "e3"]


def test_the_emergency_turn_is_the_turn_prepared_after_the_compaction() -> None:
    found = _run()
    assert found["e1"]["turn"] == 5
    assert found["e2"]["turn"] == 1


def test_lead_up_is_the_decided_ratio_of_every_turn_ending_on_the_emergency_turn() -> None:
    assert _run()["e1"]["lead_up"] == [
        {"turn": 1, "ratio": 0.2},
        {"turn": 2, "ratio": 0.3},
        {"turn": 3, "ratio": 0.5},
        {"turn": 4, "ratio": 0.6},
        {"turn": 5, "ratio": 1.1},  # (1000 + 100) / 1000: the estimate Emergency fired on
    ]


def test_lead_up_keeps_the_last_n_turns_and_the_emergency_turn() -> None:
    assert _run(lead_up_turns=2)["e1"]["lead_up"] == [
        {"turn": 3, "ratio": 0.5},
        {"turn": 4, "ratio": 0.6},
        {"turn": 5, "ratio": 1.1},
    ]


def test_an_emergency_at_the_first_turn_has_only_its_own_turn_as_lead_up() -> None:
    found = _run()["e2"]
    assert found["lead_up"] == [{"turn": 1, "ratio": 1.0}]
    assert found["top_contributors"] == [
        {"history_index": 0, "role": "user", "tool_name": None, "tokens": 1000}
    ]


def test_top_contributors_rank_lead_up_messages_with_the_tool_they_answer() -> None:
    assert _run()["e1"]["top_contributors"] == [
        {"history_index": 6, "role": "user", "tool_name": "bash", "tokens": 500},
        {"history_index": 4, "role": "tool", "tool_name": "grep", "tokens": 400},
        {"history_index": 7, "role": "assistant", "tool_name": None, "tokens": 300},
        {"history_index": 2, "role": "tool", "tool_name": "read_file", "tokens": 200},
        {"history_index": 8, "role": "tool", "tool_name": "web_fetch", "tokens": 200},
    ]


def test_top_contributors_start_at_the_first_lead_up_turn() -> None:
    assert _run(lead_up_turns=2, top=10)["e1"]["top_contributors"] == [
        {"history_index": 6, "role": "user", "tool_name": "bash", "tokens": 500},
        {"history_index": 7, "role": "assistant", "tool_name": None, "tokens": 300},
        {"history_index": 8, "role": "tool", "tool_name": "web_fetch", "tokens": 200},
        {"history_index": 5, "role": "assistant", "tool_name": "bash", "tokens": 10},
    ]


def test_dropped_comes_from_the_compaction_else_from_its_before_view() -> None:
    found = _run()
    assert found["e1"]["dropped"] == {"messages": 3, "tokens": 500}
    assert found["e2"]["dropped"] == {"messages": 2, "tokens": 350}


def test_dropped_is_null_when_neither_the_compaction_nor_views_say() -> None:
    found = postmortems(_compactions(), _turns(), _messages())
    assert found[1]["dropped"] == {"messages": None, "tokens": None}


def test_a_tool_result_is_named_after_the_latest_earlier_call_with_its_id() -> None:
    messages = pl.DataFrame(
        {
            "session_id": ["s"] * 4,
            "idx": [0, 1, 2, 3],
            "tool_call_id": [None, "a", None, "a"],
            "tool_calls": [_calls(("a", "ls")), None, _calls(("a", "cat"), ("b", "rg")), None],
        }
    )
    assert tool_names(messages).sort("idx")["tool_name"].to_list() == ["ls", "ls", "cat, rg", "cat"]


def test_postmortems_carry_the_spec_keys_and_merge_given_counterfactuals() -> None:
    given = {
        "e1": {
            "counterfactuals": [
                {"change": "tool_time_offload", "emergency_avoided": True, "tokens_billed": 9}
            ],
            "smallest_change": "tool_time_offload",
            "summarizer": "extractive",
        }
    }
    found = _run(counterfactuals=given)
    spec_keys = {
        "session_id",
        "compaction_id",
        "turn",
        "lead_up",
        "top_contributors",
        "dropped",
        "counterfactuals",
        "smallest_change",
    }
    assert spec_keys <= set(found["e1"]) and spec_keys <= set(found["e2"])
    assert found["e1"]["smallest_change"] == "tool_time_offload"
    assert found["e1"]["summarizer"] == "extractive"
    assert found["e2"]["counterfactuals"] == []
    assert found["e2"]["smallest_change"] is None
    json.dumps(list(found.values()))  # serialises as it is


def test_no_emergency_gives_no_postmortem_and_empty_frames() -> None:
    calm = _compactions().filter(pl.col("tier") != 4)
    frames = postmortem_frames(calm, _turns(), _messages())
    assert postmortems(calm, _turns(), _messages()) == []
    assert (frames.emergencies.height, frames.lead_up.height, frames.top_contributors.height) == (
        0,
        0,
        0,
    )


def test_tool_names_come_from_the_stored_id_and_name_lists_without_any_content() -> None:
    # a metadata-capture session: no tool_calls text, only the lists every capture stores
    messages = pl.DataFrame(
        {
            "session_id": ["m", "m", "m"],
            "idx": [0, 1, 2],
            "tool_call_id": [None, "c1", "c2"],
            "tool_calls": [None, None, None],
            "tool_call_ids": [["c1", "c2"], [], []],
            "tool_names": [["bash", "read_file"], [], []],
            "name": [None, None, None],
        },
        schema_overrides={"tool_calls": pl.String, "name": pl.String},
    )

    names = tool_names(messages).sort("idx")

    assert names.get_column("tool_name").to_list() == ["bash, read_file", "bash", "read_file"]


@pytest.mark.parametrize("dropped", [("tool_calls",), ("tool_call_id",), ("tool_calls", "name")])
def test_tool_names_of_a_frame_without_call_columns_are_null_not_an_error(
    dropped: tuple[str, ...],
) -> None:
    # the module promises missing inputs are never an error: a hand-built frame may lack them
    messages = pl.DataFrame(
        {
            "session_id": ["h", "h"],
            "idx": [0, 1],
            "tool_call_id": [None, "c1"],
            "tool_calls": ['[{"id": "c1", "name": "ls", "arguments": "{}"}]', None],
            "name": [None, "own"],
        }
    ).drop(*dropped)

    names = tool_names(messages).sort("idx").get_column("tool_name").to_list()

    calls_known = "tool_calls" in messages.columns
    answers_known = "tool_call_id" in messages.columns
    own = "own" if "name" in messages.columns else None
    assert names == [
        "ls" if calls_known else None,
        ("ls" if calls_known else own) if answers_known else None,
    ]
