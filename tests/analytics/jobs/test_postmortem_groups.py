"""Post-mortems grouped by session and cause, over hand-built post-mortems.

Each post-mortem here carries only the keys the grouping reads (as ``postmortem_dicts`` gives
them, counterfactuals merged). The expected figures are counted from the inputs in each test;
the properties hold for any turns and any mix of sessions and causes.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from analytics.jobs.explanations import fix_words
from analytics.jobs.postmortem_groups import (
    fleet_summary,
    is_settled,
    postmortem_groups,
    sampled_groups,
    turn_ranges,
    turns_text,
)


def _pm(
    session: str,
    cause: str | None,
    turn: int | None,
    *,
    verified: bool = False,
    window_needed: int | None = None,
    dropped: tuple[int, int] = (1, 100),
) -> dict[str, Any]:
    change = f"min_tail_messages at turn {turn}" if verified else None
    return {
        "session_id": session,
        "compaction_id": f"{session}-{turn}-{cause}",
        "turn": turn,
        "cause": cause,
        "explanation": f"{cause} at turn {turn}",
        "window_needed": window_needed,
        "lead_up": [{"turn": turn, "ratio": 0.97}] if turn is not None else [],
        "top_contributors": [{"history_index": 1, "role": "tool", "tokens": 50}],
        "dropped": {"messages": dropped[0], "tokens": dropped[1]},
        "counterfactuals": [{"change": "x"}] * 3,
        "counterfactual_status": "computed",
        "reproduced": True,
        "smallest_change": change,
        "smallest_change_detail": change,
        "smallest_change_config": {"min_tail_messages": 3} if verified else None,
        "smallest_change_verified": verified if change else None,
    }


def test_turns_read_as_compact_ranges() -> None:
    turns = [*range(40, 53), 23, *range(12, 20)]

    assert turn_ranges(turns) == [(12, 19), (23, 23), (40, 52)]
    assert turns_text(turns) == "turns 12–19, 23, 40–52"
    assert turns_text([7]) == "turn 7"
    assert turns_text([7, 7]) == "turn 7"
    assert turns_text([3, None]) == "turns 3, ?"
    assert turns_text([None]) == "turn ?"


@given(st.lists(st.one_of(st.none(), st.integers(0, 60)), max_size=40))
def test_the_ranges_hold_each_known_turn_once_and_nothing_else(turns: list[int | None]) -> None:
    runs = turn_ranges(turns)

    covered = [t for a, b in runs for t in range(a, b + 1)]
    assert covered == sorted({t for t in turns if t is not None})
    assert all(b + 1 < a2 for (_, b), (a2, _) in itertools.pairwise(runs))


def _mixed() -> list[dict[str, Any]]:
    return [
        *(_pm("s1", "fixed_prompt", t, window_needed=20_000 + t) for t in range(2, 12)),
        _pm("s1", "growth", 14),
        _pm("s1", "growth", 15, verified=True),
        _pm("s1", "growth", 30, verified=True),
        _pm("s2", "burst", 5, dropped=(2, 300)),
        _pm("s2", None, 9),
        *(_pm("s3", "growth", t) for t in (3, 4, 8)),
    ]


def test_each_emergency_is_in_the_one_group_of_its_session_and_cause() -> None:
    found = _mixed()

    groups = postmortem_groups(found)

    keys = [(g["session_id"], g["cause"]) for g in groups]
    assert len(keys) == len(set(keys)) == len({(p["session_id"], p["cause"]) for p in found})
    listed = Counter(c for g in groups for c in g["compaction_ids"])
    assert listed == Counter(p["compaction_id"] for p in found)
    for g in groups:
        members = [
            p for p in found if (p["session_id"], p["cause"]) == (g["session_id"], g["cause"])
        ]
        assert g["count"] == len(members)
        assert g["turns"] == sorted(p["turn"] for p in members)
        assert g["turns_text"] == turns_text(p["turn"] for p in members)
        assert g["dropped"]["tokens"] == sum(p["dropped"]["tokens"] for p in members)
        assert g["settled"] == sum(is_settled(p) for p in members)
        assert g["settled_share"] == g["settled"] / g["count"]


def test_a_session_shows_its_largest_group_first() -> None:
    groups = postmortem_groups(_mixed())

    s1 = [g for g in groups if g["session_id"] == "s1"]
    assert [g["cause"] for g in s1] == ["fixed_prompt", "growth"]
    assert [g["session_id"] for g in groups] == ["s1", "s1", "s2", "s2", "s3"]  # input order
    s2 = [g for g in groups if g["session_id"] == "s2"]
    assert [g["turns"][0] for g in s2] == [5, 9]  # equal counts: earlier first


def test_the_fix_is_the_first_verified_one_and_its_lead_up_comes_with_it() -> None:
    found = _mixed()

    growth = next(g for g in postmortem_groups(found) if g["cause"] == "growth")

    first_verified = next(p for p in found if p["cause"] == "growth" and p["turn"] == 15)
    assert growth["representative"] == {
        "compaction_id": first_verified["compaction_id"],
        "turn": 15,
    }
    assert growth["lead_up"] == first_verified["lead_up"]
    assert growth["fix"]["verified"] is True
    assert growth["fix"]["words"] == fix_words(first_verified)
    assert growth["fix"]["config"] == first_verified["smallest_change_config"]
    assert growth["verified_fixes"] == 2
    assert growth["settled"] == 2 and growth["count"] == 3


def test_without_a_verified_fix_the_first_emergency_stands_for_the_group() -> None:
    found = _mixed()

    s3 = next(g for g in postmortem_groups(found) if g["session_id"] == "s3")

    assert s3["representative"]["turn"] == 3
    assert s3["explanation"] == "growth at turn 3"
    assert s3["fix"]["verified"] is False and s3["settled"] == 0


def test_an_unavoidable_group_needs_the_largest_window_of_its_emergencies() -> None:
    found = _mixed()

    fixed = next(g for g in postmortem_groups(found) if g["cause"] == "fixed_prompt")

    largest = max(p["window_needed"] for p in found if p["cause"] == "fixed_prompt")
    assert fixed["window_needed"] == largest
    first = min(p["window_needed"] for p in found if p["cause"] == "fixed_prompt")
    assert fixed["fix"]["words"].endswith(
        f"a window of {largest:,}+ tokens (for all {fixed['count']}; turn 2 alone needs {first:,})"
    )
    assert fixed["settled_share"] == 1.0


def test_the_fleet_summary_counts_every_emergency_once() -> None:
    found = _mixed()

    summary = fleet_summary(postmortem_groups(found))

    assert summary["emergencies"] == len(found)
    assert summary["sessions"] == len({p["session_id"] for p in found})
    causes = Counter(str(p["cause"] or "unknown") for p in found)
    assert summary["by_cause"] == dict(causes)
    assert list(summary["by_cause"]) == sorted(causes, key=lambda c: (-causes[c], c))
    settled = sum(is_settled(p) for p in found)
    assert summary["settled"] == settled and summary["settled_share"] == settled / len(found)
    assert fleet_summary([])["settled_share"] is None


def test_the_sample_takes_one_group_from_each_session_with_most_emergencies() -> None:
    found = _mixed()
    groups = postmortem_groups(found)
    per_session = Counter(p["session_id"] for p in found)

    sample = sampled_groups(groups, 2)

    assert [g["session_id"] for g in sample] == [s for s, _ in per_session.most_common(2)]
    for g in sample:
        own = [o["count"] for o in groups if o["session_id"] == g["session_id"]]
        assert g["count"] == max(own)
    assert len(sampled_groups(groups, 10)) == len(per_session)
