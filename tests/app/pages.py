"""What the AppTest page tests share: opening a page as a link would, and reading it back.

``open_page`` runs ``app/main.py`` under ``streamlit.testing``, switches to a page with query
parameters and checks no exception was rendered; ``shown`` is every text a person would read;
``link_params`` the query of a page link; ``PageCache`` renders each page of an unchanging store
once for the tests that only read it. The store they read is the one ``COMPACTLENS_HOME``
names (see ``conftest.fixture_home``).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.app.fixtures import FixtureHome

MAIN = Path(__file__).resolve().parents[2] / "app" / "main.py"
PLURAL_NOUNS = (
    "sessions|emergencies|compactions|turns|messages|groups|cohorts|trials|events|files|"
    "changes|summaries|items"
)
ONE_PLURAL = re.compile(rf"(?<![\d,.])1 (?:{PLURAL_NOUNS})\b")
FLEET_PAGES = ("overview", "sessions", "emergencies", "retention", "harness", "live", "tuning")
SESSION_PAGES = ("timeline", "emergencies", "offloads", "retention", "diff", "harness")


def open_page(page: str, **params: str) -> AppTest:
    """The page in a fresh session whose first run is that page, as a link opens it: every
    page's ``url_path`` is its file's name (the overview's is "", the default page), so the page
    is found without first running the overview; that the run was that page is checked."""
    at = AppTest.from_file(str(MAIN), default_timeout=60)
    at.query_params.update(params)
    if page != "overview":
        at.switch_page(f"views/{page}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    ran = at._registered_pages[at._finished_page_script_hash].get("script_path")
    assert Path(str(ran)).resolve() == MAIN.parent / "views" / f"{page}.py", (page, ran)
    return at


def shown(at: AppTest) -> str:
    """Every text, markdown, caption, alert and link label on the page, one per line."""
    parts = [str(t.value) for t in at.text] + [str(m.value) for m in at.markdown]
    parts += [str(c.value) for c in at.caption] + [str(t.value) for t in at.title]
    parts += [str(s.value) for s in at.subheader]
    parts += [str(a.value) for a in (*at.info, *at.warning, *at.success, *at.error)]
    parts += [str(link.proto.label) for link in at.get("page_link")]
    return "\n".join(parts)


def link_params(at: AppTest, contains: str) -> dict[str, str]:
    """The query parameters of the first page link whose label contains ``contains``."""
    for link in at.get("page_link"):
        label = str(link.proto.label)
        if contains in label.replace("\\", ""):
            query = str(link.proto.query_string)
            return dict(urllib.parse.parse_qsl(query))
    raise AssertionError(f"no link with {contains!r} in:\n{shown(at)}")


def session_with(home: FixtureHome, prefix: str) -> str:
    return next(s for s in home.sessions if s.startswith(prefix))


class PageCache:
    """Each page of one unchanging store rendered once (``open_page``) and handed to every test
    that only reads it: a module whose store no test writes after it is built can check one page
    from several tests without running it again. A test that interacts with a page (a widget
    ``.run()``) takes a fresh one from ``open_page`` instead."""

    def __init__(self) -> None:
        self._pages: dict[tuple[str, tuple[tuple[str, str], ...]], AppTest] = {}

    def __call__(self, page: str, **params: str) -> AppTest:
        key = (page, tuple(sorted(params.items())))
        if key not in self._pages:
            self._pages[key] = open_page(page, **params)
        return self._pages[key]


def plural_slips(
    sessions: Iterable[str], opened_by: Callable[..., AppTest] = open_page
) -> list[str]:
    """Every "1 <plural noun>" ("1 emergencies", "(1 sessions)") on the fleet pages and on
    each session page of ``sessions``, as page, parameters and the words; the pages opened by
    ``opened_by`` (``open_page``, or a ``PageCache``'s pages)."""
    opened: list[tuple[str, dict[str, str]]] = [(page, {}) for page in FLEET_PAGES]
    opened += [(page, {"session": sid}) for sid in sessions for page in SESSION_PAGES]
    said: list[str] = []
    for page, params in opened:
        text = shown(opened_by(page, **params)).replace("\\", "")
        said += [f"{page} {params}: {m[0]}" for m in ONE_PLURAL.finditer(text)]
    return said
