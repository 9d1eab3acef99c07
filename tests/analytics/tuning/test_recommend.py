"""Choosing on the tuning sessions, reporting on the held-back ones, profiles per model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl

from analytics.cli.commands import load_config
from analytics.tuning import SessionMetrics, StrategySpec
from analytics.tuning.recommend import (
    Budget,
    budget,
    budget_warnings,
    choose,
    figures_table,
    is_baseline,
    model_profiles,
    recommend,
    retention_price,
)
from compactor import CompactorConfig


def _table(rows: list[tuple[str, str, bool, int, float, int]]) -> pl.DataFrame:
    """(key, kind, baseline, cost, artifact retention, turns over the window) per row."""
    return pl.DataFrame(
        {
            "key": [r[0] for r in rows],
            "name": [r[0] for r in rows],
            "kind": [r[1] for r in rows],
            "baseline": [r[2] for r in rows],
            "cost": [float(r[3]) for r in rows],
            "tokens_billed": [r[3] * 10 for r in rows],
            "artifact_retention": [r[4] for r in rows],
            "turns_over_window": [r[5] for r in rows],
            "violations": [0] * len(rows),
        }
    )


def test_choice_keeps_the_most_within_the_cheapest_baselines_cost() -> None:
    table = _table(
        [
            ("defaults", "progressive", True, 100, 0.95, 0),
            ("thr", "threshold", True, 80, 0.70, 0),
            ("mask", "masking", True, 5, 1.0, 3),  # over the window: no baseline
            ("p-keeps", "progressive", False, 90, 0.99, 0),  # dearer than thr
            ("p-cheap", "progressive", False, 60, 0.72, 0),
            ("p-best", "progressive", False, 79, 0.85, 0),
            ("p-near", "progressive", False, 70, 0.84, 0),  # as good, within the slack
            ("p-over", "progressive", False, 10, 0.99, 2),
        ]
    )

    assert choose(table, "cost") == "p-near"
    assert budget(table, "cost") == Budget("thr", 80.0)
    # the same on tokens, which here rank the same way
    assert choose(table, "tokens") == "p-near"
    assert choose(table.filter(pl.col("key") != "p-near"), "cost") == "p-best"


def test_when_no_config_is_as_cheap_as_a_baseline_the_cheapest_is_chosen() -> None:
    table = _table(
        [
            ("thr", "threshold", True, 50, 0.70, 0),
            ("p1", "progressive", False, 90, 0.99, 0),
            ("p2", "progressive", False, 70, 0.80, 0),
        ]
    )
    assert choose(table, "cost") == "p2"
    assert (
        choose(
            table.filter(pl.col("key") != "p2").with_columns(turns_over_window=pl.lit(1)), "cost"
        )
        is None
    )


def test_an_over_budget_recommendation_is_said_aloud(tmp_path: Path) -> None:
    spec = StrategySpec(kind="progressive", config=CompactorConfig(warn=0.55, fallback_target=0.4))
    rival = StrategySpec(kind="threshold", params={"fraction": 0.9})
    trials = {
        "p": (spec, [_metrics("t1", 20), _metrics("h1", 20)]),
        "r": (rival, [_metrics("t1", 10), _metrics("h1", 10)]),
    }
    found = recommend(trials, {"t1"}, {"h1"}, 1000, tmp_path / "rec.toml")
    assert found is not None and found.key == "p"
    assert found.budget == Budget(rival.name, 10.0) and not found.within_budget
    (line,) = budget_warnings(found)
    assert rival.name in line and spec.name in line


def test_the_library_defaults_are_a_baseline_and_a_grid_config_is_not() -> None:
    assert is_baseline(StrategySpec(kind="progressive"))
    assert is_baseline(StrategySpec(kind="progressive", config=CompactorConfig()))
    assert is_baseline(StrategySpec(kind="no-compaction"))
    assert not is_baseline(
        StrategySpec(kind="progressive", config=CompactorConfig(soft_min_gain=1.0))
    )


def _metrics(sid: str, billed: int, model: str = "m") -> SessionMetrics:
    return SessionMetrics(session_id=sid, model=model, turns=1, view_tokens=billed)


def test_recommendation_is_written_as_a_loadable_config_and_reported_on_held_back(
    tmp_path: Path,
) -> None:
    cheap = StrategySpec(
        kind="progressive",
        config=CompactorConfig(warn=0.55, fallback_target=0.4, tool_offload_threshold=3000),
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
    assert load_config(found.path) == cheap.config  # tool-time offload included


def test_a_profile_per_model_with_enough_tuning_sessions_that_differ(tmp_path: Path) -> None:
    spec = StrategySpec(kind="progressive")
    other = StrategySpec(kind="progressive", config=CompactorConfig(warn=0.65))
    tune = {f"{p}{k}" for p in "tsw" for k in range(5)}

    def rows(billed: int) -> list[SessionMetrics]:
        out = [_metrics(f"t{k}", billed + k, "gpt-x") for k in range(5)]
        out += [_metrics(f"s{k}", 10, "same") for k in range(5)]  # never compacted: all tie
        out += [_metrics(f"w{k}", billed + k, "a/b") for k in range(5)]
        return [*out, _metrics("h", billed, "gpt-x"), _metrics("hs", 1, "same")]

    trials = {"a": (spec, rows(10)), "b": (other, rows(20)), "c": (spec, rows(30))}
    profiles = model_profiles(trials, tune, {"h", "hs"}, 1000, tmp_path, "run")
    assert [(p.model, p.key, p.path.name, p.held_back["tokens_billed"]) for p in profiles] == [
        ("gpt-x", "a", "run-recommended-gpt-x.toml", 10)
    ]  # "a/b" has no held-back session; "same" never differs


def test_model_names_that_sanitise_alike_get_different_profile_files() -> None:
    from analytics.tuning.recommend import _safe

    assert _safe("gpt-4o") == "gpt-4o"
    assert _safe("x/y") != _safe("x_y")
    assert _safe("x/y").startswith("x_y-")


def test_a_grid_over_any_config_field_keeps_every_configuration_apart() -> None:
    from analytics.tuning.specs import grid_specs

    specs = grid_specs({"preview_lines": [5, 50], "warn": [0.5, 0.6]})

    assert len(specs) == 4
    assert len({s.name for s in specs}) == 4
    assert {s.config.preview_lines for s in specs if s.config} == {5, 50}


def test_what_the_recommendation_gives_up_in_retention_is_said(tmp_path: Path) -> None:
    keeps = StrategySpec(kind="progressive", config=CompactorConfig(min_tail_messages=9))
    cheap = StrategySpec(kind="progressive", config=CompactorConfig(soft_min_gain=1.0))
    trials = {
        "k": (keeps, [_metrics("t1", 30), _metrics("h1", 30)]),
        "c": (cheap, [_metrics("t1", 10), _metrics("h1", 10)]),
    }
    found = recommend(trials, {"t1"}, {"h1"}, 1000, tmp_path / "rec.toml")
    assert found is not None and found.key == "c"
    held = figures_table(trials, {"h1"}, 1000).with_columns(
        artifact_retention=pl.when(pl.col("key") == "k").then(0.9).otherwise(0.5)
    )
    found = replace(found, held_back={**found.held_back, "artifact_retention": 0.5})

    (line,) = retention_price(held, found)
    assert f"{cheap.name} keeps 50.0%" in line and f"{keeps.name}, keeps 90.0% at 30" in line
    assert retention_price(held.filter(pl.col("key") == "c"), found) == []
