"""A replay's identity includes its settings: ``<imported id>@<window>#<config hash>``.

Before: a replay with another ``--config`` or summariser at the same window was skipped as
"already in the store". Now it is stored beside the first; the same settings again are skipped
unless ``--force``, which replaces; ``--capture metadata`` records no message text. Real CLI
runs on a real transcript, real DuckDB files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from analytics.cli.commands import run_replay
from analytics.importers import import_path
from analytics.replay.driver import replay_config_hash
from analytics.store import open_store
from compactor import (
    CompactionOffloader,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    PreviousCompaction,
    ProgressiveCompactor,
    SummaryResult,
)
from tests.analytics.cli_helpers import SWE_FILE, run, spool_bytes

WINDOW = "2000"


class _OtherSummarizer:
    """Another summariser (offline): the extractive one under another name."""

    model_name = "other"

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        return ExtractiveSummarizer().summarize(transcript, previous)


def _replays(home: Path) -> list[tuple[str, bool, float, int]]:
    """(session id, live, warn threshold, compactions) of every top-level replay session."""
    sql = """
        SELECT s.session_id, s.deleted_at IS NULL, CAST(s.config->>'warn' AS DOUBLE),
               (SELECT count(*) FROM compactions c WHERE c.session_id = s.session_id)
        FROM sessions s WHERE s.source = 'replay' ORDER BY s.started_at"""
    with open_store(home, read_only=True) as store:
        return [(str(a), bool(b), float(c), int(d)) for a, b, c, d in store.query(sql).iter_rows()]


def test_replays_under_another_config_or_summarizer_are_stored_beside_the_first(
    tmp_path: Path,
) -> None:
    home, config = tmp_path / "home", tmp_path / "tight.json"
    config.write_text(json.dumps({"warn": 0.55, "soft": 0.65}), encoding="utf-8")
    assert run("replay", SWE_FILE, "--window", WINDOW, "--home", home).exit_code == 0
    tight = run("replay", SWE_FILE, "--window", WINDOW, "--config", config, "--home", home)
    assert tight.exit_code == 0, tight.output
    compactor = ProgressiveCompactor(
        _OtherSummarizer(), int(WINDOW), offloader=CompactionOffloader(tmp_path, "replay")
    )
    other = run_replay([SWE_FILE], home, compactor)
    assert other.sessions == 1 and other.skipped == 0

    replays = _replays(home)
    (imported,), _ = import_path(SWE_FILE)
    assert len(replays) == 3 and all(live for _sid, live, _w, _n in replays)
    assert len({sid for sid, *_ in replays}) == 3
    assert all(
        re.fullmatch(rf"{re.escape(imported.session_id)}@{WINDOW}#[0-9a-f]{{8}}", sid)
        for sid, *_ in replays
    )
    assert [w for _sid, _live, w, _n in replays] == [0.6, 0.55, 0.6]

    again = run("replay", SWE_FILE, "--window", WINDOW, "--config", config, "--home", home)
    assert again.exit_code == 0 and len(_replays(home)) == 3  # same settings: skipped


def test_force_replaces_a_stored_replay_with_the_same_settings(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run("replay", SWE_FILE, "--window", WINDOW, "--home", home).exit_code == 0
    ((first, _live, _w, compactions),) = _replays(home)
    assert compactions > 0, "the window must make the replay compact"
    forced = run("replay", SWE_FILE, "--window", WINDOW, "--force", "--home", home)
    assert forced.exit_code == 0, forced.output
    old, new = _replays(home)
    assert old == (first, False, 0.6, compactions)  # superseded, its rows kept
    assert new[0].startswith(f"{first}~") and new[1:] == (True, 0.6, compactions)


def _plain_snippet(text: str) -> str:
    """30 characters of the text that JSON writes unescaped."""
    match = re.search(r"[A-Za-z0-9 ,.]{30}", text)
    assert match, "the transcript has plain text"
    return match.group(0)


def test_replay_with_capture_metadata_records_no_message_text(tmp_path: Path) -> None:
    (imported,), _ = import_path(SWE_FILE)
    task = next(m.content for m in imported.messages if m.role == "user")
    snippet = _plain_snippet(task).encode()
    full, meta = tmp_path / "full", tmp_path / "meta"
    assert run("replay", SWE_FILE, "--window", WINDOW, "--home", full).exit_code == 0
    assert any(snippet in data for data in spool_bytes(full).values())  # the check can fail
    result = run("replay", SWE_FILE, "--window", WINDOW, "--capture", "metadata", "--home", meta)
    assert result.exit_code == 0, result.output
    assert not any(snippet in data for data in spool_bytes(meta).values())
    with open_store(meta, read_only=True) as store:
        assert store.query("SELECT DISTINCT capture FROM sessions").to_series().to_list() == [
            "metadata"
        ]


def test_a_config_that_leaves_the_newest_fields_alone_keeps_the_last_releases_replay_family() -> (
    None
):
    """Upgrading must not replay a transcript a second time beside the first: the default
    config keys as release 3b7a7e4 keyed it (``6aa0b55a``), and setting a new field moves it."""
    default = ProgressiveCompactor(ExtractiveSummarizer(), 8000)
    assert replay_config_hash(default) == "6aa0b55a"
    for field, value in (("cache_priced_offload", True), ("cache_read_price", 0.26)):
        other = ProgressiveCompactor(
            ExtractiveSummarizer(), 8000, config=CompactorConfig.model_validate({field: value})
        )
        assert replay_config_hash(other) != "6aa0b55a", field
