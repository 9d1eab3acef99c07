"""Choosing on the tuning sessions, reporting on the held-back ones, profiles per model."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analytics.commands import load_config
from analytics.tuning import SessionMetrics, StrategySpec, split_sessions
from analytics.tuning.recommend import choose, model_profiles, recommend
from compactor import CompactorConfig


def test_choice_is_the_cheapest_feasible_config_within_the_retention_slack() -> None:
    table = pl.DataFrame(
        {
            "key": ["p1", "p2", "p3", "p4", "m"],
            "name": ["p1", "p2", "p3", "p4", "m"],
            "kind": ["progressive"] * 4 + ["masking"],
            "tokens_billed": [100, 90, 80, 10, 5],
            "artifact_retention": [0.80, 0.79, 0.50, 0.90, 1.0],
            "turns_over_window": [0, 0, 0, 2, 0],
            "violations": [0, 0, 0, 0, 0],
        }
    )
    assert choose(table) == "p2"
    assert choose(table.filter(pl.col("key") == "p4")) is None


def _metrics(sid: str, billed: int, model: str = "m") -> SessionMetrics:
    return SessionMetrics(session_id=sid, model=model, turns=1, view_tokens=billed)


def test_recommendation_is_written_as_a_loadable_config_and_reported_on_held_back(
    tmp_path: Path,
) -> None:
    cheap = StrategySpec(
        kind="progressive",
        config=CompactorConfig(warn=0.55, fallback_target=0.4),
        tool_time_offload=True,
    )
    dear = StrategySpec(kind="progressive")
    trials = {
        "a": (cheap, [_metrics("t1", 10), _metrics("h1", 700)]),
        "b": (dear, [_metrics("t1", 20), _metrics("h1", 30)]),
    }
    found = recommend(trials, {"t1"}, {"h1"}, 1000, tmp_path / "rec.toml")
    assert found is not None
    assert (found.key, found.tune["tokens_billed"], found.held_back["tokens_billed"]) == (
        "a",
        10,
        700,
    )
    assert load_config(found.path).warn == 0.55
    assert "tool-time offload (OffloadHook with offload_threshold): on" in found.path.read_text()


def test_a_profile_per_model_with_enough_tuning_sessions(tmp_path: Path) -> None:
    spec = StrategySpec(kind="progressive")
    rows = [_metrics(f"t{k}", 10, "gpt-x") for k in range(5)] + [_metrics("h", 5, "gpt-x")]
    rows += [_metrics("u", 1, "rare"), _metrics("v", 1, "rare")]
    tune = {f"t{k}" for k in range(5)} | {"u"}
    profiles = model_profiles({"a": (spec, rows)}, tune, {"h", "v"}, 1000, tmp_path, "run")
    assert [(p.model, p.path.name, p.held_back["tokens_billed"]) for p in profiles] == [
        ("gpt-x", "run-recommended-gpt-x.toml", 5)
    ]


def test_split_is_stable_and_leaves_both_sides_non_empty() -> None:
    ids = [f"s{k}" for k in range(20)]
    tune, held = split_sessions(ids)
    assert (tune, held) == split_sessions(list(ids))
    assert tune and held and sorted(tune + held) == sorted(ids)
    assert split_sessions(["only"]) == (["only"], ["only"])
