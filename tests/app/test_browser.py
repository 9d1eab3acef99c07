"""End to end in a real browser: the app served by ``serve_app``, driven in headless Chromium.

One server for the module, on 127.0.0.1 and a free port, over a store of replayed transcripts
(``fixtures.build_home``). Every page is opened by its URL and checked for its content and for
the absence of Streamlit's exception box, with a screenshot each; a timeline marker's link is
clicked through to its diff; events spooled while the app runs appear without a reload; script in a
transcript stays inert; a second app on the same store says in one line who owns it. A second
server on ``findings.build_findings_home`` shows the post-mortems, the timeline whose highest
marker was once drawn above the plot (checked in pixels) and the pages that say why. A third
on ``native.build_native_home`` shows the Harness compactions page of a real Claude Code
session, its diff links, and the page's empty state on the replay store.
"""

from __future__ import annotations

import re
import subprocess
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from analytics.cli.serve import app_url, free_port, serve_app, stop_app, wait_until_ready
from analytics.errors import StoreLockedError
from analytics.report.html import write_report
from analytics.report.theme import FONT
from analytics.store import open_store
from analytics.tuning.recommend import write_config
from analytics.tuning.specs import StrategySpec
from tests.app.browser import (
    DEADLINE_S,
    TextShows,
    body_text,
    browser_missing,
    click_until,
    exception_boxes,
    page_text,
    readme_screenshot,
    screenshot,
    start_browser,
    wait_for,
)
from tests.app.findings import FindingsHome, build_findings_home
from tests.app.fixtures import SCRIPT, TRANSCRIPTS, FixtureHome, build_home, run_hostile
from tests.app.native import FILES, build_native_home

pytestmark = pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))


@dataclass
class Served:
    fixture: FixtureHome
    url: str
    process: subprocess.Popen[bytes]
    driver: WebDriver

    def open(self, path: str, **params: str) -> None:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        self.driver.get(f"{self.url}{path}{query}")

    def session(self, prefix: str) -> str:
        return next(s for s in self.fixture.sessions if s.startswith(prefix))


def start(home: Path, log: Path) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    output = log.open("wb")  # the tuning form may read the fixture's transcripts
    process = serve_app(
        home, port=port, open_browser=False, output=output, allow_paths=[TRANSCRIPTS]
    )
    url = app_url("127.0.0.1", port)
    wait_until_ready(url, 60, process=process)
    return url, process


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("browser")
    fixture = build_home(root / "home")
    url, process = start(fixture.home, root / "server.log")
    driver = start_browser(root / "profile")
    try:
        yield Served(fixture, url, process, driver)
    finally:
        driver.quit()
        stop_app(process)


PAGES: list[tuple[str, str, dict[str, str], tuple[str, ...]]] = [
    ("overview", "", {}, ("compactlens", "sessions", "Compactions per tier")),
    ("sessions", "/sessions", {}, ("Sessions", "Open a session", "django__django-11910")),
    ("retention", "/retention", {}, ("Anchor retention", "Silent drops")),
    ("emergencies", "/emergencies", {}, ("Emergencies", "1af7fc5e")),
]


@pytest.mark.parametrize(("name", "path", "params", "expected"), PAGES)
def test_page_renders_without_an_exception(
    served: Served, name: str, path: str, params: dict[str, str], expected: tuple[str, ...]
) -> None:
    served.open(path, **params)

    page_text(served.driver, *expected)
    assert not exception_boxes(served.driver)
    screenshot(served.driver, name)


def test_overview_shows_the_figures_of_stats_json(served: Served) -> None:
    served.open("")
    text = page_text(served.driver, "Compactions per tier")

    stats = served.fixture.stats
    assert f"{stats['compactions']['total']:,}" in text
    assert f"{stats['turns']:,}" in text


@pytest.mark.parametrize(
    ("name", "prefix", "expected"),
    [
        ("timeline", "sqlfluff", ("Context tokens per turn", "· SOFT ·", "· FULL ·")),
        ("offloads", "hostile", ("Offloaded files", "call_0.txt")),
        ("emergency-post-mortem", "1af7fc5e", ("the one shown below", "tokens dropped")),
        ("retention-session", "django", ("Anchor retention", "Anchor survival")),
    ],
)
def test_session_pages_render(
    served: Served, name: str, prefix: str, expected: tuple[str, ...]
) -> None:
    path = {"emergency-post-mortem": "/emergencies", "retention-session": "/retention"}
    served.open(path.get(name, f"/{name}"), session=served.session(prefix))

    page_text(served.driver, served.session(prefix), *expected)
    assert not exception_boxes(served.driver)
    screenshot(served.driver, name)


def test_tuning_run_started_from_the_page_reports_progress_then_its_front(
    served: Served,
) -> None:
    served.open("/tuning")
    page_text(served.driver, "Start a small tuning run", "compactlens tune")

    click_until(
        served.driver,
        "//button[.//p[text()='start']]",
        TextShows(
            served.driver,
            lambda text: re.search(r"\d+ of \d+ trials|run \S+ finished", text) is not None,
        ),
        "a tuning run in progress",
    )

    text = page_text(served.driver, "finished", "Pareto front", "Recommended config", timeout=600)
    assert "tokens billed vs artifact retention" in text or "Pareto front:" in text
    assert not exception_boxes(served.driver)
    screenshot(served.driver, "tuning")


def test_timeline_marker_link_opens_its_diff(served: Served) -> None:
    sid = served.session("sqlfluff")
    served.open("/timeline", session=sid)
    page_text(served.driver, "· FULL ·")

    marker = served.driver.find_element(By.PARTIAL_LINK_TEXT, "· FULL ·")
    marker.click()

    text = page_text(served.driver, "Before:", "After:", "Anchors", "Record")
    assert "/diff" in served.driver.current_url and "compaction=" in served.driver.current_url
    assert "SUMMARIZED" in text and "KEPT" in text
    assert not exception_boxes(served.driver)
    screenshot(served.driver, "diff")


def test_clicking_a_marker_on_the_chart_opens_its_diff(served: Served) -> None:
    sid = served.session("django")
    served.open("/timeline", session=sid)
    page_text(served.driver, "· SOFT ·")
    # the first chart is the timeline (the cost chart below it has scatter points too)
    timeline = served.driver.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")[0]
    markers = timeline.find_elements(By.CSS_SELECTOR, "g.trace.scatter path.point")
    assert markers, "no compaction marker drawn"

    ActionChains(served.driver).move_to_element(markers[-1]).click().perform()

    wait_for(lambda: "/diff" in served.driver.current_url, DEADLINE_S, "the diff page")
    query = urllib.parse.parse_qs(urllib.parse.urlparse(served.driver.current_url).query)
    assert query["session"] == [sid] and query["compaction"][0]
    page_text(served.driver, "Before:", "After:")
    assert not exception_boxes(served.driver)


def test_script_in_a_transcript_stays_inert(served: Served) -> None:
    served.open("/timeline", session=served.fixture.hostile)
    page_text(served.driver, "· FULL ·")
    served.driver.find_element(By.PARTIAL_LINK_TEXT, "· FULL ·").click()

    text = page_text(served.driver, "Before:", "window.__pwned")
    assert SCRIPT in text  # shown as the characters it is
    assert served.driver.execute_script("return window.__pwned === undefined") is True
    scripts = served.driver.find_elements(By.XPATH, "//script[contains(., '__pwned')]")
    assert not scripts


def test_file_browser_refuses_an_escape(served: Served) -> None:
    served.open("/offloads", session=served.fixture.hostile, file="../secret.txt")

    text = page_text(served.driver, "Refused")
    assert "top secret" not in text


def test_a_session_spooled_while_the_page_is_open_appears_without_a_reload(
    served: Served,
) -> None:
    served.open("/sessions")
    page_text(served.driver, "Open a session")
    new_id = f"live-{uuid.uuid4().hex[:8]}"
    assert new_id not in body_text(served.driver)

    run_hostile(served.fixture.home, session_id=new_id)  # an agent appends to the spool

    # no driver.get: the app's refresher must redraw the open page by itself (how soon, on a
    # quiet machine, is bench/app_pages.py's figure; here the deadline only bounds a hang)
    appeared = TextShows(served.driver, lambda text: new_id in text)
    wait_for(appeared, DEADLINE_S, f"{new_id} on /sessions")
    assert not exception_boxes(served.driver)


def test_a_second_owner_gets_one_clear_line(served: Served, tmp_path: Path) -> None:
    with pytest.raises(StoreLockedError):
        open_store(served.fixture.home)
    url, process = start(served.fixture.home, tmp_path / "second.log")
    try:
        served.driver.get(url)
        text = page_text(served.driver, "open in another process")
        assert not exception_boxes(served.driver)
        assert "Compactions per tier" not in text
    finally:
        stop_app(process)


@pytest.mark.parametrize(
    ("path", "raw_query", "expected"),
    [
        ("/emergencies", "session=no-such-session", "No session no-such-session"),
        ("/offloads", "file={folder}/" + "a" * 300, "not on this machine"),
        ("/offloads", "file={folder}/a%00b", "not on this machine"),
        ("/offloads", "file={folder}/call_0.txt/x", "not on this machine"),
    ],
    ids=["unknown-session", "ENAMETOOLONG", "NUL", "ENOTDIR"],
)
def test_a_link_that_matches_nothing_gets_the_page_s_not_found_message(
    served: Served, path: str, raw_query: str, expected: str
) -> None:
    home = served.fixture.home
    folder = next((home / ".compactlens" / "tool_results").glob("hostile-*"))
    relative = urllib.parse.quote(str(folder.relative_to(home)))
    session = urllib.parse.quote(served.fixture.hostile)
    query = raw_query.format(folder=relative)
    if path == "/offloads":
        query = f"session={session}&{query}"
    served.driver.get(f"{served.url}{path}?{query}")  # as typed or pasted, %00 and all

    page_text(served.driver, expected)
    assert not exception_boxes(served.driver)


@dataclass
class FindingsServed:
    found: FindingsHome
    url: str
    driver: WebDriver
    report: Path
    """``compactlens report`` of the findings store, written before the app took it."""

    def open(self, path: str, **params: str) -> None:
        self.driver.get(f"{self.url}{path}?{urllib.parse.urlencode(params)}")


@pytest.fixture(scope="module")
def findings(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FindingsServed]:
    root = tmp_path_factory.mktemp("findings-browser")
    found = build_findings_home(root / "home")
    recommended = found.home / "tuning" / "run-1-recommended.toml"  # as tune writes it
    write_config(StrategySpec(kind="progressive"), recommended, "cheapest within 1% retention")
    with open_store(found.home) as store:
        report = write_report(store, root / "report.html", spool_dir=found.home / "spool")
    url, process = start(found.home, root / "server.log")
    try:
        yield FindingsServed(found, url, served.driver, report)
    finally:
        stop_app(process)


PLOT = """
const gd = document.querySelector('.js-plotly-plot');
if (!gd || !gd._fullLayout || !gd._fullLayout.yaxis) return null;
const area = gd.querySelector('.nsewdrag').getBoundingClientRect();
const tiers = ['WARN', 'SOFT', 'FULL', 'EMERGENCY'];
const points = Array.from(gd.querySelectorAll('g.trace.scatter'))
  .filter(g => g.__data__ && tiers.includes(g.__data__[0].trace.name))
  .flatMap(g => Array.from(g.querySelectorAll('path.point')))
  .map(p => { const b = p.getBoundingClientRect(); return b.top + b.height / 2; });
const labels = Array.from(gd.querySelectorAll('g.annotation'))
  .filter(a => /^(WARN|SOFT|FULL|EMERGENCY|window) [0-9,]+$/.test(a.textContent))
  .map(a => { const b = a.querySelector('text').getBoundingClientRect();
    return {text: a.textContent, top: b.top, bottom: b.bottom, left: b.left, right: b.right}; });
return {range: gd._fullLayout.yaxis.range, top: area.top, bottom: area.bottom, points: points,
        labels: labels};
"""


VERIFIED = "a session with a verified fix"


def _verified(found: FindingsHome) -> str:
    """The first session whose post-mortems hold a verified smallest change (which session
    that is follows the counterfactual search, not this test)."""
    sessions = [str(p["session_id"]) for p in found.postmortems if p["smallest_change_verified"]]
    assert sessions, "no verified fix in the store: the page check would prove nothing"
    return sorted(sessions)[0]


def _overlapping(labels: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The pairs of labels whose boxes on screen intersect."""
    return [
        (a["text"], b["text"])
        for i, a in enumerate(labels)
        for b in labels[i + 1 :]
        if a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
        and a["left"] < b["right"]
        and b["left"] < a["right"]
    ]


def test_the_timeline_axis_holds_the_line_draws_every_marker_and_no_label_covers_another(
    findings: FindingsServed,
) -> None:
    sid = findings.found.session("fe5e1c67-53e7-4862-81ae-d0e013e3270b:sidechain:60dade70")
    truth = findings.found.effective[sid]
    highest = max(r["tokens_before"] for r in truth)
    line = max(16_000, findings.found.view_peak[sid])
    assert highest > 1.08 * line  # the Emergency estimated far above everything it sent
    findings.open("/timeline", session=sid)
    page_text(findings.driver, "Context tokens per turn", "(open diff)")
    wait_for(lambda: findings.driver.execute_script(PLOT) is not None, DEADLINE_S, "the chart")

    plot = findings.driver.execute_script(PLOT)

    assert line < plot["range"][1] < highest  # the y axis holds the line, not that marker
    assert len(plot["points"]) == len(truth)  # one marker per compaction listed
    assert all(plot["top"] <= y <= plot["bottom"] for y in plot["points"])  # all on the plot
    names = sorted(label["text"].split()[0] for label in plot["labels"])
    assert names == sorted(["WARN", "SOFT", "FULL", "EMERGENCY", "window"])
    assert not _overlapping(plot["labels"])
    screenshot(findings.driver, "timeline-highest-marker")


@pytest.mark.parametrize(
    ("name", "path", "prefix", "expected"),
    [
        (
            "timeline-estimate",
            "/timeline",
            "fe5e1c67-53e7-4862-81ae-d0e013e3270b@",
            ("the line jumps",),
        ),
        (
            "emergencies-findings",
            "/emergencies",
            VERIFIED,
            ("the one shown below", "Verified: replaying", "what it changes"),
        ),
        (
            "emergencies-unavoidable",
            "/emergencies",
            "fe5e1c67-53e7-4862-81ae-d0e013e3270b@",
            ("no config avoids it", "window needed"),
        ),
        ("emergencies-marshmallow", "/emergencies", "marshmallow", ("the one shown below",)),
        (
            "retention-why",
            "/retention",
            "fe5e1c67-53e7-4862-81ae-d0e013e3270b:sidechain:60dade70",
            ("fell back to trimming",),
        ),
    ],
)
def test_findings_pages_render_and_say_what_they_found(
    findings: FindingsServed, name: str, path: str, prefix: str, expected: tuple[str, ...]
) -> None:
    sid = _verified(findings.found) if prefix == VERIFIED else findings.found.session(prefix)
    findings.open(path, session=sid)

    page_text(findings.driver, *expected)
    assert not exception_boxes(findings.driver)
    screenshot(findings.driver, name)


def test_the_diff_picker_lists_effective_compactions_by_turn_tier_and_tokens(
    findings: FindingsServed,
) -> None:
    sid = findings.found.session("fe5e1c67-53e7-4862-81ae-d0e013e3270b:sidechain:60dade70")
    truth = findings.found.effective[sid]
    findings.open("/diff", session=sid)
    page_text(findings.driver, "turn · tier · tokens before → after")

    findings.driver.find_element(By.CSS_SELECTOR, '[data-testid="stSelectbox"] input').click()
    wait_for(
        lambda: bool(findings.driver.find_elements(By.CSS_SELECTOR, '[role="option"]')),
        DEADLINE_S,
        "the picker's options",
    )
    screenshot(findings.driver, "diff-picker")
    shown = [o.text for o in findings.driver.find_elements(By.CSS_SELECTOR, '[role="option"]')]

    first = truth[0]
    assert shown[0].startswith("turn ") and f"{first['tokens_before']:,} → " in shown[0]
    assert not any(len(o) == 36 and o.count("-") == 4 for o in shown)  # no bare UUIDs
    assert len(shown) <= len(truth)  # the no-ops are not offered (the list may be virtual)


def test_the_harness_compactions_page_shows_each_compaction_and_links_its_diff(
    served: Served, tmp_path_factory: pytest.TempPathFactory
) -> None:
    served.open("/harness")
    said = page_text(served.driver, "Harness compactions", "Claude Code", "OpenHands")
    assert "Codex" in said and not exception_boxes(served.driver)  # the replay store: none

    root = tmp_path_factory.mktemp("native-browser")
    native = build_native_home(root / "home")
    sid = native.session_of(FILES[1])
    entries = native.entries(sid)
    url, process = start(native.home, root / "server.log")
    try:
        served.driver.get(f"{url}/harness?{urllib.parse.urlencode({'session': sid})}")
        text = page_text(
            served.driver, "Re-read rate per origin", f"#{len(entries)}: open its diff"
        )
        assert not exception_boxes(served.driver)
        for number, entry in enumerate(entries, start=1):
            assert (
                f"#{number} · claude-code · {entry['trigger']} · {entry['tokens_before']:,}" in text
            )
        screenshot(served.driver, "harness")
        links = served.driver.find_elements(By.PARTIAL_LINK_TEXT, "open its diff")
        queries = [urllib.parse.urlparse(str(a.get_attribute("href"))) for a in links]
        assert [q.path for q in queries] == ["/diff"] * len(entries)
        assert [dict(urllib.parse.parse_qsl(q.query)) for q in queries] == [
            {"session": sid, "compaction": e["compaction_id"]} for e in entries
        ]
        links[0].click()
        page_text(served.driver, "Before:", "After:")
        assert not exception_boxes(served.driver)
    finally:
        stop_app(process)


def _query(driver: WebDriver) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlparse(driver.current_url).query))


def test_counterfactuals_computed_from_a_session_opened_in_the_list_stay_on_its_page(
    served: Served,
) -> None:
    sid = served.session("1af7fc5e")
    served.open("/emergencies")
    page_text(served.driver, "newest first")

    click_until(
        served.driver,
        f"//a[contains(., '{sid[:8]}')]",
        lambda: _query(served.driver).get("session") == sid,
        "the session in the URL",
    )
    page_text(served.driver, "the one shown below", "Not computed yet")
    click_until(
        served.driver,
        "//button[.//p[text()='compute counterfactuals']]",
        TextShows(served.driver, lambda text: "Counterfactuals of turn" in text),
        "the counterfactuals on the session's page",
    )

    text = page_text(served.driver, "Counterfactuals of turn")
    assert _query(served.driver) == {"session": sid}
    assert sid in text and "newest first" not in text and "Not computed yet" not in text
    assert not exception_boxes(served.driver)


def test_an_offloaded_file_link_pasted_into_a_new_browser_opens_that_file(
    served: Served, tmp_path: Path
) -> None:
    served.open("/offloads", session=served.fixture.hostile)
    page_text(served.driver, "call_0.txt")

    click_until(
        served.driver,
        "//a[contains(., 'call_0.txt')]",
        lambda: "file" in _query(served.driver),
        "the file in the URL",
    )
    shared = served.driver.current_url
    assert _query(served.driver)["file"].endswith("/call_0.txt")
    assert _query(served.driver)["session"] == served.fixture.hostile

    other = start_browser(tmp_path / "another-profile")  # nothing shared but the URL
    try:
        other.get(shared)
        text = page_text(other, "Preview", "call_0.txt", "filler line")
        assert "download" in text
        assert not exception_boxes(other)
    finally:
        other.quit()


WIDTHS = """
const html = document.documentElement;
return {scroll: html.scrollWidth, client: html.clientWidth, inner: window.innerWidth,
        plots: document.querySelectorAll('.js-plotly-plot .main-svg').length,
        font: getComputedStyle(document.body).fontFamily,
        wide: Array.from(document.querySelectorAll('table, pre, .plotly-graph-div'))
          .filter(e => e.getBoundingClientRect().right > html.clientWidth + 1)
          .map(e => e.tagName + ' ' + e.getBoundingClientRect().right)};
"""


def test_the_report_fits_a_1280_px_screen_in_the_app_s_font(findings: FindingsServed) -> None:
    page = findings.report.read_text(encoding="utf-8")
    sidechains = [s for s in findings.found.effective if ":sidechain:" in s]
    assert any(s in page for s in sidechains)  # 100-character ids without a space
    assert "# measured calibrated on" in page  # the recommended TOML's one long line
    driver = findings.driver
    size = driver.get_window_size()
    try:
        driver.set_window_size(1280, 1000)
        driver.get(findings.report.as_uri())
        wait_for(
            lambda: driver.execute_script(WIDTHS)["plots"] >= 5, DEADLINE_S, "the report's charts"
        )

        seen = driver.execute_script(WIDTHS)

        assert seen["inner"] <= 1280
        assert seen["scroll"] <= seen["client"], seen["wide"]  # nothing scrolls sideways
        assert seen["font"] == FONT.replace("'", '"')
        screenshot(driver, "report-1280")
    finally:
        driver.set_window_size(size["width"], size["height"])


def test_readme_screenshots_are_the_timeline_and_a_diff(served: Served) -> None:
    """The README's two pictures (written over ``docs/`` with ``README_SCREENSHOTS=1``)."""
    served.open("/timeline", session=served.session("sqlfluff"))
    page_text(served.driver, "Context tokens per turn", "· FULL ·", "paid for themselves")
    readme_screenshot(served.driver, "timeline")

    served.driver.find_element(By.PARTIAL_LINK_TEXT, "· FULL ·").click()

    page_text(served.driver, "Before:", "After:", "changed only")
    assert not exception_boxes(served.driver)
    readme_screenshot(served.driver, "diff")
