"""Post-mortems of every emergency when the dev transcripts are replayed at 8k and 16k.

The truth comes from the transcripts, read here: the prompts their providers reported (each
replayed turn is an assistant message of the transcript, and its usage says how large the
prompt was). A post-mortem whose every reported prompt up to its turn was at least 95% of the
window must be a ``fixed_prompt`` with a ``window_needed`` above the window; every post-mortem
has a cause and a sentence; the lead-up ends on the emergency turn at or above the threshold;
the baselines of the others reproduce; nearly every emergency is either avoided by a verified
change or has a cause no config can help; nothing claims "avoided" without a reproduction.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.importers import ImportedSession, import_path
from analytics.jobs.causes import CAUSES
from compactor import CompactorConfig
from tests.analytics.replayed import replayed_home
from tests.transcripts import DEV

UNAVOIDABLE = ("fixed_prompt", "summarizer_failed", "manual")
EMERGENCY = CompactorConfig().emergency


@pytest.fixture(scope="module")
def transcripts() -> dict[str, ImportedSession]:
    sessions, _issues = import_path(DEV)
    return {s.session_id: s for s in sessions}


@pytest.fixture(scope="module", params=[8_000, 16_000], ids=["8k", "16k"])
def postmortems(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, list[dict[str, Any]]]:
    window = int(request.param)
    home: Path = replayed_home(window, tmp_path_factory)
    done = CliRunner().invoke(app, ["postmortem", "--json", "--home", str(home)])
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)["postmortems"]
    assert found, f"no emergency at {window}: the test would prove nothing"
    return window, found


def _smallest_reported_prompt(imported: ImportedSession, turn: int) -> int | None:
    """The smallest prompt the provider reported for the first ``turn`` model calls."""
    calls = imported.turns[:turn]
    sizes = [u.input_tokens for i in calls if (u := imported.usage_at(i)) and u.input_tokens]
    return min(sizes) if sizes else None


def test_every_postmortem_has_a_cause_and_a_sentence(
    postmortems: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = postmortems
    assert all(p["cause"] in CAUSES for p in found)
    assert all(p["explanation"] and p["explanation"].endswith(".") for p in found)


def test_prompts_reported_over_the_threshold_are_fixed_prompts_with_a_larger_window(
    postmortems: tuple[int, list[dict[str, Any]]], transcripts: dict[str, ImportedSession]
) -> None:
    window, found = postmortems
    checked = 0
    for p in found:
        imported = transcripts[p["session_id"].rsplit("@", 1)[0]]
        smallest = _smallest_reported_prompt(imported, p["turn"])
        if smallest is not None and smallest >= EMERGENCY * window:
            checked += 1
            assert p["cause"] == "fixed_prompt", p["explanation"]
            assert p["window_needed"] > window
    assert checked, "no session's prompts were over the threshold: nothing was checked"


def test_the_lead_up_ends_on_the_emergency_turn_at_or_over_the_threshold(
    postmortems: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = postmortems
    for p in found:
        last = p["lead_up"][-1]
        assert last["turn"] == p["turn"]
        assert last["ratio"] >= EMERGENCY, (p["session_id"], p["lead_up"])


def test_the_baselines_reproduce_and_nearly_every_emergency_is_fixed_or_unavoidable(
    postmortems: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = postmortems
    others = [p for p in found if p["cause"] != "fixed_prompt"]
    assert sum(bool(p["reproduced"]) for p in others) >= 0.9 * len(others)
    settled = [p for p in found if p["cause"] in UNAVOIDABLE or p["smallest_change_verified"]]
    assert len(settled) >= 0.9 * len(found)


def test_no_postmortem_claims_avoided_against_a_baseline_that_did_not_reproduce(
    postmortems: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = postmortems
    for p in found:
        if not p["reproduced"]:
            assert all(c["emergency_avoided"] is None for c in p["counterfactuals"])
            assert p["smallest_change"] is None and p["smallest_change_verified"] is None


def test_a_verified_change_is_a_whole_config_that_loads(
    postmortems: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = postmortems
    fixes = [p for p in found if p["smallest_change_verified"]]
    assert fixes, "no emergency had a verified change"
    for p in fixes:
        config = CompactorConfig.model_validate(p["smallest_change_config"])
        assert config.model_dump(mode="json") == p["smallest_change_config"]
        assert p["smallest_change_detail"]
