"""The grid given to ``run_tune`` as a mapping (what the app's tuning form passes) is checked as
strictly as a ``--grid`` file, and its size is counted before a configuration is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analytics.tuning import run_tune
from analytics.tuning.specs import GridError, count_configs, validate_grid


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        ({"warn": ["x"]}, "warn[0] = 'x'"),
        ({"tool_offload_threshold": ["no"]}, "tool_offload_threshold[0] = 'no'"),
        ({"tool_time_offload": [True]}, "tool_time_offload"),
        ({"min_tail_messages": [True]}, "min_tail_messages[0] = True"),
        ({"soft": [float("nan")]}, "soft[0] = nan"),
        ({"warn": []}, "warn = []"),
        ({"wran": [0.5]}, "wran"),
    ],
)
def test_a_bad_grid_mapping_is_refused_naming_field_and_value(
    grid: dict[str, Any], expected: str, tmp_path: Path
) -> None:
    with pytest.raises(GridError) as refused:
        run_tune([tmp_path / "none"], 2000, grid=grid, home=tmp_path)

    assert expected in str(refused.value)


def test_valid_values_are_kept_as_given() -> None:
    grid = validate_grid({"warn": [0.5, 0.6], "min_tail_messages": 4, "tool_offload_threshold": 9})

    assert grid == {"warn": [0.5, 0.6], "min_tail_messages": [4], "tool_offload_threshold": [9]}


def test_a_huge_grid_is_sized_without_being_built(tmp_path: Path) -> None:
    values = [round(0.01 * k, 2) for k in range(1, 100)]
    grid = dict.fromkeys(["warn", "soft", "full", "emergency", "emergency_target"], values)

    assert count_configs(grid) == 99**5
    with pytest.raises(GridError, match="over --max-trials 500"):
        run_tune([tmp_path / "none"], 2000, grid=grid, home=tmp_path)
    with pytest.raises(GridError, match="--trials adds 10"):
        run_tune([tmp_path / "none"], 2000, grid={"warn": [0.5]}, trials=10, max_trials=10)
