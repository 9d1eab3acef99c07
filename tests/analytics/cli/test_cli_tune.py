"""``compactlens tune``: the SPEC 5.3 JSON, a recommended config that ``replay --config`` loads."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from analytics.cli.main import app
from tests.analytics.cli_helpers import TUNE_FIGURES
from tests.grids import grid_toml

MINI = (
    Path(__file__).resolve().parents[3].parent
    / "shared"
    / "data"
    / "transcripts"
    / "mini-swe-agent"
)
KEYS = {"name", "kind", "config", *TUNE_FIGURES}


def _smallest(folder: Path, count: int) -> Path:
    """A folder of the ``count`` smallest transcripts of MINI (what is asserted holds for any
    folder of transcripts; the whole of MINI is 8 MB to tune and replay)."""
    folder.mkdir()
    for path in sorted(MINI.rglob("*.traj.json"), key=lambda p: (p.stat().st_size, p))[:count]:
        (folder / f"{path.parent.parent.name}-{path.name}").write_bytes(path.read_bytes())
    return folder


def test_tune_prints_the_spec_json_and_writes_a_loadable_recommendation(tmp_path: Path) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(grid_toml(warn=[0.5, 0.6], min_tail_messages=[6]), encoding="utf-8")
    home = tmp_path / "home"
    transcripts = _smallest(tmp_path / "transcripts", 3)
    runner = CliRunner()

    done = runner.invoke(
        app,
        [
            *("tune", str(transcripts), "--window", "32000", "--grid", str(grid)),
            *("--workers", "0"),
            *("--strategies", "progressive", "--strategies", "masking", "--json"),
            *("--home", str(home)),
        ],
    )

    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    assert {"strategies", "pareto", "recommended"} <= set(found)
    kinds = {row["kind"] for row in found["strategies"]}
    assert kinds == {"progressive", "masking"}
    assert all(set(row) == KEYS for row in found["strategies"])
    names = {row["name"] for row in found["strategies"]}
    assert set(found["pareto"]) <= names and found["pareto"]
    recommended = found["recommended"]
    assert recommended["name"] in names and Path(recommended["path"]).exists()
    again = runner.invoke(
        app,
        [
            *("replay", str(transcripts), "--window", "32000"),
            *("--config", recommended["path"]),
            *("--home", str(tmp_path / "replayed")),
        ],
    )
    assert again.exit_code == 0, again.output


def test_tune_refuses_an_unknown_strategy_as_usage(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        app,
        [
            *("tune", str(MINI), "--window", "32000", "--strategies", "magic", "--workers", "0"),
            *("--home", str(tmp_path)),
        ],
    )
    assert done.exit_code == 2
    assert "magic" in done.output


def test_tune_skips_files_in_a_folder_that_are_not_transcripts(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    one = sorted(MINI.rglob("*.traj.json"))[0]
    (folder / one.name).write_bytes(one.read_bytes())
    (folder / "README.md").write_text("# notes about these runs\n", encoding="utf-8")

    done = CliRunner().invoke(
        app,
        [
            *("tune", str(folder), "--window", "32000", "--workers", "0", "--json"),
            *("--strategies", "masking", "--home", str(tmp_path / "home")),
        ],
    )

    assert done.exit_code == 0, done.output
    assert "skipped:" in done.stderr and "README.md" in done.stderr
    assert json.loads(done.stdout)["strategies"]
