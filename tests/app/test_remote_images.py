"""Text from transcripts never loads a remote image in the app.

Streamlit renders markdown in ``st.markdown``, captions, alerts, headings, link and expander
labels, and in every cell of ``st.table``: a ``![](http://…)`` in a model name, a tool name or
an anchor item, shown there as it came, made the visitor's browser fetch that address (three
fetches in the adversarial run). Ten small Claude Code sessions carry such text in their model,
their request (and so their harness's summary and anchors) and their tool's name; they are
imported, replayed at a window small enough for emergencies and tuned (a per-model profile's
note names the model), all through the command line into a real store. Each page is then opened
with ``AppTest`` and every text it renders as markdown is parsed with markdown-it (CommonMark):
no image may be in any of them, and the hostile text must still be shown, escaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import streamlit as st
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from analytics.store import open_store
from tests.analytics.cli.test_cli_hostile_text import write_claude_code
from tests.analytics.cli_helpers import run
from tests.app.pages import open_page

pytestmark = pytest.mark.integration

IMAGE = "![seen](http://127.0.0.1:9/pixel.png)"
MODEL = f"model{IMAGE}"
TOOL = f"Bash{IMAGE}"
GRID = "warn = [0.3, 0.6]\nsoft = [0.65]\nfull = [0.7, 0.9]\nmin_tail_messages = [2, 8]\n"
_MARKDOWN = MarkdownIt("commonmark")


@pytest.fixture(scope="module")
def params(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, str]]]:
    """The store built from the hostile sessions, and each page's query parameters."""
    root = tmp_path_factory.mktemp("remote-images")
    folder = root / "transcripts"
    folder.mkdir()
    for k in range(10):  # a per-model profile needs 5 tuning sessions and held-back ones
        path = folder / f"s{k}.jsonl"
        write_claude_code(path, f"s{k}", MODEL, 5 + k, words=IMAGE, tool=TOOL, bad_line=False)
    (root / "grid.toml").write_text(GRID, encoding="utf-8")
    home = root / "home"
    for args in (
        ("import", folder),
        ("replay", folder, "--window", "3000"),
        ("tune", folder, "--window", "3000", "--grid", root / "grid.toml", "--workers", "0"),
    ):
        done = run(*args, "--home", home)
        assert done.exit_code == 0, done.output
    with open_store(home, read_only=True) as store:  # before the app owns it
        native, cid = store.query(
            "SELECT session_id, id FROM compactions WHERE origin = 'native' "
            "ORDER BY session_id, seq LIMIT 1"
        ).row(0)
        emergency = store.query(
            "SELECT session_id FROM compactions WHERE tier = 4 ORDER BY session_id LIMIT 1"
        ).item()
    replayed = {"session": str(emergency)}
    pages = {"diff": {"session": str(native), "compaction": str(cid)}}
    pages |= {"harness": {"session": str(native)}}
    pages |= dict.fromkeys(("emergencies", "timeline", "offloads", "retention"), replayed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COMPACTLENS_HOME", str(home))
        yield pages
        st.cache_resource.clear()  # closes this store and stops its projector thread
        st.cache_data.clear()


def _markdown_texts(at: AppTest) -> list[str]:
    """Every text the page renders as markdown, table cells and column names included."""
    texts = [str(e.value) for e in (*at.markdown, *at.caption, *at.title, *at.subheader)]
    texts += [str(e.value) for e in (*at.header, *at.info, *at.warning, *at.success, *at.error)]
    texts += [str(e.label) for e in (*at.expander, *at.metric)]
    texts += [str(link.proto.label) for link in at.get("page_link")]
    for table in at.table:
        frame = table.value
        texts += [str(c) for c in frame.columns]
        texts += [str(v) for c in frame.columns for v in frame[c]]
    return texts


def _images(text: str) -> list[str]:
    return [
        str(child.attrs.get("src"))
        for token in _MARKDOWN.parse(text)
        for child in token.children or []
        if child.type == "image"
    ]


def _shown(texts: list[str]) -> str:
    """The texts as a reader sees them: markdown's backslash escapes undone."""
    return "\n".join(re.sub(r"\\(.)", r"\1", t) for t in texts)


@pytest.mark.parametrize(
    ("page", "hostile"),
    [
        ("diff", IMAGE),  # the anchor items of the harness's summary, in a table
        ("emergencies", TOOL),  # the largest messages before the emergency, by tool
        ("tuning", f"profile for model {MODEL}"),  # the per-model profile's note
        ("overview", None),
        ("sessions", None),
        ("timeline", None),
        ("retention", None),
        ("harness", None),
        ("offloads", None),
    ],
)
def test_no_page_renders_an_image_from_transcript_text(
    params: dict[str, dict[str, str]], page: str, hostile: str | None
) -> None:
    texts = _markdown_texts(open_page(page, **params.get(page, {})))
    shown = _shown(texts)

    found = {t[:120]: _images(t) for t in texts if _images(t)}
    assert not found, f"{page} renders images from data: {found}"
    if hostile is not None:
        assert hostile in shown, shown  # still shown, as written
