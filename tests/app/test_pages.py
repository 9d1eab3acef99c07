"""Every page of the app through ``streamlit.testing`` on a store of real replayed transcripts.

The store is built once for the package (``conftest.fixture_home``: two mini-swe-agent runs and
a Claude Code session replayed at 16k, a hostile session whose content holds ``<script>``, and
a scripted session with a silent drop).
Each test opens a page by its file with query parameters, as a shared link would, and checks
what a person would see, and that no exception was rendered.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path, PurePosixPath

import pytest
from streamlit.testing.v1 import AppTest

from analytics import drop_reason_words
from analytics.store import open_store
from app import tuning_job
from app.owner import shared_owner
from app.postmortem import CAUSE_TITLES
from tests.app.fixtures import DROPPED_DECISION, SCRIPT, TRANSCRIPTS, FixtureHome
from tests.app.pages import MAIN, link_params, open_page, session_with, shown

TIERS = {1: "WARN", 2: "SOFT", 3: "FULL", 4: "EMERGENCY"}


def test_overview_shows_the_figures_of_stats_json(fixture_home: FixtureHome) -> None:
    at = AppTest.from_file(str(MAIN), default_timeout=60).run()

    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    stats = fixture_home.stats
    assert metrics["sessions"] == f"{stats['sessions']:,}"
    assert metrics["turns"] == f"{stats['turns']:,}"
    assert metrics["compactions"] == f"{stats['compactions']['total']:,}"
    assert metrics["silent anchor drops"] == f"{stats['silent_drops']:,}"
    assert len(at.get("plotly_chart")) == 3


def test_sessions_page_lists_every_session_with_links(fixture_home: FixtureHome) -> None:
    at = open_page("sessions")

    text = shown(at).replace("\\", "")
    for sid in fixture_home.sessions:
        assert sid in text
    assert f"{len(fixture_home.sessions)} of {len(fixture_home.sessions)} sessions" in text


def test_sessions_filter_narrows_the_list(fixture_home: FixtureHome) -> None:
    at = open_page("sessions")
    at.text_input(key="contains").input("django").run()

    text = shown(at).replace("\\", "")
    assert f"1 of {len(fixture_home.sessions)} sessions" in text
    assert "sqlfluff" not in text


def test_timeline_has_markers_by_tier_and_links_to_each_diff(fixture_home: FixtureHome) -> None:
    sid = session_with(fixture_home, "sqlfluff")
    at = open_page("timeline", session=sid)

    chart = at.get("plotly_chart")[0]
    spec = str(chart.proto.spec)
    assert "Context tokens per turn" in spec and "SOFT" in spec and "FULL" in spec
    params = link_params(at, "· SOFT ·")
    assert params["session"] == sid and params["compaction"]


def test_timeline_without_a_session_offers_a_picker(fixture_home: FixtureHome) -> None:
    at = open_page("timeline")

    assert at.selectbox(key="session").options == sorted(
        at.selectbox(key="session").options, key=at.selectbox(key="session").options.index
    )
    assert set(fixture_home.sessions) <= set(at.selectbox(key="session").options)


def test_diff_shows_both_sides_marked_anchors_and_record(fixture_home: FixtureHome) -> None:
    sid = session_with(fixture_home, "sqlfluff")
    params = link_params(open_page("timeline", session=sid), "· FULL ·")
    at = open_page("diff", **params)

    text = shown(at)
    assert "Before:" in text and "After:" in text
    assert "SUMMARIZED" in text and "KEPT" in text and "SYNTHETIC" in text
    assert "Anchors" in text and "user_intent" in text
    assert len(at.json) == 1 and len(at.code) >= 1  # the record and the summary


def test_offloads_preview_is_highlighted_and_downloadable(fixture_home: FixtureHome) -> None:
    params = link_params(open_page("offloads", session=fixture_home.hostile), "call_0.txt")
    at = open_page("offloads", **params)

    assert at.code[0].language == "html"  # highlighted as code: the markup stays text
    assert "<html>" in at.code[0].value
    assert len(at.get("download_button")) == 1


@pytest.mark.parametrize(
    "path",
    ["../secret.txt", ".compactlens/tool_results/../../secret.txt", "/etc/passwd"],
)
def test_offloads_refuse_paths_outside_the_root(fixture_home: FixtureHome, path: str) -> None:
    at = open_page("offloads", session=fixture_home.hostile, file=path)

    assert any("Refused" in e.value for e in at.error)
    assert not at.code


def test_offloads_refuse_a_symlink_out_of_the_root(fixture_home: FixtureHome) -> None:
    listed = open_page("offloads", session=fixture_home.hostile)
    assert "escape.txt" not in shown(listed)  # symbolic links are not listed
    first = link_params(listed, "call_0.txt")["file"]
    escape = str(PurePosixPath(first).parent / "escape.txt")
    at = open_page("offloads", session=fixture_home.hostile, file=escape)

    assert any("symbolic link" in e.value for e in at.error)
    assert "top secret" not in "".join(c.value for c in at.code)


def test_retention_shows_survival_and_silent_drops_link_to_diffs(
    fixture_home: FixtureHome,
) -> None:
    at = open_page("retention")

    assert "Anchor survival, whole fleet" in str(at.get("plotly_chart")[0].proto.spec)
    assert f"Silent drops ({fixture_home.stats['silent_drops']:,})" in shown(at)
    params = link_params(at, "open the compaction that dropped it")
    assert params["session"] in fixture_home.sessions and params["compaction"]


def test_retention_of_one_session(fixture_home: FixtureHome) -> None:
    sid = session_with(fixture_home, "django")
    at = open_page("retention", session=sid)

    assert sid in shown(at)
    assert "Anchor survival, this session" in str(at.get("plotly_chart")[0].proto.spec)


def test_silent_drops_name_their_compactions_by_turn_and_tier_and_say_why(
    fixture_home: FixtureHome,
) -> None:
    # the scripted summariser states the decision in its first summary, replaces it in its
    # second with a new one and keeps as many: dropped there, by the summary's cap
    first, second = fixture_home.effective[fixture_home.decisions][:2]
    assert {first["tier"], second["tier"]} <= {2, 3}

    at = open_page("retention")

    table = next(t.value for t in at.table if "why" in t.value.columns)
    assert list(table.columns) == [
        *("no.", "session", "anchor", "item"),
        *("introduced at", "dropped at", "why"),
    ]
    (row,) = table[table["item"] == DROPPED_DECISION].to_dict("records")
    introduced = re.fullmatch(r"turn (\d+)", row["introduced at"])
    dropped = re.fullmatch(r"turn (\d+) \((SOFT|FULL)\)", row["dropped at"])
    assert introduced and dropped, row
    assert int(introduced[1]) < int(dropped[1]) and dropped[2] == TIERS[second["tier"]]
    assert row["why"] == drop_reason_words("cap")
    params = link_params(at, f"#{row['no.']}: open the compaction that dropped it")
    assert params == {"session": fixture_home.decisions, "compaction": second["id"]}


def test_a_session_with_only_emergencies_says_why_it_has_no_retention(
    fixture_home: FixtureHome,
) -> None:
    sid = session_with(fixture_home, "1af7fc5e")
    tiers = [r["tier"] for r in fixture_home.effective[sid]]
    assert tiers and set(tiers) == {4}

    at = open_page("retention", session=sid)

    assert not at.get("plotly_chart")
    said = " ".join(i.value for i in at.info)
    assert f"none Soft or Full (Warn offloads 0, Emergency truncations {len(tiers)})" in said


def test_emergencies_list_and_post_mortem(fixture_home: FixtureHome) -> None:
    at = open_page("emergencies")
    sid = session_with(fixture_home, "1af7fc5e")
    params = link_params(at, sid)

    at = open_page("emergencies", **params)
    causes = shared_owner(fixture_home.home).read(  # the app's own handle: it owns the store
        lambda store: store.query(
            "SELECT cause, count(*) FROM job_emergencies WHERE session_id = ? GROUP BY 1",
            [sid],
        )
    )
    text = shown(at)
    for cause, n in causes.iter_rows():  # one group per cause, with its count
        assert f"{CAUSE_TITLES[cause]} — {n} emergenc{'y' if n == 1 else 'ies'}, turn" in text
    charts = at.get("plotly_chart")
    assert len(charts) == causes.height  # one lead-up per group, not one per emergency
    assert all("Lead-up to the emergency" in str(c.proto.spec) for c in charts)
    assert "Largest messages before turn" in text
    assert {m.label for m in at.metric} >= {"settled", "messages dropped", "tokens dropped"}


def test_counterfactuals_are_computed_on_request(fixture_home: FixtureHome) -> None:
    at = open_page("emergencies", session=session_with(fixture_home, "1af7fc5e"))
    assert any("Not computed yet" in i.value for i in at.info)

    at.button[0].click().run()

    assert not at.exception
    text = shown(at)
    assert "Only the baseline was replayed" in text  # its emergencies are all unavoidable
    assert "Not computed yet" not in text


def test_tuning_run_started_from_the_page_shows_its_front_and_config(
    fixture_home: FixtureHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["app/main.py", "--allow-path", str(TRANSCRIPTS)])
    at = open_page("tuning")
    assert "compactlens tune" in "".join(i.value for i in at.info)  # no run yet
    assert str(at.text_area[0].value).count("transcripts/") == 3  # the store's sources

    at.form_submit_button[0].click().run()
    job = tuning_job.current(fixture_home.home)
    assert job is not None
    assert job.done.wait(120), "the tuning run did not finish"
    assert job.error is None, job.error
    at.run()

    assert not at.exception
    assert any(job.run_id and job.run_id in t.value for t in at.text)
    assert "vs artifact retention" in str(at.get("plotly_chart")[0].proto.spec)
    assert any("Pareto front: " in t.value for t in at.text)
    assert len(at.get("download_button")) == 1
    assert any(c.language == "toml" for c in at.code)


@pytest.mark.parametrize(
    "asked",
    [
        "/etc",  # outside the home, and no --allow-path given
        "{transcripts}",  # the store's own sources are not allowed without --allow-path
        "../../../../../../../etc/passwd",  # relative paths are under the home
        "{home}/linked/out",  # a link under the home that leads out
        "{home}/linked",  # a folder under the home holding that link
    ],
)
def test_the_tuning_form_reads_only_under_the_home_and_allowed_folders(
    fixture_home: FixtureHome, asked: str
) -> None:
    link = fixture_home.home / "linked" / "out"
    if not link.is_symlink():
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(TRANSCRIPTS, target_is_directory=True)
    at = open_page("tuning")
    assert str(at.text_area[0].value) == ""  # the sources outside are not even suggested
    started = tuning_job.current(fixture_home.home)

    path = asked.format(transcripts=TRANSCRIPTS, home=fixture_home.home)
    at.text_area[0].input(path)
    at.form_submit_button[0].click().run()

    assert not at.exception
    assert any("Refused" in e.value and "allow" in e.value for e in at.error), at.error
    assert tuning_job.current(fixture_home.home) is started  # no run was started


def test_script_and_html_in_content_stay_text(fixture_home: FixtureHome) -> None:
    params = link_params(open_page("timeline", session=fixture_home.hostile), "· FULL ·")
    at = open_page("diff", **params)

    assert any(SCRIPT in t.value for t in at.text)
    assert not any("<script" in m.value for m in at.markdown)  # never through markdown
    for element in at.markdown:
        assert not element.proto.allow_html


def test_an_unknown_compaction_of_a_known_session_says_so(fixture_home: FixtureHome) -> None:
    at = open_page("diff", session=session_with(fixture_home, "sqlfluff"), compaction="miss<b>")

    assert any("No compaction" in w.value for w in at.warning)


def test_an_unknown_session_in_a_link_is_named_escaped(fixture_home: FixtureHome) -> None:
    at = open_page("diff", session="nope<b>", compaction="missing")

    assert any("No session nope\\<b\\>" in w.value for w in at.warning)


def test_an_empty_store_says_what_to_do(
    fixture_home: FixtureHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTLENS_HOME", str(tmp_path / "empty"))

    at = AppTest.from_file(str(MAIN), default_timeout=60).run()

    assert not at.exception
    assert any("compactlens import PATH" in i.value for i in at.info)
    sessions = open_page("sessions")
    assert any("compactlens import PATH" in i.value for i in sessions.info)


def test_a_store_owned_by_another_process_gets_one_clear_line(
    fixture_home: FixtureHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPACTLENS_HOME", str(tmp_path))
    with open_store(tmp_path):
        at = AppTest.from_file(str(MAIN), default_timeout=60).run()

    assert not at.exception
    assert len(at.error) == 1 and "another process" in at.error[0].value
    assert not at.metric


@pytest.mark.parametrize("page", ["emergencies", "timeline", "offloads", "retention", "diff"])
def test_a_link_to_an_unknown_session_says_not_found(fixture_home: FixtureHome, page: str) -> None:
    at = open_page(page, session="no-such-session")  # open_page: no exception on the page

    warnings = " ".join(w.value for w in at.warning).replace("\\", "")
    assert "no-such-session" in warnings and "in this store" in warnings
    assert not at.get("plotly_chart")


@pytest.mark.parametrize(
    "name",
    [
        "a" * 300,  # ENAMETOOLONG
        "a\x00b",  # what ?file=a%00b decodes to: an embedded NUL
        "call_0.txt/x",  # ENOTDIR: a file used as a folder
    ],
)
def test_an_offload_name_no_file_can_have_gets_the_not_found_message(
    fixture_home: FixtureHome, name: str
) -> None:
    first = link_params(open_page("offloads", session=fixture_home.hostile), "call_0.txt")["file"]
    asked = str(PurePosixPath(first).parent / name)

    at = open_page("offloads", session=fixture_home.hostile, file=asked)

    assert any("not on this machine" in w.value for w in at.warning), [w.value for w in at.warning]
    assert not at.error and not at.code
