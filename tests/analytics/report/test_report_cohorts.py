"""The report sets cohorts side by side and prices the headline (issue 18 items 4-5), and shows
the newest tuning run's rule and held-back figures from its ``tune --json`` object.

Real transcripts (the swe-agent CTF demonstrations, one session per file) replayed at two
windows into one home; the session counts are taken from the files, the figures from
``stats --json`` of the same home.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.cli import invoke_ok
from tests.grids import grid_toml
from tests.transcripts import CTF

WINDOWS = ("4000", "8000")

pytestmark = pytest.mark.skipif(not CTF.is_dir(), reason=f"no transcripts at {CTF}")


@pytest.fixture(scope="module")
def two_windows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("report-cohorts")
    for window in WINDOWS:
        invoke_ok("replay", str(CTF), "--window", window, "--home", str(home))
    return home


def _section(page: str, title: str) -> list[list[str]]:
    """The rows (cells as text) of the table right after the heading ``title``."""
    found = re.search(rf"<h2>{re.escape(title)}</h2>\s*<table>(.*?)</table>", page, re.S)
    assert found, f"no table under {title!r}"
    rows = re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S)
    return [
        [html.unescape(c) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", row, re.S)] for row in rows
    ]


def _report(home: Path, tmp_path: Path, *extra: str) -> str:
    out = tmp_path / "report.html"
    invoke_ok("report", str(out), "--home", str(home), *extra)
    return out.read_text(encoding="utf-8")


def test_two_windows_get_a_cohort_row_each_with_the_sessions_of_each_replay(
    two_windows: Path, tmp_path: Path
) -> None:
    per_window = len(list(CTF.rglob("*.traj")))
    stats: dict[str, Any] = json.loads(
        invoke_ok("stats", "--json", "--by", "window", "--home", str(two_windows))
    )

    rows = _section(_report(two_windows, tmp_path), "Cohorts by window")

    header, *body = rows
    assert header[:2] == ["window", "sessions"]
    assert [(r[0], int(r[1])) for r in body] == [
        (f"window {int(w):,}", per_window) for w in WINDOWS
    ]
    costs = {g["key"]["window"]: g["stats"]["cost"]["total"] for g in stats["groups"]}
    assert [float(r[header.index("cost")]) for r in body] == [
        pytest.approx(costs[int(w)], abs=5e-4) for w in WINDOWS
    ]


def test_the_headline_is_priced_and_a_single_window_has_no_cohort_section(
    two_windows: Path, tmp_path: Path
) -> None:
    stats = json.loads(invoke_ok("stats", "--json", "--home", str(two_windows)))
    page = _report(two_windows, tmp_path)
    (table,) = re.findall(r"<h2>Headline figures</h2>\s*<table>(.*?)</table>", page, re.S)
    currency = stats["cost"]["currency"]
    shown = re.search(rf"<th>cost \({currency}\)</th><td>([0-9.]+)</td>", table)
    assert shown and float(shown.group(1)) == pytest.approx(stats["cost"]["total"], abs=5e-4)

    one = tmp_path / "one"
    invoke_ok("replay", str(CTF), "--window", WINDOWS[0], "--home", str(one))
    assert "Cohorts by" not in _report(one, tmp_path)
    assert "<h2>Cohorts by agent</h2>" in _report(one, tmp_path, "--by", "agent")


def test_the_newest_tuning_run_is_shown_with_its_rule_and_held_back_figures(
    two_windows: Path, tmp_path: Path
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(grid_toml(warn=[0.5, 0.6], soft=[0.7], full=[0.85]), encoding="utf-8")
    found = json.loads(
        invoke_ok(
            *("tune", str(CTF), "--window", "4000", "--workers", "0", "--json"),
            *("--strategies", "progressive", "--strategies", "threshold", "--grid", str(grid)),
            *("--price-profile", "anthropic", "--home", str(two_windows)),
        )
    )
    rec = found["recommended"]
    # a newer recommended TOML of another run (or a per-model profile) is not this run's
    other = Path(rec["path"]).with_name("zz-other-recommended-model.toml")
    other.write_text("# compactlens tune: another run\nwarn = 0.41\n", encoding="utf-8")

    page = _report(two_windows, tmp_path)
    rows = {r[0]: r[1] for r in _section(page, "Tuning recommendation")}
    assert html.escape(rec["path"]) in page and "another run" not in page

    assert rows["recommended"] == rec["name"]
    assert rows["rule"] == rec["rule"]
    assert float(rows["held-back cost"]) == pytest.approx(rec["held_back"]["cost"], abs=5e-4)
    assert rows["cheapest baseline (tuning sessions)"] == rec["baseline"]["name"]
