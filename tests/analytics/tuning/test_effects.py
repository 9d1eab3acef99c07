"""Which trials had identical figures and what each knob did, from hand-made trial figures."""

from __future__ import annotations

from analytics.tuning import SessionMetrics, StrategySpec
from analytics.tuning.effects import identical_groups, knob_effects, range_words
from analytics.tuning.recommend import figures_table
from compactor import CompactorConfig


def _spec(**fields: float) -> StrategySpec:
    return StrategySpec(kind="progressive", config=CompactorConfig(**fields))


Trial = tuple[StrategySpec, list[SessionMetrics]]


def _trial(spec: StrategySpec, billed: int, kept: int = 5) -> Trial:
    """One held-back session billing ``billed`` tokens, keeping ``kept`` of 10 artifacts."""
    metrics = SessionMetrics(
        session_id="h1",
        view_tokens=billed,
        artifacts_at_risk=10,
        artifacts_kept=kept,
        cost=billed / 1e6,
    )
    return spec, [metrics]


TRIALS = {
    "a": _trial(_spec(warn=0.55), 900),  # differs from b in warn alone: no effect
    "b": _trial(_spec(), 900),
    "c": _trial(_spec(full=0.9), 1000),  # differs from b in full alone: +100 tokens
    "d": _trial(_spec(full=0.9, min_tail_messages=4), 1000, kept=7),  # min tail: retention only
    "r": _trial(StrategySpec(kind="masking", params={"m": 10}), 900),
}
TABLE = figures_table(TRIALS, {"h1"}, 1000)
SPECS = {key: spec for key, (spec, _metrics) in TRIALS.items()}


def test_trials_with_every_figure_equal_are_one_group_naming_what_differs() -> None:
    (group,) = identical_groups(TABLE, SPECS)

    assert group.keys == ["a", "b", "r"]
    assert group.varied == {"warn": [0.55, 0.6]}  # among its progressive configs


def test_each_knob_moved_alone_gives_the_spread_of_the_objective() -> None:
    effects = {e.knob: e for e in knob_effects(TABLE, SPECS, "tokens")}

    assert set(effects) == {"warn", "full", "min_tail_messages"}
    assert (effects["full"].spread, effects["full"].share) == (100.0, 100 / 900)
    assert effects["warn"].spread == 0.0 and not effects["warn"].any_figure
    tail = effects["min_tail_messages"]
    assert tail.spread == 0.0 and tail.any_figure  # the cost did not move, retention did
    assert next(e.knob for e in knob_effects(TABLE, SPECS, "tokens")) == "full"  # largest first


def test_a_knob_never_moved_alone_has_no_spread() -> None:
    trials = {"b": TRIALS["b"], "x": _trial(_spec(full=0.9, min_tail_messages=4), 1000)}
    specs = {key: spec for key, (spec, _metrics) in trials.items()}

    effects = knob_effects(figures_table(trials, {"h1"}, 1000), specs, "cost")

    assert {e.knob: e.spread for e in effects} == {"full": None, "min_tail_messages": None}


def test_values_are_written_as_a_range_with_off_first() -> None:
    assert range_words([0.4, 0.6]) == "0.4–0.6"
    assert range_words([None, 2000, 4000]) == "off, 2000–4000"
    assert range_words([0.5]) == "0.5"
