"""The Live sessions page (``/live``, issue 30 item 3) through ``streamlit.testing``.

Two real Claude Code sessions that compacted themselves are imported as ``compactlens watch``
imports them, one of them first half-written; every figure the page shows is computed here from
the raw JSONL lines: the context of the latest call (its prompt, cache reads and writes
included), the distance to where the last automatic compaction fired (``preTokens``), each
compaction's ``preTokens``. The page is opened again after the rest of the file is imported, as
the app reruns it when the watcher stored more, and shows the grown session. A store without
transcript imports says how to watch one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st

from analytics.cli.commands import run_import
from analytics.importers.identity import Tail
from tests.app.fixtures import FixtureHome
from tests.app.native import FILES, NATIVE
from tests.app.pages import open_page, shown

HALF = 0.5
DEADLINE_S = 120.0
"""How long the owner may take to project the watcher's import on a loaded machine."""


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _expected(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the page must say of a session, from its raw lines."""
    boundaries = [r["compactMetadata"] for r in rows if r.get("subtype") == "compact_boundary"]
    calls = [
        (i, r["message"]["usage"])
        for i, r in enumerate(rows)
        if r.get("type") == "assistant" and isinstance(r.get("message", {}).get("usage"), dict)
    ]
    at, usage = calls[-1]
    prompt = sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    last_boundary = max(i for i, r in enumerate(rows) if r.get("subtype") == "compact_boundary")
    assert at > last_boundary, "the call after the last compaction is what the page reports"
    auto = [b["preTokens"] for b in boundaries if b["trigger"] == "auto"]
    left = auto[-1] - prompt if auto else None
    return {
        "session": next(r["sessionId"] for r in rows if r.get("sessionId")),
        "context": f"{prompt:,} (the provider's last prompt)",
        "next": "–" if left is None else f"{left:,} tokens away" if left > 0 else "due",
        "before": [b["preTokens"] for b in boundaries],
    }


@pytest.fixture
def live_home(
    tmp_path: Path, fixture_home: FixtureHome, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, Path, list[str]]]:
    """A home with both sessions imported as a watcher would, the second only half; the
    followed folder; the second file's lines."""
    folder, home = tmp_path / "projects", tmp_path / "home"
    folder.mkdir()
    for n, name in enumerate(FILES):
        text = (NATIVE / name).read_text(encoding="utf-8")
        lines = [x for x in text.split("\n") if x]
        (folder / f"s{n}.jsonl").write_text(
            "".join(x + "\n" for x in (lines if n == 0 else lines[: int(len(lines) * HALF)])),
            encoding="utf-8",
        )
    tails: dict[str, Tail] = {}
    run_import([folder], home, tails=tails)
    monkeypatch.setenv("COMPACTLENS_HOME", str(home))
    yield folder, home, lines
    st.cache_resource.clear()
    st.cache_data.clear()


def _table(at: Any) -> list[dict[str, Any]]:
    assert not at.error, [e.value for e in at.error]
    [table] = [d.value for d in at.dataframe if "next automatic compaction" in d.value.columns]
    return list(table.to_dict("records"))


def _until_shown(session: str, context: str) -> dict[str, Any]:
    """The page's row of ``session`` once it shows ``context``: the app's owner projects the
    spool on its own timer, and a page is drawn again when the store's version moved."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        row = {r["session"]: r for r in _table(open_page("live"))}[session]
        if row["context now (tokens)"] == context or time.monotonic() > deadline:
            return row
        time.sleep(0.2)


def test_each_live_session_shows_its_context_distance_and_compactions_from_its_lines(
    live_home: tuple[Path, Path, list[str]],
) -> None:
    folder, home, lines = live_home
    first = _expected(_lines(NATIVE / FILES[0]))

    at = open_page("live")

    rows = {r["session"]: r for r in _table(at)}
    assert len(rows) == 2
    row = rows[first["session"]]
    assert (row["context now (tokens)"], row["next automatic compaction"]) == (
        first["context"],
        first["next"],
    )
    assert row["compactions"] == len(first["before"])
    befores = [
        d.value["tokens before"].to_list() for d in at.dataframe if "tokens before" in d.value
    ]
    assert first["before"] in befores

    (folder / "s1.jsonl").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    run_import([folder], home)  # the watcher's next pass: to the spool the app's owner projects
    second = _expected(_lines(NATIVE / FILES[1]))
    grown = _until_shown(second["session"], second["context"])
    assert (grown["context now (tokens)"], grown["next automatic compaction"]) == (
        second["context"],
        second["next"],
    )
    assert grown["compactions"] == len(second["before"])


def test_a_session_whose_transcript_is_gone_says_so(
    live_home: tuple[Path, Path, list[str]],
) -> None:
    folder, _, _ = live_home
    gone = _expected(_lines(NATIVE / FILES[0]))["session"]
    (folder / "s0.jsonl").unlink()

    rows = {r["session"]: r for r in _table(open_page("live"))}

    assert rows[gone]["context now (tokens)"] == "its transcript is gone or has no usage yet"


def test_a_store_without_transcripts_says_how_to_watch_one(fixture_home: FixtureHome) -> None:
    at = open_page("live")

    assert "compactlens watch --home HOME" in shown(at)
    assert not [d for d in at.dataframe if "next automatic compaction" in d.value.columns]
