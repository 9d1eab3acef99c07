"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium.

``page_text`` waits until Streamlit has finished running the page's script and the expected
text is on screen, by polling (no fixed sleeps); ``TextShows`` is such a poll's condition.
Selenium's visible text (``body_text``) is the truth every wait is decided on, but it costs about
a second on a large page (its atom walks every element of the DOM, Plotly's SVG included), so a
poll first reads the page's ``innerText`` (milliseconds) and asks for the visible text only when
that already shows what is awaited, or when ``FULL_CHECK_S`` have passed without it.
``exception_boxes`` finds Streamlit's exception elements. Screenshots go to
``data/screenshots/`` (ignored by git), one PNG per page; with ``README_SCREENSHOTS=1`` in the
environment the pages the README shows are also written over ``docs/app-<name>.png``
(``readme_screenshot``), so the README's pictures are the browser tests' own:
``README_SCREENSHOTS=1 pytest -n 0 tests/app/test_browser.py -k readme``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "data" / "screenshots"
DOCS = Path(__file__).resolve().parents[2] / "docs"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1800",
)
FULL_CHECK_S = 2.0
"""At most this long between two reads of the visible text while a wait polls: were the cheap
``innerText`` ever to word a text differently from the visible text, the wait still decides on
the latter, only less often."""
DEADLINE_S = 90.0
"""Seconds a page may take to show what a test waits for: generous, for a loaded machine (the
waits poll, so a fast machine does not wait longer)."""


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    for tool in (CHROMIUM, CHROMEDRIVER):
        if not Path(tool).exists() and shutil.which(Path(tool).name) is None:
            return f"{tool} is missing: apt-get install chromium chromium-driver (.ci/run does)"
    return None


def start_browser(profile: Path) -> WebDriver:
    options = Options()
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.binary_location = CHROMIUM if Path(CHROMIUM).exists() else str(shutil.which("chromium"))
    driver = shutil.which("chromedriver") or CHROMEDRIVER
    return webdriver.Chrome(service=Service(driver), options=options)


def body_text(driver: WebDriver) -> str:
    return str(driver.find_element(By.TAG_NAME, "body").text)


def _inner_text(driver: WebDriver) -> str:
    """The body's ``innerText``, whitespace (no-break spaces included) folded to one space."""
    text = driver.execute_script("return document.body ? document.body.innerText : '';")
    return " ".join(str(text or "").split())


class TextShows:
    """A condition for ``wait_for``: ``shows(body_text(driver))``, with the visible text read
    only when the cheap ``innerText`` (whitespace folded) already ``shows``, or at least every
    ``FULL_CHECK_S`` otherwise. True only ever on the visible text, kept as ``text``."""

    def __init__(self, driver: WebDriver, shows: Callable[[str], bool]) -> None:
        self.driver = driver
        self.shows = shows
        self.text = ""
        self._last_full = time.monotonic()

    def __call__(self) -> bool:
        cheap = self.shows(_inner_text(self.driver))
        if not cheap and time.monotonic() - self._last_full < FULL_CHECK_S:
            return False
        self._last_full = time.monotonic()
        self.text = body_text(self.driver)
        return self.shows(self.text)


def running(driver: WebDriver) -> bool:
    """Whether Streamlit shows its "running" status (the script has not finished)."""
    return bool(driver.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"]'))


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``condition`` until true; the seconds it took. ``AssertionError`` on timeout."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def page_text(driver: WebDriver, *expected: str, timeout: float = DEADLINE_S) -> str:
    """The page's visible text once every ``expected`` string is shown and the run is over."""

    shows = TextShows(driver, lambda text: all(e in text for e in expected))

    def ready() -> bool:
        return not running(driver) and shows()

    try:
        wait_for(ready, timeout, f"{expected} on {driver.current_url}")
    except AssertionError as timed_out:  # say what the page showed instead
        raise AssertionError(f"{timed_out}; it showed:\n{body_text(driver)[:2000]}") from None
    return shows.text


def click_until(
    driver: WebDriver, xpath: str, took_effect: Callable[[], bool], what: str, tries: int = 3
) -> None:
    """Click the element at ``xpath`` once it is on screen and the page is idle, until
    ``took_effect``. The app reruns a page when its store changes; a click that lands while the
    page is being redrawn goes to an element that is about to be replaced and is lost, so the
    click is repeated (at most ``tries`` times) rather than assumed to have worked."""
    for _ in range(tries):
        wait_for(
            lambda: bool(driver.find_elements(By.XPATH, xpath)) and not running(driver),
            DEADLINE_S,
            f"{xpath} on {driver.current_url}",
        )
        try:
            driver.find_element(By.XPATH, xpath).click()
            wait_for(took_effect, DEADLINE_S, what)
            return
        except (AssertionError, StaleElementReferenceException):
            continue
    raise AssertionError(f"{tries} clicks on {xpath} and still no {what}")


def exception_boxes(driver: WebDriver) -> list[str]:
    found = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    return [str(e.text) for e in found]


def screenshot(driver: WebDriver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def readme_screenshot(driver: WebDriver, name: str) -> Path | None:
    """The page as ``docs/app-<name>.png`` (the README's picture), when ``README_SCREENSHOTS``
    is set; None otherwise (a test run leaves the docs as they are)."""
    if not os.environ.get("README_SCREENSHOTS"):
        return None
    path = DOCS / f"app-{name}.png"
    driver.save_screenshot(str(path))
    return path
