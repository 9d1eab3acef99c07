"""The timeline, the diff picker, the retention page and the post-mortems on real findings.

The store is ``findings.build_findings_home`` (a Claude Code session with five sub-agents and a
mini-swe-agent run, replayed at 16k, counterfactuals computed). Each test opens the page as a
link would and compares what it shows with a truth computed apart from the page: SQL over the
store, the transcripts' own usage, the CLI's JSON, a replay with the downloaded config.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from analytics.cli.commands import load_config
from analytics.cli.main import app as cli
from analytics.jobs.causes import UNAVOIDABLE
from analytics.jobs.postmortem_groups import turns_text
from app.postmortem import CAUSE_TITLES
from compactor import CompactorConfig
from tests.app.findings import CLAUDE, WINDOW, FindingsHome, build_findings_home
from tests.app.fixtures import TRANSCRIPTS
from tests.app.pages import PageCache, open_page, plural_slips, shown

TIERS = {1: "WARN", 2: "SOFT", 3: "FULL", 4: "EMERGENCY"}
LABEL = re.compile(r"^turn (\d+) · (WARN|SOFT|FULL|EMERGENCY) · ([\d,]+) → ([\d,]+) tokens$")
SIDECHAIN = "fe5e1c67-53e7-4862-81ae-d0e013e3270b:sidechain:60dade70"
MAIN_CHAIN = "fe5e1c67-53e7-4862-81ae-d0e013e3270b@"


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FindingsHome]:
    built = build_findings_home(tmp_path_factory.mktemp("findings-home"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPACTLENS_HOME", str(built.home))
        yield built
        st.cache_resource.clear()  # closes the store and stops its projector thread
        st.cache_data.clear()


@pytest.fixture(scope="module")
def rendered(found: FindingsHome) -> PageCache:
    """The module's pages, each rendered once: no test here writes to ``found``'s store after
    it is built (the replays they run go to homes of their own), so a page read by several tests
    (and by the plural check, which opens them all) is the same page each time."""
    return PageCache()


def chart(at: AppTest, index: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(at.get("plotly_chart")[index].proto.spec)
    return spec


def test_the_timeline_y_axis_holds_the_line_and_draws_every_marker_on_it(
    found: FindingsHome,
    rendered: PageCache,
) -> None:
    sid = found.session(SIDECHAIN)
    truth = found.effective[sid]
    highest = max(r["tokens_before"] for r in truth)
    line = max(WINDOW, found.view_peak[sid])
    assert highest > 1.08 * line  # a marker far above the line and the window

    spec = chart(rendered("timeline", session=sid))

    low, high = spec["layout"]["yaxis"]["range"]
    tiers = [t for t in spec["data"] if t.get("name") in TIERS.values()]
    drawn = [y for t in tiers for y in t["y"]]
    assert len(drawn) == len(truth)  # every compaction listed is drawn
    assert low <= 0 and line < high < highest  # the axis is the line's, not the marker's
    assert all(low <= y < high for y in drawn)  # and every marker is on it
    hovers = " ".join(h for t in tiers for h in t["hovertext"])
    assert f"{highest:,} → " in hovers and "above the chart" in hovers


def test_the_timeline_says_why_the_line_jumps_when_the_estimator_learns_the_hidden_prompt(
    found: FindingsHome,
    rendered: PageCache,
) -> None:
    sid = found.session(MAIN_CHAIN)
    transcript = found.transcript(sid)
    usage = transcript.usage_at(transcript.turns[0])
    assert usage is not None and usage.input_tokens
    counted = f"{usage.input_tokens:,}"  # what the provider said of the first prompt

    at = rendered("timeline", session=sid)

    said = " ".join(i.value for i in at.info)
    assert f"Turn 2: for turn 1 the provider counted {counted} input tokens" in said
    assert "system prompt and tool schemas" in said and "the line jumps" in said
    notes = chart(at)["layout"]["annotations"]
    assert any(n["x"] == 2 and counted in n["text"] and n["showarrow"] for n in notes)


def test_the_diff_picker_lists_only_effective_compactions_by_turn_tier_and_tokens(
    found: FindingsHome,
) -> None:
    sid = found.session(SIDECHAIN)
    truth = found.effective[sid]

    at = open_page("diff", session=sid)
    picker = at.selectbox(key="compaction")

    assert len(picker.options) == len(truth)  # the no-ops are not offered
    for option, row in zip(picker.options, truth, strict=True):
        label = LABEL.match(option)
        assert label, f"{option!r} does not say turn, tier and tokens"
        before, after = f"{row['tokens_before']:,}", f"{row['tokens_after']:,}"
        assert label.group(2, 3, 4) == (TIERS[row["tier"]], before, after)
    turns = [int(LABEL.match(o).group(1)) for o in picker.options]  # type: ignore[union-attr]
    assert turns == sorted(turns)

    picker.select(str(truth[-1]["id"])).run()
    assert "Before:" in shown(at) and at.query_params["compaction"] == str(truth[-1]["id"])


def test_an_empty_retention_chart_says_every_summary_fell_back(
    found: FindingsHome, rendered: PageCache
) -> None:
    sid = found.session(SIDECHAIN)
    summarising = sum(r["tier"] in (2, 3) for r in found.effective[sid])

    at = rendered("retention", session=sid)

    assert not at.get("plotly_chart")
    said = " ".join(i.value for i in at.info)
    assert f"Every one of the {summarising} Soft/Full compactions in this session fell back" in said
    assert "the summary did not reduce the context" in said


def _postmortems(found: FindingsHome, sid: str) -> list[dict[str, Any]]:
    return [p for p in found.postmortems if p["session_id"] == sid]


def _by_cause(found: FindingsHome, sid: str) -> dict[str, list[dict[str, Any]]]:
    """The session's post-mortems by cause, each list by turn: the groups the page shows."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(_postmortems(found, sid), key=lambda p: p["turn"]):
        groups.setdefault(str(p["cause"]), []).append(p)
    return groups


def _representative(members: list[dict[str, Any]]) -> dict[str, Any]:
    """The one a group shows: its first with a verified fix, else its first."""
    return next((p for p in members if p["smallest_change_verified"]), members[0])


def test_each_group_of_emergencies_opens_with_its_cause_count_and_turns_then_the_fix(
    found: FindingsHome,
    rendered: PageCache,
) -> None:
    sid = found.session(SIDECHAIN)
    groups = _by_cause(found, sid)
    assert len(groups) > 1, "one cause only: the test would prove little"

    at = rendered("emergencies", session=sid)

    headings = [h.value for h in at.subheader]
    assert len(headings) == len(groups)
    for cause, members in groups.items():
        n = len(members)
        heading = next(h for h in headings if h.startswith(CAUSE_TITLES[cause]))
        turns = turns_text(p["turn"] for p in members)
        assert heading.endswith(f" — {n} emergenc{'y' if n == 1 else 'ies'}, {turns}")
    fixes = [m.value for m in at.markdown if m.value.startswith("**Fix:**")]
    assert len(fixes) == len(groups)
    details = {
        d for t in at.table if "what it changes" in t.value for d in t.value["what it changes"]
    }
    reps = [_representative(members) for members in groups.values()]
    truth = {c["detail"] for p in reps for c in p["counterfactuals"]}
    assert truth and details == truth  # every change tried for the one shown, with its words
    assert len(at.get("plotly_chart")) == len(groups)  # one lead-up per group


def test_a_verified_fix_is_a_toml_file_that_replay_config_loads_and_that_avoids_it(
    found: FindingsHome, rendered: PageCache, tmp_path: Path
) -> None:
    # the first session (the sidechain's, while it has one) whose groups show a verified fix
    candidates = [found.session(SIDECHAIN), *(s for s in found.effective if s != SIDECHAIN)]
    sid, verified = next(
        (
            (s, [p for p in reps if p["smallest_change_verified"]])
            for s in candidates
            if (reps := [_representative(m) for m in _by_cause(found, s).values()])
            and any(p["smallest_change_verified"] for p in reps)
        ),
        (candidates[0], []),
    )
    assert verified, "no verified fix in any session: the test would prove nothing"

    at = rendered("emergencies", session=sid)

    tomls = [c.value for c in at.code if c.language == "toml"]
    assert len(tomls) == len(at.get("download_button")) == len(verified)
    assert sum("Verified: replaying the whole session" in s.value for s in at.success) == len(
        verified
    )
    text = tomls[0]
    assert None not in tomllib.loads(text).values()
    file = tmp_path / "fix.toml"
    file.write_text(text, encoding="utf-8")
    loaded = load_config(file)
    pm = next(
        p for p in verified if loaded == CompactorConfig.model_validate(p["smallest_change_config"])
    )
    home = tmp_path / "home"
    source = found.transcript(sid).source_path or str(TRANSCRIPTS / CLAUDE)
    replay = ["replay", source, "--window", str(WINDOW), "--config", str(file)]
    done = CliRunner().invoke(cli, [*replay, "--home", str(home)])
    assert done.exit_code == 0, done.output
    done = CliRunner().invoke(
        cli, ["postmortem", "--json", "--no-counterfactuals", "--home", str(home)]
    )
    again = json.loads(done.stdout)["postmortems"]
    same = [p["turn"] for p in again if p["session_id"].startswith(sid.rsplit("@", 1)[0])]
    assert pm["turn"] not in same  # no emergency at that turn with the file applied


def test_a_baseline_that_did_not_reproduce_is_said_in_words_and_avoids_nothing(
    found: FindingsHome,
    rendered: PageCache,
) -> None:
    missed = [p for p in found.postmortems if p["reproduced"] is False]
    if not missed:
        pytest.skip("every baseline reproduces its emergency now; see test_postmortem_words")
    pm = missed[0]
    members = _by_cause(found, pm["session_id"])[str(pm["cause"])]

    at = rendered("emergencies", session=pm["session_id"])

    if len(members) > 1:  # the group's list says it for each of its emergencies
        listed = [
            fix
            for frame in at.dataframe
            if "fix" in frame.value.columns
            for turn, fix in zip(frame.value["turn"], frame.value["fix"], strict=True)
            if turn == pm["turn"]
        ]
        assert len(listed) == 1 and listed[0].startswith("not reproduced")
    if _representative(members)["compaction_id"] != pm["compaction_id"]:
        return  # its group shows another one
    said = " ".join(w.value for w in at.warning)
    assert "Not reproduced: replaying the session as it was did not reach Emergency" in said
    assert f"at turn {pm['turn']}, so no change can be said to avoid it" in said
    results = [r for t in at.table for r in (t.value.get("result") if "result" in t.value else [])]
    assert "avoids it" not in results and set(results) <= {"not replayed"}
    assert not any("Smallest change that avoids it" in m.value for m in at.markdown)
    assert not at.get("download_button")


def test_an_unavoidable_cause_gives_the_window_needed(
    found: FindingsHome, rendered: PageCache
) -> None:
    sid = found.session(MAIN_CHAIN)
    transcript = found.transcript(sid)
    usage = transcript.usage_at(transcript.turns[0])
    assert usage is not None and usage.input_tokens
    assert usage.input_tokens >= 0.95 * WINDOW  # its own first prompt is over the threshold
    groups = _by_cause(found, sid)
    assert set(groups) <= set(UNAVOIDABLE)  # no config could have avoided any of them

    at = rendered("emergencies", session=sid)

    headings = [h.value for h in at.subheader]
    assert len(headings) == len(groups)
    assert all(any(h.startswith(CAUSE_TITLES[c]) for h in headings) for c in groups)
    needed = [
        int(m.value.split()[0].replace(",", "")) for m in at.metric if m.label == "window needed"
    ]
    truth = [max(p["window_needed"] for p in members) for members in groups.values()]
    assert sorted(needed) == sorted(truth) and all(n > WINDOW for n in needed)
    fixes = [m.value.replace("\\", "") for m in at.markdown if m.value.startswith("**Fix:**")]
    assert all(any(f"{n:,}+ tokens" in f for f in fixes) for n in needed)


def test_the_fleet_list_names_each_emergency_by_its_cause(
    found: FindingsHome, rendered: PageCache
) -> None:
    at = rendered("emergencies")

    labels = [str(link.proto.label).replace("\\", "") for link in at.get("page_link")]
    listed = [label for label in labels if "tokens" in label]
    assert len(listed) == len(found.postmortems)
    assert sum("the fixed prompt alone fills the window" in label for label in listed) == sum(
        p["cause"] == "fixed_prompt" for p in found.postmortems
    )


def test_a_session_fix_is_named_above_the_groups(found: FindingsHome, rendered: PageCache) -> None:
    fixed = [p for p in found.postmortems if (p.get("session_fix") or {}).get("verified")]
    if not fixed:
        pytest.skip("no session here has a verified session fix")
    pm = fixed[0]
    fix = pm["session_fix"]

    at = rendered("emergencies", session=pm["session_id"])

    said = [m.value.replace("\\", "") for m in at.markdown]
    named = [m for m in said if m.startswith("**One fix for the session:**")]
    assert len(named) == 1 and f"{fix['detail'] or fix['change']} (verified" in named[0]
    if fix["avoids"]:
        avoided = named[0].split("no emergency at turn", 1)[1]
        assert avoided.strip("s )").split(", ") == [str(t) for t in fix["avoids"]]


def test_no_page_says_one_with_a_plural_noun(found: FindingsHome, rendered: PageCache) -> None:
    assert not plural_slips(found.effective, rendered)
