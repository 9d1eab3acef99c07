"""``compactlens tune`` priced (issue 18): cost per strategy under a price profile, the objective,
the held-back transcript files, the rule in words, progress lines off a terminal, and a path
that does not exist named as such."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from compactor import CompactorConfig
from tests.grids import grid_toml
from tests.transcripts import TRANSCRIPTS

MINI = TRANSCRIPTS / "mini-swe-agent"

pytestmark = pytest.mark.skipif(not MINI.is_dir(), reason=f"no transcripts at {MINI}")


def _tune(home: Path, *extra: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(
        app,
        [
            *("tune", str(MINI), "--window", "32000", "--workers", "0"),
            *("--strategies", "progressive", "--strategies", "no-compaction"),
            *("--home", str(home)),
            *extra,
        ],
    )
    return done.exit_code, done.stdout, done.stderr


@pytest.fixture(scope="module")
def priced_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("tune-cost")
    grid = grid_toml(warn=[0.5, 0.6], soft=[0.7], full=[0.85])
    (home / "grid.toml").write_text(grid, encoding="utf-8")
    return home


@pytest.fixture(scope="module")
def priced(priced_home: Path) -> tuple[dict[str, Any], str]:
    home, grid = priced_home, priced_home / "grid.toml"
    code, out, err = _tune(home, "--grid", str(grid), "--price-profile", "deepseek", "--json")
    assert code == 0, err
    found: dict[str, Any] = json.loads(out)
    return found, err


def test_every_strategy_has_a_cost_and_its_cache_split(priced: tuple[dict[str, Any], str]) -> None:
    found, _err = priced
    for row in found["strategies"]:
        assert row["cost"] > 0 and row["cache_read_tokens"] > 0
        assert row["cache_write_tokens"] == 0  # DeepSeek has no write premium
    assert found["price_profile"] == "deepseek" and found["objective"] == "cost"


def test_the_recommendation_is_kept_within_the_cheapest_baselines_cost(
    priced: tuple[dict[str, Any], str],
) -> None:
    found, _err = priced
    rec = found["recommended"]
    assert "cost no more than the cheapest baseline" in rec["rule"]
    baseline = rec["baseline"]
    defaults = next(r["name"] for r in found["strategies"] if r["config"] == _defaults())
    assert baseline["name"] in {"no-compaction", defaults}
    assert baseline["within"] is True and baseline["cost"] > 0
    front = {r["name"]: r for r in found["strategies"] if r["name"] in found["pareto"]}
    cheapest = min(front.values(), key=lambda r: r["cost"])
    assert cheapest["cost"] <= min(r["cost"] for r in found["strategies"])


def test_the_terminal_table_names_the_rule_and_the_baseline_it_stayed_within(
    priced: tuple[dict[str, Any], str], priced_home: Path
) -> None:
    found, _err = priced
    code, out, err = _tune(
        *(priced_home, "--grid", str(priced_home / "grid.toml"), "--price-profile", "deepseek")
    )  # the same run: its log is resumed, nothing replayed
    assert code == 0, err
    flat = " ".join(out.split())
    rec = found["recommended"]
    assert f"rule: {' '.join(rec['rule'].split())}" in flat
    assert f"cheapest baseline on the tuning sessions: {rec['baseline']['name']} (" in flat
    assert "the recommendation is within it" in flat


def _defaults() -> dict[str, Any]:
    return CompactorConfig().model_dump(mode="json")


def test_the_held_back_sessions_are_named_by_their_transcript_files(
    priced: tuple[dict[str, Any], str],
) -> None:
    found, _err = priced
    files = found["recommended"]["held_back_sessions"]
    assert files and all(Path(f).is_file() and str(MINI) in f for f in files)


def test_per_model_profiles_are_said_aloud_with_a_warning_when_few_sessions_made_them(
    priced: tuple[dict[str, Any], str],
) -> None:
    found, err = priced
    assert found["profiles"], "eight deepseek-chat tuning sessions make a profile"
    assert "profile for model deepseek/deepseek-chat" in err
    assert "warning: only" in err


def test_tune_prints_progress_lines_when_stderr_is_not_a_terminal(
    priced: tuple[dict[str, Any], str],
) -> None:
    _found, err = priced
    lines = [line for line in err.splitlines() if line.startswith("tune: ")]
    assert lines and "trials" in lines[-1]
    assert re.match(r"tune: (\d+)/\1 trials, best progressive", lines[-1]), lines[-1]


def test_a_missing_path_is_named_instead_of_no_session_with_a_model_turn(tmp_path: Path) -> None:
    gone = tmp_path / "not-there"
    done = CliRunner().invoke(
        app, ["tune", str(gone), "--window", "32000", "--workers", "0", "--home", str(tmp_path)]
    )
    assert done.exit_code == 1
    assert f"no such file or folder: {gone}" in done.stderr
    assert "no session with a model turn" not in done.stderr


def test_an_unknown_price_profile_is_refused_as_usage(tmp_path: Path) -> None:
    code, _out, err = _tune(tmp_path, "--price-profile", "acme")
    assert code == 2 and "acme" in err
