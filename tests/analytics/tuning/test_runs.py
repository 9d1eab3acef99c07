"""run_tune end to end: resume after a killed run, Dask == local pool, JSON keys, the TOML."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import distributed
import polars as pl
import pytest

from analytics.cli.commands import load_config
from analytics.tuning import (
    DEFAULT_GRID,
    STRATEGY_KEYS,
    TuneReport,
    load_grid,
    load_runs,
    run_tune,
    tune_json,
)
from compactor import Message, ToolCall, messages_to_openai

ROOT = Path(__file__).resolve().parents[3]
GRID: dict[str, list[Any]] = {
    "warn": [0.5],
    "soft": [0.6, 0.7],
    "full": [0.8],
    "min_tail_messages": [2],
    "offload_threshold": [300],
    "tool_offload_threshold": [None, 300],
}
"""Four configurations; with the five rivals and the library defaults, ten trials."""
WINDOW = 600


def _session(k: int) -> list[Message]:
    msgs = [
        Message(role="system", content="You are a coding agent."),
        Message(role="user", content=f"Task {k}: fix the failing test in src/mod{k}.py"),
    ]
    for j in range(4 + k):
        args = json.dumps({"command": f"pytest tests/test_{j}.py", "path": f"src/f{j}.py"})
        msgs.append(
            Message(
                role="assistant", tool_calls=[ToolCall(id=f"c{j}", name="bash", arguments=args)]
            )
        )
        msgs.append(
            Message(role="tool", content=f"line {j}\n" * (40 + 25 * k), tool_call_id=f"c{j}")
        )
    msgs.append(Message(role="assistant", content="Done."))
    return msgs


@pytest.fixture
def transcripts(tmp_path: Path) -> Path:
    folder = tmp_path / "transcripts"
    folder.mkdir()
    for k in range(6):
        data = messages_to_openai(_session(k))
        (folder / f"session{k}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def _comparable(report: TuneReport) -> dict[str, Any]:
    """The report without what legitimately differs between two homes (paths, wall time)."""
    out = tune_json(report)
    out["recommended"].pop("path")
    table = report.table.drop("wall_time_s").sort("key").to_dicts()
    return {**out, "table": table, "run_id": report.run_id}


def test_tune_json_has_the_spec_keys_and_the_toml_loads_as_config(
    transcripts: Path, tmp_path: Path
) -> None:
    report = run_tune([transcripts], WINDOW, grid=GRID, workers=0, home=tmp_path / "home")
    out = tune_json(report)
    assert {"strategies", "pareto", "recommended", "objective"} <= set(out)
    assert len(out["strategies"]) == 10
    assert all(tuple(row) == STRATEGY_KEYS for row in out["strategies"])
    assert set(out["pareto"]) <= {row["name"] for row in out["strategies"]}
    assert out["recommended"]["name"].startswith("progressive")
    config = load_config(Path(out["recommended"]["path"]))
    rec = out["recommended"]["config"]
    assert (config.warn, config.soft, config.full) == (rec["warn"], rec["soft"], rec["full"])
    frames = load_runs(tmp_path / "home")
    assert frames.runs["trials_done"].to_list() == [10]
    assert frames.trials.height == 10 * 6
    assert frames.runs["started_at"].dtype == pl.Datetime("us", "UTC")
    billed = frames.trials.filter(~pl.col("held_back")).group_by("key").agg(pl.sum("tokens_billed"))
    assert sorted(billed["tokens_billed"]) == sorted(report.tune_table["tokens_billed"])


def test_a_killed_run_resumes_and_ends_as_an_uninterrupted_run(
    transcripts: Path, tmp_path: Path
) -> None:
    home = tmp_path / "killed"
    script = textwrap.dedent(
        f"""
        import sys
        from analytics.tuning import run_tune

        def progress(p):
            print("done", p.done, flush=True)
            if p.done == 12:  # two of the four Optuna trials of the first batch
                sys.stdin.readline()  # block until killed

        run_tune([{str(transcripts)!r}], {WINDOW}, grid={GRID!r}, trials=4, workers=0,
                 home={str(home)!r}, progress=progress)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "done 12":
            break
    proc.kill()
    proc.wait()
    (log,) = (home / "tuning").glob("*.jsonl")
    assert len(log.read_text(encoding="utf-8").splitlines()) == 1 + 12

    resumed = run_tune([transcripts], WINDOW, grid=GRID, trials=4, workers=0, home=home)
    fresh = run_tune([transcripts], WINDOW, grid=GRID, trials=4, workers=0, home=tmp_path / "fresh")
    assert (resumed.resumed, resumed.evaluated) == (12, 2)
    assert len(log.read_text(encoding="utf-8").splitlines()) == 1 + 14
    assert _comparable(resumed) == _comparable(fresh)


def test_dask_cluster_gives_the_same_results_as_the_local_pool(
    transcripts: Path, tmp_path: Path
) -> None:
    local_cluster: Any = distributed.LocalCluster
    with local_cluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        on_dask = run_tune(
            [transcripts], WINDOW, grid=GRID, dask=cluster.scheduler_address,
            home=tmp_path / "dask",
        )  # fmt: skip
    on_pool = run_tune([transcripts], WINDOW, grid=GRID, workers=2, home=tmp_path / "pool")
    assert on_dask.evaluated == on_pool.evaluated == 10
    assert _comparable(on_dask) == _comparable(on_pool)


def test_a_grid_file_is_exactly_its_keys_none_taken_from_the_default_grid(
    tmp_path: Path,
) -> None:
    path = tmp_path / "grid.toml"
    path.write_text("warn = [0.5]\ntool_offload_threshold = [false, 2000]\n", encoding="utf-8")
    grid = load_grid(path)
    assert grid == {"warn": [0.5], "tool_offload_threshold": [None, 2000]}  # false is off
    assert set(DEFAULT_GRID) - set(grid)  # the default grid's other keys are not added
    path.write_text("wran = [0.5]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="wran"):
        load_grid(path)
