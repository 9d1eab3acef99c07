"""Tests for CompactionRecord's JSONL form and JsonlRecordStore.

Covers the round trip, lines written by the Go original (integer tier, integer nanosecond
duration, nanosecond timestamps with an offset, ``null`` slices, no ``error`` key), reporting of
unreadable lines with file and line while keeping every valid one, very long lines, hostile
session ids, deletion and file permissions.
"""

from __future__ import annotations

import json
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from compactor import (
    Anchor,
    AnchorType,
    CompactionRecord,
    CompactionTier,
    JsonlRecordStore,
    OffloadEntry,
    RecordStore,
)
from compactor.records import read_record_file

GO_DURATION_NS = 1_500_000_000


@pytest.fixture
def store(tmp_path: Path) -> JsonlRecordStore:
    return JsonlRecordStore(tmp_path / "state" / "compaction_records")


def make_record(session_id: str = "s1", n: int = 0, **fields: Any) -> CompactionRecord:
    data: dict[str, Any] = {
        "session_id": session_id,
        "tier": CompactionTier.FULL,
        "tokens_before": 10_000 + n,
        "tokens_after": 2_000 + n,
        "msgs_before": 40,
        "msgs_after": 8,
        "anchors": [Anchor(type=AnchorType.USER_INTENT, content=f"task {n}")],
        "offloaded": [
            OffloadEntry(
                tool_call_id=f"call_{n}",
                tool_name="bash",
                file_path=f".compactlens/tool_results/{session_id}/call_{n}.txt",
                bytes=5000,
                lines=120,
            )
        ],
        "summarized": 30,
        "preserved_tail": 6,
        "summary_text": f"summary number {n}",
        "compression_ratio": (2_000 + n) / (10_000 + n),
        "duration": 2_000_000 + n,
    }
    data.update(fields)
    return CompactionRecord.model_validate(data)


def go_line(session_id: str = "s1", **overrides: Any) -> str:
    """A record as harness9's Go code marshals it (encoding/json of memory.CompactionRecord)."""
    data: dict[str, Any] = {
        "id": "0b9f7c2e-8a41-4d3c-9b3e-5f0d2c1a7e66",
        "session_id": session_id,
        "timestamp": "2025-03-04T10:11:12.123456789+08:00",
        "tier": 3,
        "tokens_before": 45200,
        "tokens_after": 8100,
        "msgs_before": 52,
        "msgs_after": 8,
        "anchors": [{"type": "user_intent", "content": "Fix the failing cache test"}],
        "offloaded": None,
        "summarized": 28,
        "preserved_tail": 6,
        "summary_text": "Read src/cache.py; the test still fails.",
        "compression_ratio": 8100 / 45200,
        "duration": GO_DURATION_NS,
    }
    data.update(overrides)
    return json.dumps(data, separators=(",", ":"))


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


# ---------------------------------------------------------------- round trip


def test_store_satisfies_the_record_store_protocol(store: JsonlRecordStore) -> None:
    assert isinstance(store, RecordStore)


def test_appended_records_are_listed_back_equal_and_in_order(store: JsonlRecordStore) -> None:
    records = [make_record(n=n) for n in range(3)]

    for rec in records:
        store.append(rec)

    assert store.list("s1") == records
    assert store.last_errors == []


def test_sessions_have_separate_files(store: JsonlRecordStore) -> None:
    store.append(make_record("alpha"))
    store.append(make_record("beta", n=1))

    assert [r.session_id for r in store.list("alpha")] == ["alpha"]
    assert [r.session_id for r in store.list("beta")] == ["beta"]
    assert store.path_for("alpha") != store.path_for("beta")


def test_listing_a_session_without_a_file_is_empty(store: JsonlRecordStore) -> None:
    assert store.list("never-written") == []
    assert store.read("never-written").errors == []


def test_written_lines_use_integer_tier_and_integer_nanosecond_duration(
    store: JsonlRecordStore,
) -> None:
    rec = make_record(duration=GO_DURATION_NS)

    store.append(rec)

    lines = store.path_for("s1").read_text(encoding="utf-8").splitlines()
    data = json.loads(lines[0])
    assert len(lines) == 1
    assert type(data["tier"]) is int
    assert data["tier"] == int(CompactionTier.FULL)
    assert type(data["duration"]) is int
    assert data["duration"] == GO_DURATION_NS


def test_record_file_is_private_to_the_user(store: JsonlRecordStore) -> None:
    store.append(make_record())

    assert stat.S_IMODE(store.path_for("s1").stat().st_mode) == 0o600


# ---------------------------------------------------------------- Go compatibility


def test_line_written_by_the_go_original_imports_unchanged(store: JsonlRecordStore) -> None:
    write_lines(store.path_for("s1"), [go_line()])

    [rec] = store.list("s1")

    assert store.last_errors == []
    assert rec.tier == CompactionTier.FULL
    assert rec.duration == GO_DURATION_NS
    assert rec.duration_ms == GO_DURATION_NS / 1e6 == 1500.0
    assert rec.offloaded == []
    assert rec.error == ""
    assert rec.anchors == [
        Anchor(type=AnchorType.USER_INTENT, content="Fix the failing cache test")
    ]
    assert rec.tokens_before == 45200
    assert rec.tokens_after == 8100
    assert rec.summarized == 28
    assert rec.preserved_tail == 6
    assert rec.compression_ratio == pytest.approx(8100 / 45200)


def test_go_nanosecond_timestamp_keeps_its_offset_and_microseconds(
    store: JsonlRecordStore,
) -> None:
    write_lines(store.path_for("s1"), [go_line()])

    [rec] = store.list("s1")

    assert rec.timestamp.utcoffset() == timedelta(hours=8)
    assert (rec.timestamp.hour, rec.timestamp.minute, rec.timestamp.second) == (10, 11, 12)
    assert rec.timestamp.microsecond == 123456


def test_go_line_with_capitalised_anchor_keys_and_null_slices_imports(
    store: JsonlRecordStore,
) -> None:
    line = go_line(
        anchors=[{"Type": "next_step", "Content": "- run the tests"}],
        offloaded=[
            {
                "tool_call_id": "call_1",
                "tool_name": "",
                "file_path": "tool_results/s1/call_1.txt",
                "bytes": 9000,
                "lines": 300,
            }
        ],
        summary_text=None,
    )
    write_lines(store.path_for("s1"), [line])

    [rec] = store.list("s1")

    assert rec.anchors == [Anchor(type=AnchorType.NEXT_STEP, content="- run the tests")]
    assert [e.bytes for e in rec.offloaded] == [9000]
    assert rec.summary_text == ""


def test_go_records_and_ours_share_a_file(store: JsonlRecordStore) -> None:
    write_lines(store.path_for("s1"), [go_line()])
    ours = make_record()

    store.append(ours)

    records = store.list("s1")
    assert [r.tier for r in records] == [CompactionTier.FULL, CompactionTier.FULL]
    assert records[1] == ours


# ---------------------------------------------------------------- unreadable lines


def test_unreadable_lines_are_reported_with_path_and_line_and_valid_ones_kept(
    store: JsonlRecordStore,
) -> None:
    path = store.path_for("s1")
    good = [make_record(n=n) for n in range(3)]
    write_lines(
        path,
        [
            good[0].to_json_line(),
            "this is not json at all",
            go_line(tier="three"),  # wrong-typed field
            good[1].to_json_line(),
            go_line()[:60],  # truncated JSON
            "",  # blank lines are not errors
            good[2].to_json_line(),
            "[1, 2, 3]",  # valid JSON, not a record
        ],
    )

    result = store.read("s1")

    assert result.records == good
    assert [(e.path, e.line) for e in result.errors] == [
        (str(path), 2),
        (str(path), 3),
        (str(path), 5),
        (str(path), 8),
    ]
    assert "tier" in result.errors[1].reason
    assert all(str(e).startswith(f"{path}:{e.line}: ") for e in result.errors)


def test_list_keeps_the_errors_of_the_last_read_in_last_errors(store: JsonlRecordStore) -> None:
    path = store.path_for("s1")
    write_lines(path, [go_line(), "{broken", go_line(duration="1.5s")])

    records = store.list("s1")

    assert len(records) == 1
    assert [(e.path, e.line) for e in store.last_errors] == [(str(path), 2), (str(path), 3)]
    assert "duration" in store.last_errors[1].reason


def test_read_record_file_reads_any_path(tmp_path: Path) -> None:
    path = tmp_path / "exported.jsonl"
    write_lines(path, [go_line(), "garbage"])

    result = read_record_file(path)

    assert [r.tier for r in result.records] == [CompactionTier.FULL]
    assert [(e.path, e.line) for e in result.errors] == [(str(path), 2)]


def test_a_line_longer_than_two_megabytes_is_read(store: JsonlRecordStore) -> None:
    summary = "摘要 " * (1_000_000)  # 7 UTF-8 bytes per repetition: about 7 MB
    rec = make_record(summary_text=summary)

    store.append(rec)

    raw = store.path_for("s1").read_bytes()
    assert len(raw) > 2 * 1024 * 1024
    [back] = store.list("s1")
    assert back.summary_text == summary
    assert store.last_errors == []


# ---------------------------------------------------------------- hostile ids and deletion


@pytest.mark.parametrize("session_id", ["../../etc/passwd", "", "a/b", "..", "/abs/path"])
def test_hostile_session_ids_stay_inside_the_root(
    store: JsonlRecordStore, tmp_path: Path, session_id: str
) -> None:
    store.append(make_record(session_id))

    path = store.path_for(session_id)
    assert path.resolve().parent == store.root.resolve()
    assert path.exists()
    assert [r.session_id for r in store.list(session_id)] == [session_id]
    created = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert created == {path}
    assert not (tmp_path / "etc").exists()


def test_sanitised_session_ids_do_not_collide(store: JsonlRecordStore) -> None:
    ids = ["a/b", "a_b", "a\\b", "a:b"]

    for n, sid in enumerate(ids):
        store.append(make_record(sid, n=n))

    assert len({store.path_for(sid) for sid in ids}) == len(ids)
    assert all([r.session_id for r in store.list(sid)] == [sid] for sid in ids)


def test_delete_removes_the_session_file(store: JsonlRecordStore) -> None:
    store.append(make_record("gone"))
    store.append(make_record("kept"))

    assert store.delete("gone") is True

    assert not store.path_for("gone").exists()
    assert store.list("gone") == []
    assert len(store.list("kept")) == 1
    assert store.delete("gone") is False
