"""The cause of each emergency, on hand-built frames: one session per cause, answers by hand.

Every session has a 1000-token window, the default thresholds (Warn 0.6, Full 0.8, Emergency
0.95) and no reserve; tokens of a message are bytes // 4 (times the emergency's estimator
slope). Each session's emergency is compaction ``e`` at seq 10, prepared at turn ``T``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pytest

from analytics.jobs.postmortem import postmortem_frames, postmortems

WINDOW = 1000


@dataclass
class Case:
    """One session: its turns (turn, tokens_before, history_messages), messages (role, bytes,
    tool_call_id), and what its emergency record, session and usage say."""

    sid: str
    turns: list[tuple[int, int, int]]
    messages: list[tuple[str, int, str | None]]
    trigger: str = "auto"
    estimator: tuple[float, float] = (1.0, 0.0)
    """The record's estimator: its slope and overhead (``bytes / 4 * slope + overhead``)."""
    error_codes: list[str] = field(default_factory=list)
    system_bytes: int | None = None
    history_missing: int | None = None
    usage: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    """(seq, input_tokens, estimated_input_tokens, raw_estimated_tokens, history_messages):
    the history length the prompt was sent with, as in the store"""
    earlier: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(seq, tier, tokens_before, tokens_after) of effective compactions before it"""


def _estimator(case: Case) -> dict[str, Any]:
    """The record's estimator columns as the store has them."""
    slope, overhead = case.estimator
    name = f"bytes/4*{slope:.3f}+{overhead:.0f}"
    return {"estimator": name, "estimator_slope": slope, "estimator_overhead": overhead}


def _frames(cases: list[Case]) -> dict[str, pl.DataFrame]:
    compactions: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    usage: list[dict[str, Any]] = []
    for c in cases:
        compactions.append(
            {"id": f"{c.sid}-e", "session_id": c.sid, "seq": 10, "tier": 4, "effective": True,
             "trigger": c.trigger, **_estimator(c), "error_codes": c.error_codes,
             "tokens_before": c.turns[-1][1], "tokens_after": 400, "context_window": WINDOW,
             "n_dropped": 1, "dropped_bytes": 400}
        )  # fmt: skip
        for seq, tier, before, after in c.earlier:
            compactions.append(
                {"id": f"{c.sid}-{seq}", "session_id": c.sid, "seq": seq, "tier": tier,
                 "effective": True, "trigger": "auto", **_estimator(c),
                 "error_codes": [], "tokens_before": before, "tokens_after": after,
                 "context_window": WINDOW, "n_dropped": 0, "dropped_bytes": 0}
            )  # fmt: skip
        for n, (turn, before, history) in enumerate(c.turns):
            seq = 11 if n == len(c.turns) - 1 else n + 1  # the last turn follows the record
            turns.append(
                {"session_id": c.sid, "seq": seq, "turn": turn, "tokens": before,
                 "tokens_before": before, "history_messages": history,
                 "context_window": WINDOW, "reserve_tokens": 0}
            )  # fmt: skip
        for idx, (role, size, call) in enumerate(c.messages):
            messages.append(
                {"session_id": c.sid, "idx": idx, "role": role, "bytes": size,
                 "tool_call_id": call, "name": "bash" if call else None, "tool_calls": None}
            )  # fmt: skip
        for seq, reported, estimated, raw, history in c.usage:
            usage.append(
                {"session_id": c.sid, "seq": seq, "input_tokens": reported,
                 "history_messages": history,
                 "estimated_input_tokens": estimated, "raw_estimated_tokens": raw}
            )  # fmt: skip
    sessions = pl.DataFrame(
        {
            "session_id": [c.sid for c in cases],
            "warn": [0.6] * len(cases),
            "soft": [0.7] * len(cases),
            "full": [0.8] * len(cases),
            "emergency": [0.95] * len(cases),
            "reserve_tokens": [0] * len(cases),
            "system_bytes": [c.system_bytes for c in cases],
            "history_missing_tokens": [c.history_missing for c in cases],
            "deleted_at": [None] * len(cases),
        },
        schema_overrides={
            "system_bytes": pl.Int64,
            "history_missing_tokens": pl.Int64,
            "deleted_at": pl.Datetime("us", "UTC"),
        },
    )
    usage_schema = {
        "session_id": pl.String,
        "seq": pl.Int64,
        "history_messages": pl.Int64,
        "input_tokens": pl.Int64,
        "estimated_input_tokens": pl.Int64,
        "raw_estimated_tokens": pl.Int64,
    }
    return {
        "compactions": pl.DataFrame(compactions, schema_overrides={"n_dropped": pl.Int64}),
        "turns": pl.DataFrame(turns),
        "messages": pl.DataFrame(messages, schema_overrides={"tool_call_id": pl.String}),
        "sessions": sessions,
        "usage": pl.DataFrame(usage, schema=usage_schema),
    }


def _one(case: Case) -> dict[str, Any]:
    f = _frames([case])
    (found,) = postmortems(
        f["compactions"], f["turns"], f["messages"], None, f["sessions"], usage=f["usage"]
    )
    assert found["cause"] is not None and found["explanation"]
    return found


def test_a_manual_compact_that_ends_in_emergency_is_manual() -> None:
    found = _one(Case("m", [(1, 300, 1), (2, 960, 3)], [("user", 400, None)] * 3, "manual"))
    assert found["cause"] == "manual"
    assert "manual /compact at turn 2" in found["explanation"]


def test_system_and_task_over_the_threshold_are_a_fixed_prompt_with_the_window_needed() -> None:
    # system 3600 bytes (900 tokens) + task 400 bytes (100): 1000 tokens, 100% of the window
    found = _one(Case("f", [(1, 1000, 1)], [("user", 400, None)], system_bytes=3600))
    assert found["cause"] == "fixed_prompt"
    assert found["fixed_tokens"] == 1000
    assert found["newest_tokens"] == 0  # the task is part of the fixed prompt, not counted twice
    assert found["window_needed"] == 1667  # 1000 / 0.6 = 1666.7: the first window under Warn
    assert "use a window of at least 1,667 tokens" in found["explanation"]


def test_prompts_the_provider_counted_over_the_threshold_are_a_fixed_prompt() -> None:
    # the transcript holds 40 bytes; the harness sent 960 and 980 tokens (hidden system,
    # tools), which the calibrated estimator learned as a 950-token overhead
    case = Case("r", [(1, 10, 1), (2, 970, 3)], [("user", 40, None)] * 3)
    case.estimator = (1.0, 950.0)
    case.usage = [(2, 960, 10, 10, 1), (12, 980, 970, 20, 3)]
    found = _one(case)
    assert (found["cause"], found["fixed_tokens"]) == ("fixed_prompt", 960)  # 10 + 950
    assert found["unavoidable"] and found["window_needed"] > WINDOW
    assert "the provider counted no prompt of it under 960 tokens" in found["explanation"]


def test_a_prompt_that_shrank_bounds_the_fixed_part_from_then_on() -> None:
    # the first prompt was 990 tokens, the second only 500 (the harness dropped a repo map)
    case = Case("k", [(1, 10, 1), (2, 970, 3)], [("user", 40, None)] * 3)
    case.estimator = (1.0, 980.0)
    case.usage = [(2, 990, 10, 10, 1), (12, 500, 970, 20, 3)]
    found = _one(case)
    assert found["fixed_tokens"] == 10 + (500 - 20)  # the task and the smaller hidden part
    assert found["cause"] != "fixed_prompt"
    early = Case("k2", [(1, 10, 1), (2, 970, 3)], [("user", 40, None)] * 3)
    early.estimator = (1.0, 980.0)
    early.usage = [(2, 990, 10, 10, 1), (12, 500, 970, 20, 4)]  # after the emergency's turn
    found = _one(early)
    assert found["fixed_tokens"] == 990 and found["cause"] == "fixed_prompt"


def test_usage_that_starts_late_never_raises_the_fixed_part() -> None:
    # an agent reported usage only from its last turn, of a 970-token prompt: that says how
    # big the context was, not that 970 tokens are fixed (the estimate is 10: the task)
    case = Case("late", [(1, 500, 1), (2, 970, 3)], [("user", 40, None)] * 3)
    case.usage = [(12, 970, 970, 970, 3)]
    found = _one(case)
    assert found["fixed_tokens"] == 10
    assert found["cause"] == "growth" and found["window_needed"] is None


def test_history_the_transcript_lacks_is_said_and_never_counted_as_fixed() -> None:
    # the file starts mid-session: 920 tokens of history it does not hold were in every prompt
    # the provider counted (the smallest 940), and the estimator carried them as overhead
    case = Case("mid", [(1, 940, 1), (2, 970, 3)], [("user", 40, None)] * 3)
    case.estimator, case.history_missing = (1.0, 930.0), 920
    case.usage = [(2, 940, 10, 10, 1), (12, 960, 940, 20, 3)]
    found = _one(case)
    assert found["fixed_tokens"] == 940 - 920  # never more than the smallest report less it
    assert found["fixed_tokens"] <= found["smallest_prompt_tokens"]
    assert found["cause"] == "history_missing" and found["unavoidable"]
    assert found["history_missing_tokens"] == 920
    assert "starts mid-session: about 920 tokens" in found["explanation"]
    # carried: 20 fixed + 920 history (under Warn), and the newest turn's 20 (under Emergency)
    assert found["window_needed"] == max(940 * 10 // 6 + 1, 960 * 100 // 95 + 1)


def test_the_newest_turns_words_over_the_threshold_with_the_fixed_part_are_a_large_turn() -> None:
    # fixed 900; the last turn added an assistant reply of 60 tokens and a 2000-token result
    msgs = [("user", 400, None), ("assistant", 240, None), ("tool", 8000, "t1")]
    case = Case("n", [(1, 900, 1), (2, 1000, 3)], msgs, system_bytes=3200)
    found = _one(case)
    assert (found["fixed_tokens"], found["newest_tokens"]) == (900, 60)
    assert found["cause"] == "large_turn"  # 900 + 60 >= 950: no compaction makes room
    assert found["unavoidable"]
    assert found["window_needed"] == 1501  # 900 / 0.6 = 1500 (under Warn); 960 / 0.95 = 1010.5


def test_a_failed_summary_is_the_cause_with_its_code() -> None:
    codes = ["summarizer_failed:TimeoutError", "emergency_truncation"]
    found = _one(Case("s", [(1, 500, 1), (2, 960, 3)], [("user", 40, None)] * 3, error_codes=codes))
    assert (found["cause"], found["error_code"]) == (
        "summarizer_failed",
        "summarizer_failed:TimeoutError",
    )
    assert "(summarizer_failed:TimeoutError)" in found["explanation"]


def test_an_estimator_that_moved_up_past_the_threshold_is_an_undercount() -> None:
    # turn 1 estimated 200 (factor 1.0); the report doubled the factor: 960 at turn 2 was 480
    case = Case("u", [(1, 200, 1), (2, 960, 3)], [("user", 40, None)] * 3)
    case.estimator, case.usage = (2.0, 0.0), [(5, 400, 200, 200, 1)]
    found = _one(case)
    assert found["cause"] == "undercount"
    assert found["estimator_factor"] == {"before": 1.0, "after": 2.0}
    assert "from 1.00 to 2.00" in found["explanation"] and "48%" in found["explanation"]


def test_the_turns_new_messages_together_are_the_burst() -> None:
    # three parallel results of one turn after its reply; none alone holds 25% of the window
    msgs = [("user", 400, None), ("assistant", 400, None), ("tool", 960, "t1"),
            ("tool", 280, "t2"), ("tool", 980, "t3")]  # fmt: skip
    found = _one(Case("b", [(1, 300, 1), (2, 990, 5)], msgs))
    sizes = [size // 4 for _role, size, _call in msgs[1:]]
    assert max(sizes) / WINDOW < 0.25
    assert found["cause"] == "burst"
    assert found["burst"] == {
        "turn": 2,
        "history_index": 1,
        "messages": 4,
        "role": "tool",
        "tool_name": "bash",
        "tokens": sum(sizes),
    }
    assert (
        f"added {sum(sizes):,} tokens, {sum(sizes) / WINDOW:.0%} of the window"
        in (found["explanation"])
    )


def test_a_floor_over_soft_after_every_compaction_is_unavoidable() -> None:
    # fixed 610 (system 600, task 10); the newest exchange is a 10-token call and a 100-token
    # result: 720 tokens no config takes out, over Soft (700); the turn before was at Full
    msgs = [("user", 40, None), ("assistant", 40, None), ("tool", 400, "t1")]
    case = Case("fl", [(1, 850, 1), (2, 960, 3)], msgs, system_bytes=2400)
    found = _one(case)
    assert found["floor_tokens"] == 600 + 10 + 10 + 100
    assert found["cause"] == "floor" and found["unavoidable"]
    assert found["window_needed"] == int(720 / 0.7) + 1


def test_steady_growth_past_earlier_compactions_is_growth_with_their_ratios() -> None:
    msgs: list[tuple[str, int, str | None]] = [("user", 400, None), *[("assistant", 100, None)] * 4]
    case = Case("g", [(1, 700, 1), (2, 900, 3), (3, 960, 5)], msgs)
    case.earlier = [(4, 2, 750, 500)]
    found = _one(case)
    assert found["cause"] == "growth"
    assert found["compactions_before"] == [{"tier": 2, "ratio_before": 0.75, "ratio_after": 0.5}]
    assert "1 Soft/Full compaction before it" in found["explanation"]


def test_every_emergency_of_many_sessions_gets_exactly_one_cause_in_order() -> None:
    cases = [
        Case("a", [(1, 300, 1), (2, 960, 3)], [("user", 400, None)] * 3, "manual"),
        Case("b", [(1, 1000, 1)], [("user", 400, None)], system_bytes=3600),
        Case(
            "c", [(1, 700, 1), (2, 960, 3)], [("user", 400, None), *[("assistant", 100, None)] * 2]
        ),
    ]
    f = _frames(cases)
    frames = postmortem_frames(
        f["compactions"], f["turns"], f["messages"], None, f["sessions"], usage=f["usage"]
    )
    got = frames.emergencies.select("session_id", "cause").rows()
    assert got == [("a", "manual"), ("b", "fixed_prompt"), ("c", "growth")]


@pytest.mark.parametrize("missing", ["usage", "system_bytes"])
def test_missing_inputs_make_a_cause_less_likely_never_an_error(missing: str) -> None:
    case = Case("x", [(1, 300, 1), (2, 960, 3)], [("user", 40, None)] * 3)
    f = _frames([case])
    usage = None if missing == "usage" else f["usage"]
    sessions = f["sessions"].drop("system_bytes") if missing == "system_bytes" else f["sessions"]
    (found,) = postmortems(f["compactions"], f["turns"], f["messages"], None, sessions, usage=usage)
    assert found["cause"] == "growth"
