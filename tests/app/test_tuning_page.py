"""The tuning page after a run started from it (issue 18 items 4, 6): the cost column, the
objective, the recommended row marked, the rule in words, the held-back files, the per-model
profiles and their warnings, each compared with ``tune --json``'s object of the same run
(``run_tune`` called again by the test: it resumes the run's log, so nothing is replayed twice).
The form (issue 26 item 6) offers a small sample of the stored transcripts and says how many
sessions a run on it replays, counted here by importing those files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics import run_tune, tune_json
from analytics.cli.main import app as cli
from analytics.importers import import_path
from app import tuning_job
from app.tuning_job import RECOMMENDED
from app.widgets import md_escape
from tests.app.fixtures import REPLAYED, TRANSCRIPTS, FixtureHome
from tests.app.pages import open_page, shown
from tests.grids import grid_toml
from tests.transcripts import CTF


def _started_from_the_page(fixture_home: FixtureHome) -> tuning_job.TuningJob:
    at = open_page("tuning")
    at.form_submit_button[0].click().run()
    job = tuning_job.current(fixture_home.home)
    assert job is not None
    assert job.done.wait(180), "the tuning run did not finish"
    assert job.error is None, job.error
    return job


def _expected(fixture_home: FixtureHome, job: tuning_job.TuningJob) -> dict[str, Any]:
    report = run_tune(
        job.paths,
        job.window,
        grid=tuning_job.SMALL_GRID,
        strategies=["progressive", "masking"],
        workers=0,
        home=fixture_home.home,
    )
    assert report.run_id == job.run_id and report.evaluated == 0  # resumed, not replayed
    return tune_json(report)


def test_the_tuning_page_shows_cost_the_objective_and_the_recommendation_of_tune_json(
    fixture_home: FixtureHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["app/main.py", "--allow-path", str(TRANSCRIPTS)])
    job = _started_from_the_page(fixture_home)
    expected = _expected(fixture_home, job)
    assert expected["recommended"]["name"] and expected["objective"] == "cost"

    at = open_page("tuning", run=str(job.run_id))

    (table,) = [d.value for d in at.dataframe if "recommended" in d.value.columns]
    costs = dict(zip(table["name"], table["cost"], strict=True))
    assert costs == pytest.approx({s["name"]: s["cost"] for s in expected["strategies"]})
    assert list(table["cost"]) == sorted(table["cost"])  # cheapest first on the objective
    marked = table[table["recommended"] == RECOMMENDED]["name"].to_list()
    assert marked == [expected["recommended"]["name"]]
    text = shown(at)
    assert f"objective: {expected['objective']}" in text
    assert f"rule: {expected['recommended']['rule']}" in text
    (files,) = [d.value for d in at.dataframe if "held-back file" in d.value.columns]
    assert files["held-back file"].to_list() == expected["recommended"]["held_back_sessions"]
    assert f"Per-model profiles ({len(expected['profiles'])})" in text
    for note in expected["notes"]:  # escaped: they name models and paths, text from data
        assert md_escape(note) in text
    spec = str(at.get("plotly_chart")[0].proto.spec)
    assert "Tuning: cost vs artifact retention" in spec


def test_a_run_from_the_cli_shows_its_objective_and_rule_on_the_page(
    fixture_home: FixtureHome, tmp_path: Path
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(grid_toml(warn=[0.5, 0.6], soft=[0.7], full=[0.85]), encoding="utf-8")
    done = CliRunner().invoke(
        cli,
        [
            *("tune", str(CTF), "--window", "4000", "--workers", "0", "--json"),
            *("--strategies", "progressive", "--strategies", "threshold", "--grid", str(grid)),
            *("--price-profile", "anthropic", "--home", str(fixture_home.home)),
        ],
    )
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    run_id = Path(found["recommended"]["path"]).name.removesuffix("-recommended.toml")

    at = open_page("tuning", run=run_id)
    text = shown(at)

    assert at.selectbox(key="run").value == run_id  # a shared address opens its run
    assert f"objective: {found['objective']} · priced under anthropic" in text
    assert f"rule: {found['recommended']['rule']}" in text
    base = found["recommended"]["baseline"]
    assert f"cheapest baseline on the tuning sessions: {base['name']} (" in text


def test_the_form_offers_a_small_sample_of_the_stored_transcripts_and_counts_its_sessions(
    fixture_home: FixtureHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["app/main.py", "--allow-path", str(TRANSCRIPTS)])
    monkeypatch.setattr(tuning_job, "SAMPLE_FILES", 2)  # the fixture stores three files
    stored = sorted(str(TRANSCRIPTS / f) for f in REPLAYED)

    at = open_page("tuning")

    offered = str(at.text_area[0].value).splitlines()
    smallest = sorted(stored, key=lambda f: Path(f).stat().st_size)[:2]
    assert offered == sorted(smallest)  # two of the three, the smaller ones
    sessions = sum(
        1 for f in offered for s in import_path(Path(f))[0] if s.turns
    )  # what run_tune replays: each session with a model turn
    assert sessions >= 2
    assert f"This run will replay {sessions:,} sessions from 2 of the 3 transcript files" in shown(
        at
    )


def test_a_sample_spreads_over_the_smaller_half_of_the_files_in_their_order(
    tmp_path: Path,
) -> None:
    names = [f"t{k:02}.jsonl" for k in range(10)]
    for k, name in enumerate(reversed(names)):  # t09 is the smallest, t00 the largest
        (tmp_path / name).write_bytes(b"x" * (k + 1))

    chosen = tuning_job.sample([*names, "missing.jsonl"], tmp_path, 3)

    # the smaller half by size is t09..t05 (1..5 bytes); spread over it: 1, 3 and 5 bytes
    assert chosen == ["t05.jsonl", "t07.jsonl", "t09.jsonl"]
    assert tuning_job.sample(names[:3], tmp_path, 3) == names[:3]
    assert tuning_job.sample(["missing.jsonl"], tmp_path, 3) == []


def test_the_run_picker_writes_a_chosen_older_run_into_the_address(
    fixture_home: FixtureHome, tmp_path: Path
) -> None:
    for warn in (0.5, 0.6):  # two runs, so there is an older one to choose
        grid = tmp_path / f"grid-{warn}.toml"
        grid.write_text(grid_toml(warn=[warn]), encoding="utf-8")
        done = CliRunner().invoke(
            cli,
            [
                *("tune", str(CTF), "--window", "4000", "--workers", "0", "--json"),
                *("--strategies", "progressive", "--grid", str(grid)),
                *("--home", str(fixture_home.home)),
            ],
        )
        assert done.exit_code == 0, done.output
    at = open_page("tuning")
    newest, *older = at.selectbox(key="run").options
    assert older and "run" not in at.query_params

    at.selectbox(key="run").select(older[-1]).run()

    assert at.query_params["run"] == older[-1]
    assert at.selectbox(key="run").value == older[-1]
    at.selectbox(key="run").select(newest).run()
    assert "run" not in at.query_params  # the newest is the default: the address leaves it out
