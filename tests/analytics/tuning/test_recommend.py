"""Choosing on the tuning sessions, reporting on the held-back ones, profiles per model."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from analytics.cli.commands import load_config
from analytics.tuning import SessionMetrics, StrategySpec
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
