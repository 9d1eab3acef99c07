"""The Harness compactions page (``/harness?session=ID``) through ``streamlit.testing``.

On a store of two real Claude Code sessions that compacted themselves (``native``), each page
figure is compared with ``audit --json`` of that store and the number of compactions and their
tokens with the files' own ``compact_boundary`` lines; on the package's replay store (no native
compaction) the page says how to import one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import streamlit as st

from analytics.store import open_store
from tests.app.fixtures import FixtureHome
from tests.app.native import FILES, NATIVE, NativeHome, build_native_home
from tests.app.pages import link_params, open_page, shown


@pytest.fixture(scope="module")
def native_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NativeHome]:
    yield build_native_home(tmp_path_factory.mktemp("native-home"))
    # close the owners this module opened (both homes'), as test_findings_pages does: a later
    # module's release_all would otherwise leave a closed owner in the page cache
    st.cache_resource.clear()
    st.cache_data.clear()


@pytest.fixture
def on_native(
    fixture_home: FixtureHome, native_home: NativeHome, monkeypatch: pytest.MonkeyPatch
) -> NativeHome:
    monkeypatch.setenv("COMPACTLENS_HOME", str(native_home.home))
    return native_home


@pytest.mark.parametrize("file", FILES)
def test_each_native_compaction_says_what_it_lost_and_what_was_re_read_after(
    on_native: NativeHome, file: str
) -> None:
    sid = on_native.session_of(file)
    entries = on_native.entries(sid)
    assert len(entries) == len(on_native.boundaries[file])  # one per compact_boundary line

    at = open_page("harness", session=sid)

    headings = [s.value for s in at.subheader if s.value.startswith("#")]
    assert len(headings) == len(on_native.boundaries[file])
    for heading, boundary in zip(headings, on_native.boundaries[file], strict=True):
        assert f"· {boundary['trigger']} · {boundary['preTokens']:,} →" in heading
    metrics = [(m.label, m.value) for m in at.metric]
    for number, entry in enumerate(entries, start=1):
        said = metrics[(number - 1) * 4 : number * 4]
        assert said == [
            ("artifacts lost", f"{len(entry['artifacts']['lost']):,}"),
            ("user messages lost", f"{entry['user_messages']['lost']:,}"),
            ("files re-read after", f"{len(entry['re_reads']):,}"),
            ("commands re-run after", f"{len(entry['re_runs']):,}"),
        ]
        params = link_params(at, f"#{number}: open its diff")
        assert params == {"session": sid, "compaction": entry["compaction_id"]}
    for title, key in (("lost artifact", "lost"), ("file re-read after", "re_reads")):
        tables = [d.value[title].to_list() for d in at.dataframe if title in d.value.columns]
        expected = [_values(e, key) for e in entries if _values(e, key)]
        assert tables == expected, title


def _values(entry: dict[str, Any], key: str) -> list[str]:
    return list(entry["artifacts"]["lost"] if key == "lost" else entry[key])


def test_the_re_read_rate_per_origin_is_that_of_audit_json(on_native: NativeHome) -> None:
    sid = on_native.session_of(FILES[1])
    session_audit = [c for c in on_native.audit["compactions"] if c["session_id"] == sid]
    assert session_audit

    at = open_page("harness", session=sid)

    (table,) = [t.value for t in at.table if "re-read rate" in t.value.columns]
    rows = table.to_dict("records")
    assert [r["origin"] for r in rows] == ["native"]
    # this session's own rate: re-reads per file read before, summed over its compactions
    re_reads = sum(len(c["re_reads"]) for c in session_audit)
    assert rows[0]["re-read after"] == re_reads
    assert rows[0]["compactions"] == len(session_audit)
    rate = rows[0]["re-read after"] / rows[0]["files read before"]
    assert rows[0]["re-read rate"] == f"{rate:.0%}"


def test_a_native_compaction_links_to_a_diff_that_opens(on_native: NativeHome) -> None:
    sid = on_native.session_of(FILES[0])
    params = link_params(open_page("harness", session=sid), "#1: open its diff")

    at = open_page("diff", **params)

    text = shown(at)
    assert "Before:" in text and "After:" in text


def test_without_a_session_the_page_offers_the_sessions_harnesses_compacted(
    on_native: NativeHome,
) -> None:
    at = open_page("harness")

    expected = {on_native.session_of(f): len(on_native.boundaries[f]) for f in FILES}
    options = at.selectbox(key="session").options  # as labelled: id, harness, compactions
    assert sorted(options) == sorted(
        f"{sid} · claude-code · {n} compaction{'s' * (n != 1)}" for sid, n in expected.items()
    )


def test_a_store_without_native_compactions_says_how_to_import_them(
    fixture_home: FixtureHome,
) -> None:
    at = open_page("harness")

    said = " ".join(i.value for i in at.info)
    for words in ("Claude Code", "Codex", "OpenHands", "compactlens import"):
        assert words in said
    assert not at.selectbox


@pytest.mark.parametrize("file", FILES)
def test_a_session_that_starts_mid_way_says_so_with_the_missing_history(
    on_native: NativeHome, file: str
) -> None:
    """Both files begin with a line whose parent they do not hold (read here from the raw
    JSONL); the timeline says how much history is missing, the figure the store holds."""
    lines = [json.loads(x) for x in (NATIVE / file).read_text(encoding="utf-8").splitlines()]
    uuids = {obj.get("uuid") for obj in lines}
    assert lines[0].get("parentUuid") not in (None, *uuids)
    sid = on_native.session_of(file)
    st.cache_resource.clear()  # the owner an earlier page opened, so this test can read
    with open_store(on_native.home, read_only=True) as store:
        missing = store.query(
            "SELECT history_missing_tokens FROM sessions WHERE session_id = ?", [sid]
        ).item()
    assert missing and missing > 10_000

    at = open_page("timeline", session=sid)

    warnings = [w.value for w in at.warning]
    assert any(f"about {missing:,} tokens of earlier history" in w for w in warnings), warnings


def test_imported_sessions_have_no_window_on_the_overview_and_the_sessions_page(
    on_native: NativeHome,
) -> None:
    at = open_page("overview", by="window")

    (table,) = [t.value for t in at.table if "cohort" in t.value.columns]
    assert [c.replace("\\", "") for c in table["cohort"]] == ["no window (imported as it ran)"]
    assert "window 0" not in at.selectbox(key="cohort").options

    at = open_page("sessions")
    at.selectbox(key="by").select("window").run()
    (grid,) = [d.value for d in at.dataframe if "window" in d.value.columns]
    assert set(grid["window"]) == {"no window (imported as it ran)"}
