"""``compactlens tune --grid FILE``: a bad grid is a usage error (exit 2) naming the field and the
value, before anything is replayed; a grid too big to run is refused before it is planned."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from analytics.cli.main import app
from compactor import Message, ToolCall, messages_to_openai
from tests.cli import unwrapped


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    """One small OpenAI-format session with a few tool calls (a real file)."""
    msgs = [
        Message(role="system", content="You are a coding agent."),
        Message(role="user", content="Fix it."),
    ]
    for j in range(3):
        call = ToolCall(id=f"c{j}", name="bash", arguments=json.dumps({"command": f"ls {j}"}))
        msgs.append(Message(role="assistant", tool_calls=[call]))
        msgs.append(Message(role="tool", content=f"line {j}\n" * 50, tool_call_id=f"c{j}"))
    msgs.append(Message(role="assistant", content="Done."))
    path = tmp_path / "session.json"
    path.write_text(json.dumps(messages_to_openai(msgs)), encoding="utf-8")
    return path


def _tune(transcript: Path, grid: Path, *extra: str) -> Result:
    return CliRunner().invoke(
        app,
        [
            *("tune", str(transcript), "--window", "2000", "--grid", str(grid)),
            *("--strategies", "progressive", "--workers", "0", *extra),
            *("--home", str(grid.parent / "home")),
        ],
    )


def _grid(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _refused(done: Result, *expected: str) -> str:
    assert done.exit_code == 2, done.output
    assert "Traceback" not in done.output
    squashed = "".join(done.output.replace("│", "").split())  # rich wraps the box anywhere
    for part in expected:
        assert "".join(part.split()) in squashed, done.output
    return squashed


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("wrong-type.json", '{"warn": ["x"]}', ("warn", "'x'")),
        ("null.json", '{"warn": [null]}', ("warn", "None")),
        ("table.toml", "warn = { low = 0.5 }\n", ("warn", "'low'")),
        ("nan.json", '{"soft": [NaN]}', ("soft", "nan")),
        ("nan.toml", "full = [nan]\n", ("full", "nan")),
        ("negative.toml", "offload_threshold = [-100]\n", ("offload_threshold", "-100")),
        ("empty.toml", "warn = []\n", ("warn", "[]")),
        (
            "no-is-not-off.toml",
            'tool_offload_threshold = ["no"]\n',
            ("tool_offload_threshold", "'no'"),
        ),
        ("true-is-not-1.json", '{"min_tail_messages": [true]}', ("min_tail_messages", "True")),
        ("string-number.toml", 'warn = "0.5"\n', ("warn", "'0.5'")),
    ],
)
def test_a_grid_value_of_the_wrong_type_or_range_is_a_usage_error_naming_field_and_value(
    transcript: Path, tmp_path: Path, name: str, text: str, expected: tuple[str, ...]
) -> None:
    done = _tune(transcript, _grid(tmp_path, name, text))

    _refused(done, name, *expected)
    assert not (tmp_path / "home" / "tuning").exists()  # refused before any trial ran


def test_a_grid_whose_thresholds_are_never_in_order_is_a_usage_error(
    transcript: Path, tmp_path: Path
) -> None:
    # the default grid's soft is 0.7 or 0.8: warn 0.9 is above both, so no config is valid
    done = _tune(transcript, _grid(tmp_path, "order.toml", "warn = [0.9, 0.95]\n"))

    _refused(done, "order.toml", "no combination", "warn=0.9", "soft=0.7")


def test_grid_combinations_that_are_not_valid_configs_are_counted_not_hidden(
    transcript: Path, tmp_path: Path
) -> None:
    text = "warn = [0.5, 0.75]\nsoft = [0.7]\nfull = [0.85]\nmin_tail_messages = [4]\n"
    text += "offload_threshold = [1000]\ntool_offload_threshold = [false]\nsoft_min_gain = [0.05]\n"
    done = _tune(transcript, _grid(tmp_path, "partly.toml", text), "--json")

    assert done.exit_code == 0, done.output
    assert "1 of 2 grid combinations" in done.stderr and "warn=0.75" in done.stderr
    rows = json.loads(done.stdout)["strategies"]
    assert [row["config"]["warn"] for row in rows] == [0.6, 0.5]  # the defaults, the grid's one


def test_a_grid_too_big_to_run_is_refused_before_planning(tmp_path: Path, transcript: Path) -> None:
    values = [round(0.01 * k, 2) for k in range(1, 100)]  # 99 values
    fields = ["warn", "soft", "full", "emergency", "emergency_target", "fallback_target"]
    fields += ["task_max_fraction", "soft_min_gain"]
    grid = _grid(tmp_path, "huge.json", json.dumps(dict.fromkeys(fields, values)))
    command = [sys.executable, "-m", "analytics.cli", "tune", str(transcript)]
    command += ["--window", "2000", "--grid", str(grid), "--workers", "0"]
    command += ["--home", str(tmp_path / "home")]

    done = subprocess.run(command, capture_output=True, text=True, timeout=60)

    assert done.returncode == 2, done.stderr
    text = unwrapped(done.stderr)
    assert "--max-trials" in text and "warn99×soft99" in text, done.stderr


def test_max_trials_sets_the_limit_the_grid_is_counted_against(
    transcript: Path, tmp_path: Path
) -> None:
    text = "warn = [0.5, 0.6]\nsoft = [0.7, 0.8]\nfull = [0.85]\nmin_tail_messages = [4]\n"
    text += "offload_threshold = [1000]\ntool_offload_threshold = [false]\nsoft_min_gain = [0.05]\n"
    grid = _grid(tmp_path, "four.toml", text)

    refused = _tune(transcript, grid, "--max-trials", "3")
    _refused(refused, "4 configurations", "warn 2 × soft 2", "--max-trials 3")
    assert _tune(transcript, grid, "--max-trials", "0").exit_code == 2  # min 1: usage
