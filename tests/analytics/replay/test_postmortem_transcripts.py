"""Post-mortems of every emergency when the dev transcripts are replayed at 8k and 16k.

The truth comes from the transcripts, read here: the prompts their providers reported (each
replayed turn is an assistant message of the transcript, and its usage says how large the
prompt was, beyond the messages before it). A post-mortem whose every prompt up to its turn
carried a part over 95% of the window that no compaction touches (the smallest such gap, with
the system prompt and the task) must have a cause no config avoids with a ``window_needed``
above the window, and no fixed part is claimed above the smallest prompt reported; every
post-mortem has a cause and a sentence; the lead-up ends on the emergency turn at or above the
threshold. Those hold for every emergency (``postmortem --json --no-counterfactuals`` on the
whole store).

The counterfactual search (replays of each emergency's lead-up under config changes) is checked
on a sample that covers every cause and outcome: every session but the few with many emergencies
that need the full search (at 8k they cost three quarters of it), searched for those sessions
alone as ``postmortem SESSION`` does for one (checked through the command line too). On the
sample: the baselines of the others reproduce; nearly every emergency is either avoided by a
verified change or has a cause no config can help; nothing claims "avoided" without a
reproduction; a verified change is a whole config that loads. ``bench/postmortem_sweep.py``
runs the search on every emergency of both windows and prints the same figures for all.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.importers import ImportedSession, import_path
from analytics.jobs.causes import CAUSES, UNAVOIDABLE
from analytics.queries.counterfactual_job import COUNTERFACTUAL_JOB
from analytics.queries.findings import postmortem_json
from analytics.queries.materialize import refresh
from analytics.store import open_store
from compactor import CompactorConfig, estimate_tokens
from tests.analytics.replayed import DevReplays
from tests.transcripts import DEV

SETTLED = (*UNAVOIDABLE, "summarizer_failed", "manual")
"""Causes that need no config change to be explained: no config avoids them at this window
(``window_needed`` says which would), the summariser failed, or the user compacted."""
EMERGENCY = CompactorConfig().emergency
MAX_SEARCHED = 4
"""A session with more emergencies than this that need the full search (any cause but
``UNAVOIDABLE``, whose search only reproduces the baseline) is left to the bench: at 8k four
such sessions, with long histories, cost three quarters of the whole search."""


@pytest.fixture(scope="module")
def transcripts() -> dict[str, ImportedSession]:
    sessions, _issues = import_path(DEV)
    return {s.session_id: s for s in sessions}


def _postmortem(home: Path, *args: str) -> list[dict[str, Any]]:
    done = CliRunner().invoke(app, ["postmortem", *args, "--json", "--home", str(home)])
    assert done.exit_code == 0, done.output
    found: list[dict[str, Any]] = json.loads(done.stdout)["postmortems"]
    return found


@pytest.fixture(scope="module", params=[8_000, 16_000], ids=["8k", "16k"])
def replayed(
    request: pytest.FixtureRequest, dev_replays: DevReplays
) -> tuple[int, Path, list[dict[str, Any]]]:
    """(window, the replayed home, every post-mortem without counterfactuals)."""
    window = int(request.param)
    home = dev_replays.home(window)
    found = _postmortem(home, "--no-counterfactuals")
    assert found, f"no emergency at {window}: the test would prove nothing"
    return window, home, found


@pytest.fixture(scope="module")
def postmortems(
    replayed: tuple[int, Path, list[dict[str, Any]]],
) -> tuple[int, list[dict[str, Any]]]:
    window, _home, found = replayed
    return window, found


def sample_sessions(found: list[dict[str, Any]]) -> list[str]:
    """Every session with an emergency, save those with more than ``MAX_SEARCHED`` emergencies
    that need the full search."""
    full = Counter(p["session_id"] for p in found if p["cause"] not in UNAVOIDABLE)
    return sorted(
        {p["session_id"] for p in found} - {s for s, n in full.items() if n > MAX_SEARCHED}
    )


@pytest.fixture(scope="module")
def searched(
    replayed: tuple[int, Path, list[dict[str, Any]]],
) -> tuple[int, list[dict[str, Any]]]:
    """(window, the post-mortems of the sampled sessions with their counterfactuals), computed
    for those sessions alone as ``postmortem SESSION`` does for one."""
    window, home, found = replayed
    sample = set(sample_sessions(found))
    with open_store(home) as store:
        refresh(store, (COUNTERFACTUAL_JOB,), sessions=sample)
        every = postmortem_json(store)["postmortems"]
    return window, [p for p in every if p["session_id"] in sample]


def _smallest_reported_prompt(imported: ImportedSession, turn: int) -> int | None:
    """The smallest prompt the provider reported for the first ``turn`` model calls."""
    calls = imported.turns[:turn]
    sizes = [u.input_tokens for i in calls if (u := imported.usage_at(i)) and u.input_tokens]
    return min(sizes) if sizes else None


def _fixed_at_least(imported: ImportedSession, turn: int) -> int | None:
    """What the provider counted in every prompt of the first ``turn`` model calls beyond the
    messages before it (the smallest such gap), with the system prompt and the task: a part
    every one of those prompts carried that no compaction of the history touches."""
    msgs = imported.messages
    gaps = [
        u.input_tokens - estimate_tokens(msgs[:i])
        for i in imported.turns[:turn]
        if (u := imported.usage_at(i)) and u.input_tokens and u.prompt == "history"
    ]
    if not gaps:
        return None
    system = [m for m in msgs[:1] if m.role == "system"]
    task = next(m for m in msgs if m.role == "user" and not m.tool_call_id)
    return min(gaps) + estimate_tokens([*system, task])


def test_every_postmortem_has_a_cause_and_a_sentence(
    postmortems: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = postmortems
    assert all(p["cause"] in CAUSES for p in found)
    assert all(p["explanation"] and p["explanation"].endswith(".") for p in found)


def test_a_fixed_part_over_the_threshold_is_unavoidable_and_never_above_what_was_counted(
    postmortems: tuple[int, list[dict[str, Any]]], transcripts: dict[str, ImportedSession]
) -> None:
    """Both sides of the fixed-prompt rule, against the raw usage: a part every prompt up to
    the turn carried over the threshold makes the emergency unavoidable with a larger window
    needed; a fixed part is never claimed above the smallest prompt the provider counted."""
    window, found = postmortems
    checked = 0
    for p in found:
        imported = transcripts[p["session_id"].rsplit("@", 1)[0]]
        fixed = _fixed_at_least(imported, p["turn"])
        if fixed is not None and fixed >= EMERGENCY * window * 1.05:  # 5%: estimator slack
            checked += 1
            assert p["cause"] in UNAVOIDABLE, p["explanation"]
            assert p["window_needed"] > window
        smallest = _smallest_reported_prompt(imported, p["turn"])
        if p["cause"] == "fixed_prompt" and smallest is not None:
            assert p["fixed_tokens"] <= smallest, p["explanation"]
    assert checked, "no session's fixed part was over the threshold: nothing was checked"


def test_the_lead_up_ends_on_the_emergency_turn_at_or_over_the_threshold(
    postmortems: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = postmortems
    for p in found:
        last = p["lead_up"][-1]
        assert last["turn"] == p["turn"]
        assert last["ratio"] >= EMERGENCY, (p["session_id"], p["lead_up"])


def test_the_baselines_reproduce_and_nearly_every_emergency_is_fixed_or_unavoidable(
    searched: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = searched
    others = [p for p in found if p["cause"] not in UNAVOIDABLE]
    assert sum(bool(p["reproduced"]) for p in others) >= 0.9 * len(others)
    settled = [
        p
        for p in found
        if p["cause"] in SETTLED or p["smallest_change_verified"] or p.get("window_verified")
    ]
    assert len(settled) >= 0.95 * len(found), Counter(p["cause"] for p in found if p not in settled)


def test_no_postmortem_claims_avoided_against_a_baseline_that_did_not_reproduce(
    searched: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = searched
    for p in found:
        if not p["reproduced"]:
            assert all(c["emergency_avoided"] is None for c in p["counterfactuals"])
            assert p["smallest_change"] is None and p["smallest_change_verified"] is None


def test_a_verified_change_is_a_whole_config_that_loads(
    searched: tuple[int, list[dict[str, Any]]],
) -> None:
    _window, found = searched
    fixes = [p for p in found if p["smallest_change_verified"]]
    assert fixes, "no emergency had a verified change"
    for p in fixes:
        config = CompactorConfig.model_validate(p["smallest_change_config"])
        assert config.model_dump(mode="json") == p["smallest_change_config"]
        assert p["smallest_change_detail"]


def test_the_sample_covers_every_cause_and_each_outcome_of_the_search(
    postmortems: tuple[int, list[dict[str, Any]]], searched: tuple[int, list[dict[str, Any]]]
) -> None:
    _window, every = postmortems
    _window, found = searched
    sampled = {p["session_id"] for p in found}
    for cause in {p["cause"] for p in every}:
        assert any(p["session_id"] in sampled for p in every if p["cause"] == cause), cause
    assert len(found) >= 0.5 * len(every)
    unsearched = [p for p in found if p["counterfactual_status"] != "computed"]
    assert not unsearched, unsearched[0]["counterfactual_status"]
    assert any(p["smallest_change_verified"] for p in found), "no verified fix in the sample"
    assert any(p["cause"] in UNAVOIDABLE for p in found), "no unavoidable cause in the sample"
    assert any(not p["smallest_change_verified"] for p in found if p["cause"] not in UNAVOIDABLE)


def test_postmortem_of_one_session_searches_that_session_alone(
    postmortems: tuple[int, list[dict[str, Any]]], dev_replays: DevReplays
) -> None:
    window, every = postmortems
    home = dev_replays.fresh_home(window)  # nothing searched on it yet
    full = Counter(p["session_id"] for p in every if p["cause"] not in UNAVOIDABLE)
    one = min(full, key=lambda s: (full[s], s))

    asked = _postmortem(home, one)

    with open_store(home, read_only=True) as store:
        rows = store.query("SELECT session_id FROM job_stamps WHERE job = 'counterfactuals'")
    assert rows.to_series().to_list() == [one]  # no other session was replayed
    assert {p["compaction_id"] for p in asked} == {
        p["compaction_id"] for p in every if p["session_id"] == one
    }
    assert all(p["counterfactual_status"] == "computed" for p in asked)


def test_every_session_with_an_avoidable_emergency_has_one_verified_fix(
    searched: tuple[int, list[dict[str, Any]]],
) -> None:
    """Each session whose emergencies a verified change avoids gets one whole config that
    avoids all of them in one replay of the session, on each of its post-mortems."""
    _window, found = searched
    needing = {p["session_id"] for p in found if p["smallest_change_verified"]}
    assert needing, "no session had a verified change: nothing to fix"
    for p in found:
        fix = p["session_fix"]
        if p["session_id"] not in needing:
            assert fix is None or not fix["avoids"]
            continue
        assert fix["verified"] is True, fix
        config = CompactorConfig.model_validate(fix["config"])
        assert config.model_dump(mode="json") == fix["config"]
        ours = {q["turn"] for q in found if q["session_id"] == p["session_id"]}
        assert set(fix["avoids"]) <= ours and not set(fix["avoids"]) & set(
            fix["emergency_turns_after"]
        )


def test_a_session_fix_replayed_as_a_user_would_avoids_its_emergencies(
    searched: tuple[int, list[dict[str, Any]]],
    transcripts: dict[str, ImportedSession],
    tmp_path: Path,
) -> None:
    """The smallest fixed session's config, written to a file and given to ``replay
    --config`` with its transcript: the store that replay builds has no emergency at the
    turns the fix avoids (counted from its own compactions and turns)."""
    window, found = searched
    fixed = {
        p["session_id"]: p["session_fix"]
        for p in found
        if p["session_fix"] and p["session_fix"]["verified"]
    }
    assert fixed
    sid = min(fixed, key=lambda s: len(transcripts[s.rsplit("@", 1)[0]].messages))
    fix = fixed[sid]
    imported = transcripts[sid.rsplit("@", 1)[0]]
    config = tmp_path / "fix.json"
    config.write_text(json.dumps(fix["config"]), encoding="utf-8")
    home = tmp_path / "home"
    args = ["replay", imported.source_path, "--window", str(window), "--config", str(config)]
    done = CliRunner().invoke(app, [*args, "--home", str(home)])
    assert done.exit_code == 0, done.output
    with open_store(home, read_only=True) as store:
        turns = store.query(
            """SELECT (SELECT min(t.turn) FROM turns t
                       WHERE t.session_id = c.session_id AND t.seq > c.seq) AS turn
               FROM compactions c
               WHERE c.tier = 4 AND c.effective AND c.session_id LIKE ?""",
            [imported.session_id + "@%"],
        )["turn"].to_list()
        replayed_turns = store.query(
            "SELECT count(*) FROM turns WHERE session_id LIKE ?", [imported.session_id + "@%"]
        ).item()
    assert replayed_turns >= max(fix["avoids"])
    assert not set(turns) & set(fix["avoids"]), (turns, fix["avoids"])
