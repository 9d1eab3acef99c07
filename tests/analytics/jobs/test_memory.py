"""Survival of anchor items by the number of compactions they went through (issue 31, item 4).

Hand-built sessions whose anchors are written out compaction by compaction: the expected curve
is counted here from what each compaction's anchor list holds, item by item; then the real
matching (``retention_detail``) and the curve must agree with it.
"""

from __future__ import annotations

import polars as pl

from analytics.jobs.memory import survival_by_compactions
from analytics.jobs.retention import retention_detail

# session -> its compactions' decision lists, in order
SESSIONS = {
    "s1": [
        ["use sqlite for the cache", "keep the public API"],
        ["use sqlite for the cache", "keep the public API", "retry on timeout"],
        ["use sqlite for the cache", "retry on timeout"],
        ["retry on timeout"],
    ],
    "s2": [
        ["port the parser to rust"],
        ["port the parser to rust", "drop python 3.9"],
    ],
    "s3": [["a lone compaction item"]],
}


def _items() -> pl.DataFrame:
    rows = []
    for sid, compactions in SESSIONS.items():
        for k, items in enumerate(compactions):
            for position, item in enumerate(items):
                rows.append(
                    {
                        "session_id": sid,
                        "compaction_id": f"{sid}-c{k}",
                        "seq": 10 * (k + 1),
                        "anchor_type": "key_decision",
                        "position": position,
                        "item": item,
                    }
                )
    return pl.DataFrame(rows)


def _expected() -> dict[int, tuple[int, int]]:
    """k -> (items that went through k compactions, of them still present after k)."""
    out: dict[int, list[int]] = {}
    for compactions in SESSIONS.values():
        seen: set[str] = set()
        for i, items in enumerate(compactions):
            for item in items:
                if item in seen:
                    continue
                seen.add(item)
                for k in range(1, len(compactions) - i):
                    present = all(item in compactions[i + j] for j in range(1, k + 1))
                    went, kept = out.setdefault(k, [0, 0])
                    out[k] = [went + 1, kept + int(present)]
    return {k: (v[0], v[1]) for k, v in out.items()}


def test_the_curve_counts_what_each_compaction_kept() -> None:
    curve = survival_by_compactions(retention_detail(_items()))
    found = {r["compactions"]: (r["items"], r["survived"]) for r in curve.iter_rows(named=True)}
    assert found == _expected()
    assert found[1] == (4, 4)  # "drop python 3.9" has no compaction after it
    assert found[2] == (3, 2)  # "keep the public API" survived one more, then vanished


def test_by_type_splits_the_same_counts() -> None:
    detail = retention_detail(_items())
    fleet = survival_by_compactions(detail)
    typed = survival_by_compactions(detail, by_type=True)
    assert set(typed.get_column("anchor_type")) == {"key_decision"}
    assert typed.drop("anchor_type").equals(fleet.drop("anchor_type"))


def test_nothing_to_count_gives_an_empty_curve() -> None:
    lone = _items().filter(pl.col("session_id") == "s3")
    assert survival_by_compactions(retention_detail(lone)).is_empty()
    assert survival_by_compactions(pl.DataFrame()).is_empty()
