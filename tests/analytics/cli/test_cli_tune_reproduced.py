"""Issue 18 item 6: ``replay --config <recommended.toml> --uncalibrated`` on the held-back files
bills exactly what ``tune --uncalibrated --json`` reported for them, file by file (tokens billed,
the summariser's included, and cost), and the TOML carries the tool-time offload the lab varied.
(The calibrated default is ``test_cli_tune_calibrated.py``'s.)

Real transcripts (the swe-agent CTF demonstrations, one session per file) at a window small
enough that every one compacts, each held-back file replayed into a fresh home of its own.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.cli import invoke_ok
from tests.transcripts import CTF

WINDOW = "4000"
GRID = (
    "warn = [0.6]\nsoft = [0.7]\nfull = [0.8, 0.85]\nmin_tail_messages = [6]\n"
    "offload_threshold = [4000]\ntool_offload_threshold = [2000]\n"
)
"""Every grid config offloads tool results over 2,000 bytes as they are appended."""

pytestmark = pytest.mark.skipif(not CTF.is_dir(), reason=f"no transcripts at {CTF}")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("tune")
    grid = home / "grid.toml"
    grid.write_text(GRID, encoding="utf-8")
    files = [str(p) for p in sorted(CTF.rglob("*.traj"))]
    out = invoke_ok(
        *("tune", *files, "--window", WINDOW, "--workers", "0", "--json"),
        *("--strategies", "progressive", "--grid", str(grid)),
        *("--price-profile", "anthropic", "--home", str(home), "--uncalibrated"),
    )
    found: dict[str, Any] = json.loads(out)
    return found


def _replayed(file: str, config: str, home: Path) -> dict[str, Any]:
    invoke_ok(
        *("replay", file, "--window", WINDOW, "--config", config, "--uncalibrated"),
        *("--home", str(home)),
    )
    stats: dict[str, Any] = json.loads(
        invoke_ok("stats", "--json", "--home", str(home), "--price-profile", "anthropic")
    )
    return stats


def test_replaying_the_recommended_toml_on_each_held_back_file_bills_what_tune_reported(
    tuned: dict[str, Any], tmp_path: Path
) -> None:
    rec = tuned["recommended"]
    by_file = rec["held_back_by_file"]
    assert sorted(by_file) == rec["held_back_sessions"] and len(by_file) >= 2
    assert rec["held_back"]["summarizer_tokens"] > 0  # the summariser ran and is billed

    for k, (file, reported) in enumerate(sorted(by_file.items())):
        stats = _replayed(file, rec["path"], tmp_path / f"home-{k}")

        assert stats["sessions"] == reported["sessions"] == 1
        assert stats["tokens"]["billed"] == reported["tokens_billed"], file
        # the same sums in another order: equal to the last bits a float keeps
        assert stats["cost"]["total"] == pytest.approx(reported["cost"], rel=1e-12, abs=0), file
    total = sum(r["tokens_billed"] for r in by_file.values())
    assert total == rec["held_back"]["tokens_billed"]


def test_the_recommended_toml_carries_the_tool_time_offload_it_was_measured_with(
    tuned: dict[str, Any],
) -> None:
    rec = tuned["recommended"]
    written = tomllib.loads(Path(rec["path"]).read_text(encoding="utf-8"))

    assert rec["config"]["tool_offload_threshold"] == 2000
    assert written["tool_offload_threshold"] == 2000
    assert "--uncalibrated" in Path(rec["path"]).read_text(encoding="utf-8")
    assert "uncalibrated" in rec["estimator"]
