"""``compactlens import``, ``replay``, ``stats``, ``export`` and ``demo`` on real transcripts.

In-process runs through typer's ``CliRunner``, real DuckDB files in tmp dirs, nothing mocked:
figures are checked against the importers' own output and direct store reads. The store's bad
days (locked, corrupt) and ``ingest`` are in test_cli_store.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from analytics.cli.main import FormatName
from analytics.importers import FORMATS, import_path
from analytics.store import open_store
from analytics.store.sql import TABLES
from compactor import (
    Anchor,
    AnchorType,
    CompactionRecord,
    CompactionTier,
    JsonlRecordStore,
    OffloadEntry,
)
from tests.analytics.cli_helpers import MINI_FILE, SWE_FILE, count, run
from tests.analytics.spool_helpers import snapshot_home, spool_line_count
from tests.compactor.fake_llm_server import FakeLLMServer

STATS_KEYS = {  # SPEC 5.3, then the extra keys
    "ledger",
    "sessions",
    "turns",
    "compactions",
    "emergency",
    "compression",
    "tokens",
    "anchor_retention",
    "silent_drops",
    "artifact_retention",
    "cost",
    "quarantined",
    "messages",
    "events",
    "anchor_items",
    "offloads",
    "median_compression_ratio",
    "unprojected_spool_bytes",
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


# ------------------------------------------------------------------ import


def test_import_of_a_real_transcript_lands_what_the_importer_read(home: Path) -> None:
    sessions, issues = import_path(SWE_FILE)
    assert sessions and not issues
    result = run("import", SWE_FILE, "--home", home)
    assert result.exit_code == 0, result.output
    with open_store(home, read_only=True) as store:
        stored = store.query("SELECT session_id, source, agent, metadata FROM sessions")
        counts = dict(
            store.query("SELECT session_id, count(*) FROM messages GROUP BY 1").iter_rows()
        )
    assert sorted(stored["session_id"]) == sorted(s.session_id for s in sessions)
    assert counts == {s.session_id: len(s.messages) for s in sessions}
    assert set(stored["source"]) == {"import"}
    meta = json.loads(stored["metadata"][0])
    assert meta["format"] == "swe-agent" and meta["source_path"] == str(SWE_FILE)


def test_importing_twice_adds_no_event_and_says_it_skipped(home: Path) -> None:
    assert run("import", SWE_FILE, "--home", home).exit_code == 0
    before = snapshot_home(home)
    again = run("import", SWE_FILE, "--home", home)
    assert again.exit_code == 0 and "skipped" in again.output
    after = snapshot_home(home)
    for name in ("events", "sessions", "messages", "message_blobs"):
        assert after[name].height == before[name].height, name


def test_separate_imports_of_a_file_write_the_same_event_ids(tmp_path: Path, home: Path) -> None:
    other = tmp_path / "other"
    for root in (home, other):
        assert run("import", SWE_FILE, "--home", root).exit_code == 0
    events = count(home, "SELECT count(*) FROM events")
    for path in (other / "spool").glob("*.jsonl"):
        (home / "spool" / path.name).write_bytes(path.read_bytes())
    result = run("ingest", "--home", home)
    assert result.exit_code == 0
    assert count(home, "SELECT count(*) FROM events") == events
    assert spool_line_count(home) == 2 * events  # written twice, stored once


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, int | None]]:
    """name -> (file, the line the message must name, or None)."""
    cut = tmp_path / "cut.traj"
    text = json.dumps({"history": [{"role": "user", "content": "x" * 50}] * 5}, indent=2)
    cut.write_text(text[: len(text) // 2])
    typed = tmp_path / "typed.jsonl"
    rows = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    typed.write_text("".join(json.dumps(r) + "\n" for r in [*rows, {"role": "user", "content": 5}]))
    binary = tmp_path / "image.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{\n  "foo": 1\n}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    return {
        "truncated": (cut, None),
        "wrong-typed": (typed, 3),
        "binary": (binary, None),
        "unknown-format": (unknown, None),
        "empty": (empty, None),
    }


@pytest.mark.parametrize("case", ["truncated", "wrong-typed", "binary", "unknown-format", "empty"])
def test_each_bad_input_is_one_line_naming_it_and_the_valid_file_still_lands(
    tmp_path: Path, home: Path, case: str
) -> None:
    bad, line = _bad_inputs(tmp_path)[case]
    result = run("import", bad, SWE_FILE, "--home", home)
    assert result.exit_code == 1, result.output
    naming = [text for text in result.output.splitlines() if bad.name in text]
    assert len(naming) == 1, result.output
    assert str(bad) in naming[0]
    if case == "truncated":
        assert re.search(rf"{re.escape(str(bad))}:\d+: invalid JSON", naming[0]), naming[0]
    if line is not None:
        assert f"{bad}:{line}:" in naming[0]
    (valid,), _ = import_path(SWE_FILE)
    where = f"WHERE session_id = '{valid.session_id}'"
    assert count(home, f"SELECT count(*) FROM messages {where}") == len(valid.messages)


def test_a_file_with_several_bad_lines_is_still_one_line(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "chat.jsonl"
    rows = ['{"role": "user", "content": "a"}', '{"role": 7}', "{not json", '{"role": "user"']
    path.write_text("\n".join(rows) + "\n")
    result = run("import", path, "--home", home)
    assert result.exit_code == 1
    (naming,) = [text for text in result.output.splitlines() if path.name in text]
    assert f"{path}:2:" in naming and "2 more problems (lines 3, 4)" in naming
    assert count(home, "SELECT count(*) FROM messages") == 1


def test_a_missing_path_is_rejected_and_the_rest_imported(tmp_path: Path, home: Path) -> None:
    result = run("import", tmp_path / "nope.jsonl", SWE_FILE, "--home", home)
    assert result.exit_code == 1 and "nope.jsonl: no such file or directory" in result.output
    assert count(home, "SELECT count(*) FROM sessions") == 1


def test_unknown_format_option_is_a_usage_error(home: Path) -> None:
    result = run("import", SWE_FILE, "--format", "word", "--home", home)
    assert result.exit_code == 2


def test_metadata_capture_stores_no_message_text(home: Path) -> None:
    result = run("import", SWE_FILE, "--capture", "metadata", "--home", home)
    assert result.exit_code == 0
    assert count(home, "SELECT count(*) FROM message_blobs") == 0
    assert count(home, "SELECT count(*) FROM messages") > 0
    assert count(home, "SELECT count(*) FROM events WHERE payload->>'content' IS NOT NULL") == 0
    assert count(home, "SELECT count(*) FROM sessions WHERE capture = 'metadata'") == 1


def _records(tmp_path: Path) -> list[CompactionRecord]:
    anchors = [
        Anchor(type=AnchorType.USER_INTENT, content="- fix the cache bug\n- keep the API"),
        Anchor(type=AnchorType.NEXT_STEP, content="- run the tests"),
    ]
    offload = OffloadEntry(
        tool_call_id="c1", tool_name="bash", file_path="x.txt", bytes=9000, lines=3
    )
    records = [
        CompactionRecord(
            session_id="h9-session",
            tier=tier,
            tokens_before=9000,
            tokens_after=3000,
            compression_ratio=1 / 3,
            anchors=anchors,
            summary_text="the summary",
            offloaded=[offload] if tier == CompactionTier.WARN else [],
        )
        for tier in (CompactionTier.WARN, CompactionTier.SOFT, CompactionTier.FULL)
    ]
    store = JsonlRecordStore(tmp_path / "records")
    for record in records:
        store.append(record)
    return records


def test_harness9_records_become_compactions_once(tmp_path: Path, home: Path) -> None:
    records = _records(tmp_path)
    folder = tmp_path / "records"
    assert run("import", folder, "--home", home).exit_code == 0
    assert run("import", folder, "--format", "harness9-records", "--home", home).exit_code == 0
    with open_store(home, read_only=True) as store:
        ids = store.query("SELECT id FROM compactions ORDER BY seq")["id"].to_list()
        session = store.query("SELECT source, metadata FROM sessions").row(0)
        seqs = store.query("SELECT seq FROM events ORDER BY seq")["seq"].to_list()
        anchors = store.query("SELECT count(*) FROM anchor_items").item()
        offloads = store.query("SELECT count(*) FROM offloads").item()
    assert ids == [r.id for r in records]
    assert session[0] == "import" and json.loads(session[1])["format"] == "harness9-records"
    assert seqs == list(range(len(seqs)))  # session_started, records and offloads, gap-free
    assert anchors == 3 * len(records) and offloads == 1


# ------------------------------------------------------------------ replay


def test_replay_of_a_mini_swe_agent_transcript_records_compactions(home: Path) -> None:
    (imported,), _ = import_path(MINI_FILE)
    result = run("replay", MINI_FILE, "--window", "16000", "--home", home)
    assert result.exit_code == 0, result.output
    sid = f"{imported.session_id}@16000#"  # then the hash of the replay's settings
    assert count(home, f"SELECT count(*) FROM compactions WHERE session_id ^@ '{sid}'") > 0
    assert count(home, f"SELECT count(*) FROM sessions WHERE session_id ^@ '{sid}'") == 1
    assert count(home, "SELECT count(*) FROM sessions WHERE source = 'replay'") == 1
    offloaded = count(home, "SELECT count(*) FROM offloads")
    assert offloaded == 0 or any((home / "offload").rglob("*.txt"))


def test_replays_at_two_windows_coexist_and_a_repeat_is_skipped(home: Path) -> None:
    for window in ("16000", "32000", "16000"):
        assert run("replay", MINI_FILE, "--window", window, "--home", home).exit_code == 0
    assert count(home, "SELECT count(*) FROM sessions") == 2
    assert count(home, "SELECT count(DISTINCT session_id) FROM compactions") >= 1
    dupes = "SELECT count(*) FROM (SELECT id FROM compactions GROUP BY id HAVING count(*) > 1)"
    assert count(home, dupes) == 0


def test_replay_with_an_openai_summarizer_reads_url_and_key_from_the_env(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeLLMServer().start()
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        args = ("--window", "16000", "--summarizer", "openai:test-model", "--home", home)
        result = run("replay", MINI_FILE, *args)
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    assert server.state.requests, "the summariser was never called"
    first = server.state.requests[0]
    assert first.headers["authorization"] == "Bearer test-key"
    assert first.body["model"] == "test-model"
    assert count(home, "SELECT count(*) FROM compactions WHERE tier IN (2, 3)") > 0


def test_format_choices_are_the_importers_formats() -> None:
    assert [f.value for f in FormatName] == ["auto", *FORMATS]


def test_replay_takes_a_toml_config(tmp_path: Path, home: Path) -> None:
    config = tmp_path / "compactor.toml"
    config.write_text("warn = 0.55\nsoft = 0.65\nmin_tail_messages = 4\n")
    result = run("replay", MINI_FILE, "--window", "16000", "--config", config, "--home", home)
    assert result.exit_code == 0, result.output
    assert count(home, "SELECT count(*) FROM sessions WHERE config->>'warn' = '0.55'") == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--summarizer", "word"],
        ["--summarizer", "openai:"],
        ["--config", "missing.json"],
        [],  # no --window
    ],
)
def test_replay_usage_errors_exit_2(tmp_path: Path, home: Path, args: list[str]) -> None:
    window = [] if not args else ["--window", "16000"]
    result = run("replay", MINI_FILE, *window, *args, "--home", home)
    assert result.exit_code == 2, result.output
    assert not home.exists()


def test_replay_rejects_a_bad_config_value_naming_the_field(tmp_path: Path, home: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text('{"warn": 0.9}')
    result = run("replay", MINI_FILE, "--window", "16000", "--config", config)
    assert result.exit_code == 2 and "warn" in result.output


# ------------------------------------------------------------------ stats and export


def test_stats_json_is_one_object_equal_to_store_queries(home: Path) -> None:
    assert run("import", SWE_FILE, "--home", home).exit_code == 0
    assert run("replay", MINI_FILE, "--window", "16000", "--home", home).exit_code == 0
    result = run("stats", "--json", "--home", home)
    assert result.exit_code == 0
    figures = json.loads(result.stdout)
    assert set(figures) == STATS_KEYS
    assert set(figures["compactions"]) == {"total", "noops", "by_tier"}
    assert set(figures["compactions"]["by_tier"]) == {"WARN", "SOFT", "FULL", "EMERGENCY"}
    with open_store(home, read_only=True) as store:

        def one(sql: str) -> object:
            return store.query(sql).item()

        for key, table in [
            ("sessions", "sessions"),
            ("messages", "messages"),
            ("events", "events"),
            ("anchor_items", "anchor_items"),
            ("offloads", "offloads"),
            ("quarantined", "quarantine"),
            ("turns", "turns"),
        ]:
            assert figures[key] == one(f"SELECT count(*) FROM {table}"), key
        effective = "FROM compactions WHERE effective AND tier > 0"
        for tier in (CompactionTier.WARN, CompactionTier.SOFT, CompactionTier.FULL):
            n = one(f"SELECT count(*) {effective} AND tier = {int(tier)}")
            assert figures["compactions"]["by_tier"][tier.name] == n
        median = one(f"SELECT median(compression_ratio) {effective}")
        assert figures["median_compression_ratio"] == pytest.approx(median)
    assert figures["sessions"] == 2 and figures["compactions"]["total"] > 0
    assert figures["unprojected_spool_bytes"] == 0


def test_stats_without_a_database_says_to_ingest(home: Path) -> None:
    result = run("stats", "--home", home)
    assert result.exit_code == 1 and "compactlens ingest" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_stats_table_prints_the_headline_figures(home: Path) -> None:
    assert run("import", SWE_FILE, "--home", home).exit_code == 0
    result = run("stats", "--home", home)
    assert result.exit_code == 0 and "median compression ratio" in result.output
    assert "emergency truncations" in result.output and "share saved" in result.output


def test_export_parquet_writes_one_readable_file_per_table(tmp_path: Path, home: Path) -> None:
    assert run("replay", MINI_FILE, "--window", "16000", "--home", home).exit_code == 0
    out = tmp_path / "parquet"
    result = run("export", "parquet", out, "--home", home)
    assert result.exit_code == 0, result.output
    assert sorted(p.stem for p in out.glob("*.parquet")) == sorted(TABLES)
    with open_store(home, read_only=True) as store:
        counts = store.counts()
    for name in TABLES:
        assert pl.read_parquet(out / f"{name}.parquet").height == counts[name], name


# ------------------------------------------------------------------ demo


def test_demo_still_runs_offline(home: Path) -> None:
    result = run("demo", "--home", home, "--no-serve", "--sessions", "1")
    assert result.exit_code == 0, result.output
    assert any((home / "spool").glob("*.jsonl"))


def test_the_demo_has_the_silent_drop_it_promises(home: Path) -> None:
    """The README promises follow-up requests that a summary forgets without a word: each
    silent drop ``retention`` lists is, in the compaction records the demo wrote, in the
    anchors of the compaction that introduced it and in none from the one that dropped it."""
    assert run("demo", "--home", home, "--no-serve", "--sessions", "1").exit_code == 0
    records = [
        json.loads(line)
        for path in sorted((home / "records").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    order = {r["id"]: i for i, r in enumerate(records)}

    def intents(record: dict[str, Any]) -> list[str]:
        return [
            line.removeprefix("- ")
            for anchor in record["anchors"]
            if anchor["type"] == "user_intent"
            for line in anchor["content"].splitlines()
        ]

    result = run("retention", "--json", "--home", home)
    assert result.exit_code == 0, result.output
    drops = json.loads(result.stdout)["silent_drops"]
    assert drops, "the demo promises a silent drop and shows none"
    for drop in drops:
        born, gone = order[drop["introduced_at"]], order[drop["dropped_at"]]
        assert drop["item"] in intents(records[born]), drop
        assert all(drop["item"] not in intents(r) for r in records[gone:]), drop
