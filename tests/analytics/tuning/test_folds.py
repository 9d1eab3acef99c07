"""Folds by transcript file (issue 18 item 6): a main chain and its sidechains stay on one side,
and the spread of the recommendation across the tuning folds."""

from __future__ import annotations

from pathlib import Path, PurePath

from analytics.tuning import SessionMetrics, SessionSource, StrategySpec, split_by_file
from analytics.tuning.folds import fold_spread
from compactor import CompactorConfig


def _sessions(files: int, sidechains: int) -> list[SessionSource]:
    out = []
    for f in range(files):
        path = f"/t/run-{f}.jsonl"
        out.append(SessionSource(f"main-{f}", path))
        # sidechains under ids that hash anywhere, one of them from a file of its own
        out += [SessionSource(f"zz{f}-side-{k}", path, f"main-{f}") for k in range(sidechains)]
        out.append(SessionSource(f"aa{f}-agent", f"/t/agents/agent-{f}.jsonl", f"main-{f}"))
    return out


def test_a_main_chain_and_its_sidechains_are_never_on_both_sides() -> None:
    sessions = _sessions(files=12, sidechains=3)
    split = split_by_file(sessions)

    assert split.tune and split.held and not set(split.tune) & set(split.held)
    assert sorted(split.tune + split.held) == sorted(s.session_id for s in sessions)
    for f in range(12):
        family = {f"main-{f}", f"aa{f}-agent", *(f"zz{f}-side-{k}" for k in range(3))}
        assert family <= set(split.tune) or family <= set(split.held), family
    folds = [set(fold) for fold in split.folds]
    assert len(folds) == 5 and set().union(*folds) == set(split.tune)
    assert sum(len(fold) for fold in folds) == len(split.tune)  # each in exactly one fold
    assert split.held_files == sorted(
        {f"/t/run-{f}.jsonl" for f in range(12) if f"main-{f}" in split.held}
    )
    assert split == split_by_file(list(reversed(sessions)))  # stable, order-free


def test_one_file_is_both_sides_and_has_no_folds() -> None:
    split = split_by_file([SessionSource("a", "/t/x"), SessionSource("b", "/t/x", "a")])

    assert (split.tune, split.held, split.folds) == (["a", "b"], ["a", "b"], [])


def _metrics(sid: str, cost: float, retention_kept: int = 1) -> SessionMetrics:
    return SessionMetrics(
        session_id=sid,
        turns=1,
        view_tokens=int(cost * 1000),
        cost=cost,
        artifacts_at_risk=1,
        artifacts_kept=retention_kept,
    )


def test_the_spread_gives_each_fold_s_cost_of_the_recommendation_and_the_rule_s_choice(
    tmp_path: Path,
) -> None:
    sessions = [SessionSource(f"s{k}", f"/t/f{k}") for k in range(10)]
    split = split_by_file(sessions)
    cheap = StrategySpec(kind="progressive", config=CompactorConfig(warn=0.55))
    dear = StrategySpec(kind="progressive")
    ids = [s.session_id for s in sessions]
    # "cheap" is cheaper everywhere except on the first fold's sessions
    first = set(split.folds[0])
    trials = {
        "cheap": (cheap, [_metrics(s, 5.0 if s in first else 1.0) for s in ids]),
        "dear": (dear, [_metrics(s, 2.0) for s in ids]),
    }

    found = fold_spread(trials, split, "cheap", 1000, objective="cost")

    rows = found["folds"]
    assert [r["fold"] for r in rows] == list(range(len(split.folds)))
    assert rows[0]["recommended"]["cost"] == 5.0 * len(first)
    assert rows[0]["chosen_on_the_other_folds"] == cheap.name
    assert rows[0]["its_figures"]["cost"] == 5.0 * len(first)
    costs = [r["recommended"]["cost"] for r in rows]
    assert found["spread"]["min"] == min(costs) and found["spread"]["max"] == 5.0 * len(first)
    assert found["objective"] == "cost"
    assert found["spread_per_session"]["max"] == 5.0


def test_the_split_holds_back_three_tenths_by_name_wherever_the_folder_is() -> None:
    """A fresh temporary folder each run once moved files across sides (6 of 10 held back in one
    CI run, 1 in another): the split now depends on names only, and on a fixed share."""
    for files in (2, 3, 10, 37):
        names = [f"proj-{f % 3}/s{f}.jsonl" for f in range(files)]
        splits = [
            split_by_file([SessionSource(n, f"{root}/{n}") for n in names])
            for root in ("/tmp/pytest-1/a", "/home/x/data", "relative")
        ]
        held = [
            sorted(PurePath(p).relative_to(PurePath(p).parents[1]).as_posix() for p in s.held_files)
            for s in splits
        ]
        assert held[0] == held[1] == held[2], (files, held)
        assert len(held[0]) == min(files - 1, max(1, round(0.3 * files)))
        assert splits[0].tune == splits[1].tune and splits[0].tune  # never empty
