"""Issue 26 item 6: a ``--grid`` file is exactly the configs to try, and ``tune``'s table groups
trials with identical figures, says which knobs moved the objective and gives every figure its
unit.

Real transcripts (the swe-agent CTF demonstrations, one session per file) at a window where they
compact; a grid of three keys with two values each, none of its combinations the library
defaults. Every expectation is computed here from the grid written and the raw ``tune --json``
rows; the table is the same run again (resumed from its log: nothing replayed twice), printed
wide enough that no row wraps.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.cli.terminal import _best
from analytics.tuning.lab import TuneProgress
from compactor import CompactorConfig
from tests.analytics.cli_helpers import TUNE_FIGURES
from tests.transcripts import CTF

GRID: dict[str, list[float]] = {"warn": [0.55, 0.6], "soft": [0.65, 0.7], "full": [0.85, 0.9]}
FIGURES = TUNE_FIGURES

pytestmark = pytest.mark.skipif(not CTF.is_dir(), reason=f"no transcripts at {CTF}")


def _tune(home: Path, *extra: str) -> tuple[str, str]:
    done = CliRunner().invoke(
        app,
        [
            *("tune", str(CTF), "--window", "4000", "--workers", "0"),
            *("--strategies", "progressive", "--grid", str(home / "grid.toml")),
            *("--home", str(home), *extra),
        ],
        env={"COLUMNS": "400"},
    )
    assert done.exit_code == 0, done.output
    return done.stdout, done.stderr


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tune-grid")
    (folder / "grid.toml").write_text(tomli_w.dumps(GRID), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def found(home: Path) -> dict[str, Any]:
    out, _err = _tune(home, "--json")
    loaded: dict[str, Any] = json.loads(out)
    return loaded


@pytest.fixture(scope="module")
def printed(home: Path, found: dict[str, Any]) -> tuple[str, str]:
    return _tune(home)  # the run of ``found`` again, resumed from its log


def _dumped(config: CompactorConfig) -> str:
    return json.dumps(config.model_dump(mode="json"), sort_keys=True)


def test_a_three_key_grid_of_two_values_each_runs_exactly_its_eight_configs(
    home: Path, found: dict[str, Any], printed: tuple[str, str]
) -> None:
    combos = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    asked = {
        json.dumps(CompactorConfig(**c).model_dump(mode="json"), sort_keys=True) for c in combos
    }
    default = _dumped(CompactorConfig())
    assert len(asked) == 2 * 2 * 2 and default not in asked

    (log,) = (home / "tuning").glob("*.jsonl")
    trials = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()[1:]]
    ran = [json.dumps(t["spec"]["config"], sort_keys=True) for t in trials]

    assert sorted(ran) == sorted([*asked, default])  # the grid's 8, the defaults as a baseline
    assert len(found["strategies"]) == len(ran) == 9
    _out, err = printed
    assert "trials: 8 grid config(s), the library defaults (a baseline)" in err


def _identical(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    by_figures: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        by_figures.setdefault(tuple(row[k] for k in FIGURES), []).append(row)
    return list(by_figures.values())


def _number(value: float) -> str:
    return f"{value:g}"


def test_identical_trials_share_one_row_which_says_what_made_no_difference(
    found: dict[str, Any], printed: tuple[str, str]
) -> None:
    groups = _identical(found["strategies"])
    out, _err = printed
    rows = [line for line in out.splitlines() if line.startswith("│")]

    assert any(len(g) > 1 for g in groups)  # this data has some
    assert len(rows) == len(groups)  # one row per set of identical figures
    for group in (g for g in groups if len(g) > 1):
        names = [r["name"] for r in group]
        marks = [f" {n} (+{len(group) - 1} identical)" for n in names]
        shown = [row for row in rows if any(mark in row for mark in marks)]
        assert len(shown) == 1, names
        varied = {
            k: sorted({r["config"][k] for r in group})
            for k in sorted(GRID)  # named in alphabetical order
            if len({r["config"][k] for r in group}) > 1
        }
        words = "; ".join(f"{k} {_number(v[0])}–{_number(v[-1])}" for k, v in varied.items())
        assert f"other progressive config(s); {words}: no effect on these sessions" in out


def test_each_knob_s_effect_on_the_objective_is_said_with_its_unit(
    found: dict[str, Any], printed: tuple[str, str]
) -> None:
    column = "cost" if found["objective"] == "cost" else "tokens_billed"
    unit = found["cost_unit"] if column == "cost" else "tokens"
    rows = found["strategies"]
    out, _err = printed
    idle = []
    for knob in GRID:
        cells: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            rest = {k: v for k, v in row["config"].items() if k != knob}
            cells.setdefault(json.dumps(rest, sort_keys=True), []).append(row)
        spreads = [
            max(r[column] for r in cell) - min(r[column] for r in cell)
            for cell in cells.values()
            if len({r["config"][knob] for r in cell}) > 1
        ]
        values = sorted({row["config"][knob] for row in rows})
        named = f"{knob} {_number(values[0])}–{_number(values[-1])}"
        if max(spreads) == 0:
            idle.append(named)
            continue
        figure = (
            f"{max(spreads):,.4f} {unit}" if column == "cost" else f"{max(spreads):,.0f} tokens"
        )
        assert f"  {named}: up to {figure}" in out, (named, figure)
    assert idle  # warn above 0.5 changes nothing at this window
    assert f"no effect on these sessions: {'; '.join(sorted(idle))}" in out


def test_every_figure_printed_has_its_unit(found: dict[str, Any], printed: tuple[str, str]) -> None:
    out, _err = printed
    unit = found["cost_unit"]
    assert f"cost ({unit})" in out and "tokens billed" in out and "cache-read tokens" in out
    (folds,) = [line for line in out.splitlines() if line.startswith("across ")]
    figures = re.findall(r"\d[\d,.]*(?: (?:tokens|USD|Mtok))?", folds.split(":", 1)[1])
    assert len(figures) == 6  # min, median, max, and the same per session
    assert all(f.endswith((" tokens", " USD", " Mtok")) for f in figures), folds
    (baseline,) = [line for line in out.splitlines() if line.startswith("cheapest baseline")]
    assert re.search(r"\(\d[\d,.]* (tokens|USD|Mtok)\)", baseline), baseline


def test_the_progress_line_gives_the_best_cost_with_its_currency() -> None:
    """The line ``tune`` prints while it runs names the currency of the best cost so far."""
    state = TuneProgress(3, 9, "w0.6", 1_000, 1.0, "cost", 0.0925, 4, "EUR")
    assert _best(state) == ", best w0.6 (cost 0.0925 EUR)"
    tokens = TuneProgress(3, 9, "w0.6", 1_234, 1.0, "tokens", 1_234.0, 4)
    assert _best(tokens) == ", best w0.6 (1,234 tokens)"
