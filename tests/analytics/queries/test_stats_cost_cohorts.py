"""``stats --json``: cost under the price profiles, tokens billed with the summariser's calls,
and cohorts side by side (``--by``), on a home holding a 16k and a 32k replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from tests.cli import unwrapped
from tests.transcripts import TRANSCRIPTS

VIEWER = TRANSCRIPTS / "claude-code-viewer"

pytestmark = pytest.mark.skipif(not VIEWER.is_dir(), reason=f"no transcripts at {VIEWER}")


def _stats(home: Path, *extra: str) -> dict[str, Any]:
    done = CliRunner().invoke(app, ["stats", "--json", "--home", str(home), *extra])
    assert done.exit_code == 0, done.output
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.fixture(scope="module")
def two_windows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("two-windows")
    for window in (16000, 32000):
        done = CliRunner().invoke(
            app, ["replay", str(VIEWER), "--window", str(window), "--home", str(home)]
        )
        assert done.exit_code == 0, done.output
    return home


def test_stats_by_window_gives_one_group_per_replay_with_its_session_count(
    two_windows: Path,
) -> None:
    found = _stats(two_windows, "--by", "window")

    groups = {g["key"]["window"]: g["stats"] for g in found["groups"]}
    assert sorted(groups) == [16000, 32000]
    assert groups[16000]["sessions"] == groups[32000]["sessions"] == found["sessions"] // 2 == 7
    assert set(groups[16000]) == set(found) - {"groups", "unprojected_spool_bytes"}
    assert groups[16000]["turns"] + groups[32000]["turns"] == found["turns"]
    # the smaller window compacts harder: fewer tokens billed than the 32k replay
    assert groups[16000]["tokens"]["billed"] < groups[32000]["tokens"]["billed"]


def test_stats_gives_cost_under_each_sessions_profile_and_what_uncompacted_would_cost(
    two_windows: Path,
) -> None:
    cost = _stats(two_windows)["cost"]

    assert cost["currency"] == "USD"
    assert list(cost["by_profile"]) == ["anthropic"]  # claude-sonnet-4 sessions
    # compacting may cost more than not compacting once cache writes and the summariser are
    # priced (that is what the figure is for): check the parts add up, not which is smaller
    assert cost["total"] > 0 and cost["uncompacted"] > 0
    assert cost["total"] == pytest.approx(cost["turns"] + cost["summarizer"])
    assert cost["cache_read_tokens"] > 10 * cost["cache_write_tokens"] > 0
    assert set(cost["by_tier"]) == {"WARN", "SOFT", "FULL", "EMERGENCY"}
    tiers = cost["by_tier"].values()
    assert sum(t["summarizer"] for t in tiers) == pytest.approx(cost["summarizer"])


def test_tokens_billed_counts_the_summarisers_tokens(two_windows: Path) -> None:
    tokens = _stats(two_windows)["tokens"]

    assert tokens["summarizer"] > 0
    assert tokens["billed"] == tokens["views"] + tokens["summarizer"]


def test_the_none_profile_prices_every_prompt_token_at_one_per_million(
    two_windows: Path,
) -> None:
    cost = _stats(two_windows, "--price-profile", "none")["cost"]

    assert cost["currency"] == "Mtok" and cost["cache_read_tokens"] == 0
    assert list(cost["by_profile"]) == ["none"]
    assert cost["total"] > _stats(two_windows)["cost"]["total"]


def test_a_price_profile_file_with_a_bad_price_is_refused_naming_file_field_and_value(
    two_windows: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "mine.toml"
    bad.write_text(
        'caching = "automatic"\ninput = 1.0\ncache_read = "cheap"\n'
        "cache_write = 1.0\noutput = 2.0\n",
        encoding="utf-8",
    )
    done = CliRunner().invoke(
        app, ["stats", "--home", str(two_windows), "--price-profile", str(bad)]
    )
    assert done.exit_code == 2
    assert str(bad) in unwrapped(done.output)
    assert "cache_read" in done.output and "'cheap'" in done.output


def test_stats_refuses_an_unknown_cohort_as_usage(two_windows: Path) -> None:
    done = CliRunner().invoke(app, ["stats", "--home", str(two_windows), "--by", "colour"])
    assert done.exit_code == 2 and "colour" in done.output
