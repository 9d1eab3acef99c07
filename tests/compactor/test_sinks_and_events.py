"""Tests for the event envelope, parsing and upcasting, and the EventSink backends.

One contract class runs against every sink (MemorySink and SpoolSink); SpoolSink's own
behaviour (one file per process, buffering, fail-open on disk errors with retry) follows.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from compactor import EventSink, MemorySink, SpoolSink
from compactor.events import (
    SCHEMA_VERSIONS,
    UPCASTERS,
    CompactionRecorded,
    Event,
    EventFactory,
    MessageAppended,
    Producer,
    SessionDeleted,
    SessionStarted,
    UsageReported,
    new_event_id,
    parse_event,
)

ReadBack = Callable[[], list[Event]]


def sample_events(session_id: str = "s1", n_messages: int = 3) -> list[Event]:
    factory = EventFactory(session_id)
    events = [factory.make(SessionStarted(context_window=128_000, model="m", agent="a"))]
    for i in range(n_messages):
        events.append(
            factory.make(
                MessageAppended(
                    index=i, role="user", bytes=10 + i, sha256=f"{i:064x}", content=f"msg {i}"
                )
            )
        )
    events.append(factory.make(UsageReported(estimated_input_tokens=100, input_tokens=120)))
    return events


def spool_lines(spool_dir: Path) -> list[str]:
    lines: list[str] = []
    for path in sorted(spool_dir.glob("*.jsonl")):
        lines += [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln]
    return lines


def read_spool(spool_dir: Path) -> list[Event]:
    return [parse_event(line) for line in spool_lines(spool_dir)]


@pytest.fixture(params=["memory", "spool"])
def sink_and_reader(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[EventSink, ReadBack]]:
    """Each sink backend with a function returning the events it holds, in order."""
    if request.param == "memory":
        memory = MemorySink(strict=True)
        yield memory, lambda: list(memory.events)
        return
    spool_dir = tmp_path / "spool"
    spool = SpoolSink(spool_dir)

    def read_back() -> list[Event]:
        spool.flush()
        return read_spool(spool_dir)

    yield spool, read_back
    spool.close()


class TestEventSinkContract:
    """Every EventSink backend keeps what was emitted, in order, exactly once."""

    def test_is_an_event_sink(self, sink_and_reader: tuple[EventSink, ReadBack]) -> None:
        sink, _ = sink_and_reader

        assert isinstance(sink, EventSink)

    def test_emitted_events_come_back_equal_and_in_order(
        self, sink_and_reader: tuple[EventSink, ReadBack]
    ) -> None:
        sink, read_back = sink_and_reader
        events = sample_events()

        for event in events:
            sink.emit(event)
        sink.flush()

        assert read_back() == events

    def test_flush_and_close_are_idempotent(
        self, sink_and_reader: tuple[EventSink, ReadBack]
    ) -> None:
        sink, read_back = sink_and_reader
        events = sample_events()
        for event in events:
            sink.emit(event)

        sink.flush()
        sink.flush()
        sink.close()
        sink.close()
        sink.flush()

        assert read_back() == events

    def test_flush_with_nothing_emitted_holds_nothing(
        self, sink_and_reader: tuple[EventSink, ReadBack]
    ) -> None:
        sink, read_back = sink_and_reader

        sink.flush()
        sink.close()

        assert read_back() == []

    def test_seq_is_gap_free_per_session_when_sessions_interleave(
        self, sink_and_reader: tuple[EventSink, ReadBack]
    ) -> None:
        sink, read_back = sink_and_reader
        a, b = sample_events("a", 4), sample_events("b", 2)
        interleaved = [e for pair in zip(a, b, strict=False) for e in pair] + a[len(b) :]

        for event in interleaved:
            sink.emit(event)
        sink.flush()

        held = read_back()
        assert held == interleaved
        for session in ("a", "b"):
            seqs = [e.seq for e in held if e.session_id == session]
            assert seqs == list(range(len(seqs)))
            assert len(seqs) > 1


# ---------------------------------------------------------------- MemorySink specifics


def test_strict_memory_sink_rejects_a_seq_gap() -> None:
    sink = MemorySink(strict=True)
    first, _skipped, third = sample_events(n_messages=1)[:3]
    sink.emit(first)

    with pytest.raises(AssertionError, match="seq 2 emitted, 1 expected"):
        sink.emit(third)
    assert sink.events == [first]


def test_memory_sink_of_type_filters_by_event_type() -> None:
    sink = MemorySink()
    for event in sample_events(n_messages=2):
        sink.emit(event)

    appended = sink.of_type("message_appended")

    assert [e.payload.index for e in appended if isinstance(e.payload, MessageAppended)] == [0, 1]
    assert len(appended) == 2


# ---------------------------------------------------------------- SpoolSink specifics


def test_spool_writes_one_file_per_process_across_flushes(tmp_path: Path) -> None:
    sink = SpoolSink(tmp_path / "spool")
    events = sample_events(n_messages=6)

    for event in events:
        sink.emit(event)
        sink.flush()

    files = list((tmp_path / "spool").glob("*.jsonl"))
    assert files == [sink.path]
    assert sink.path is not None
    assert f"-{os.getpid()}-" in sink.path.name
    assert read_spool(tmp_path / "spool") == events
    assert sink.written == len(events)


def test_spool_buffers_events_until_flush(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    sink = SpoolSink(spool_dir)
    events = sample_events()

    for event in events:
        sink.emit(event)

    assert sink.pending == len(events)
    assert sink.path is None
    assert list(spool_dir.glob("*.jsonl")) == []
    sink.flush()
    assert sink.pending == 0
    assert len(spool_lines(spool_dir)) == len(events)


def test_spool_flushes_by_itself_when_the_buffer_is_full(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    sink = SpoolSink(spool_dir, buffer_events=2)
    events = sample_events(n_messages=2)  # four events

    for event in events[:3]:
        sink.emit(event)

    assert read_spool(spool_dir) == events[:2]
    assert sink.pending == 1


def test_spool_disk_error_never_raises_and_is_counted_then_retried(tmp_path: Path) -> None:
    spool_dir = tmp_path / "spool"
    spool_dir.write_text("a regular file where the spool folder should be")
    sink = SpoolSink(spool_dir)
    events = sample_events()

    for event in events:
        sink.emit(event)
    sink.flush()
    sink.close()

    assert sink.errors == 2
    assert str(spool_dir) in sink.last_error
    assert sink.pending == len(events)
    assert sink.written == 0

    spool_dir.unlink()  # the problem is fixed
    sink.flush()

    assert sink.pending == 0
    assert sink.errors == 2
    assert read_spool(spool_dir) == events


def test_spool_drops_the_oldest_events_beyond_the_cap_while_the_disk_fails(
    tmp_path: Path,
) -> None:
    spool_dir = tmp_path / "spool"
    spool_dir.write_text("blocker")
    sink = SpoolSink(spool_dir, max_buffered=3)
    events = sample_events(n_messages=3)  # five events

    for event in events:
        sink.emit(event)

    assert sink.pending == 3
    assert sink.dropped == len(events) - 3
    spool_dir.unlink()
    sink.flush()
    assert read_spool(spool_dir) == events[-3:]


# ---------------------------------------------------------------- the envelope


def envelope(payload: Any, *, type_: str | None = None, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "event_id": "e1",
        "type": type_ if type_ is not None else payload["type"],
        "schema_version": SCHEMA_VERSIONS.get(type_ or payload["type"], 1),
        "session_id": "s1",
        "seq": 0,
        "occurred_at": datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC).isoformat(),
        "producer": Producer(version="1", host="h", pid=1).model_dump(),
        "payload": payload,
    }
    data.update(fields)
    return data


def test_envelope_type_must_equal_payload_type() -> None:
    with pytest.raises(ValidationError, match="'session_deleted' != payload type 'usage_reported'"):
        Event.model_validate(
            envelope(
                {"type": "usage_reported", "estimated_input_tokens": 1, "input_tokens": 1},
                type_="session_deleted",
            )
        )


def test_envelope_with_matching_type_is_valid() -> None:
    event = Event.model_validate(envelope({"type": "session_deleted", "reason": "gc"}))

    assert isinstance(event.payload, SessionDeleted)
    assert event.payload.reason == "gc"


def test_extra_fields_are_forbidden_on_the_envelope() -> None:
    with pytest.raises(ValidationError, match="surprise"):
        Event.model_validate(envelope({"type": "session_deleted"}, surprise=1))


def test_extra_fields_are_forbidden_on_the_payload() -> None:
    with pytest.raises(ValidationError, match="surprise"):
        Event.model_validate(envelope({"type": "session_deleted", "surprise": 1}))


def test_unknown_payload_type_is_rejected() -> None:
    with pytest.raises(ValidationError):
        Event.model_validate(envelope({"type": "session_exploded"}))


def test_events_are_frozen() -> None:
    event = sample_events()[0]

    with pytest.raises(ValidationError):
        event.seq = 99


def test_event_factory_numbers_events_from_zero_with_fresh_ids() -> None:
    events = sample_events(n_messages=4)

    assert [e.seq for e in events] == list(range(len(events)))
    assert len({e.event_id for e in events}) == len(events)
    assert all(e.type == e.payload.type for e in events)
    assert all(e.occurred_at.tzinfo is not None for e in events)


def test_event_ids_are_version_7_uuids_ordered_by_their_time() -> None:
    at = datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC)
    first, later = new_event_id(at), new_event_id(at + timedelta(milliseconds=1))
    parsed = uuid.UUID(first)
    assert (parsed.version, parsed.variant) == (7, uuid.RFC_4122)
    # 48 bits of Unix milliseconds, counted here without the code's formula
    assert parsed.int >> 80 == (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    assert parsed.int >> 80 == 1_772_366_400_250  # 2026-03-01T12:00:00.250Z
    assert first < later  # text order is time order
    assert len({new_event_id(at) for _ in range(1000)}) == 1000  # 74 random bits per id
    made = sample_events(n_messages=1)[0]
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert uuid.UUID(made.event_id).int >> 80 == (made.occurred_at - epoch) // timedelta(
        milliseconds=1
    )


def test_parse_event_round_trips_a_json_line() -> None:
    for event in sample_events():
        assert parse_event(event.to_json_line()) == event
        assert parse_event(event.to_json_line().encode()) == event


def test_parse_event_rejects_a_newer_schema_version_saying_to_upgrade() -> None:
    newer = SCHEMA_VERSIONS["session_deleted"] + 1
    raw = envelope({"type": "session_deleted"}, schema_version=newer)

    with pytest.raises(ValueError, match=f"schema_version {newer}.*upgrade"):
        parse_event(json.dumps(raw))


def test_parse_event_rejects_json_that_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        parse_event("[1, 2]")


def test_each_event_type_carries_its_own_schema_version() -> None:
    events = sample_events(n_messages=2)

    assert {e.type for e in events} >= {"session_started", "message_appended"}
    for event in events:
        assert event.schema_version == SCHEMA_VERSIONS[event.type]
    assert SCHEMA_VERSIONS["compaction_recorded"] != SCHEMA_VERSIONS["session_deleted"]


def test_parse_event_applies_a_registered_upcaster_for_its_type_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def rename_why_to_reason(payload: dict[str, Any]) -> dict[str, Any]:
        out = dict(payload)
        out["reason"] = out.pop("why")
        return out

    old = SCHEMA_VERSIONS["session_deleted"]
    monkeypatch.setitem(SCHEMA_VERSIONS, "session_deleted", old + 1)
    monkeypatch.setitem(UPCASTERS, ("session_deleted", old), rename_why_to_reason)
    old_line = json.dumps(
        envelope({"type": "session_deleted", "why": "user asked"}, schema_version=old)
    )

    event = parse_event(old_line)

    assert isinstance(event.payload, SessionDeleted)
    assert event.payload.reason == "user asked"
    assert event.schema_version == old + 1
    # Another type at the same old version needs no step and is left alone.
    usage = json.dumps(
        envelope({"type": "usage_reported", "estimated_input_tokens": 5, "input_tokens": 7})
    )
    assert parse_event(usage).schema_version == SCHEMA_VERSIONS["usage_reported"]


def test_version_one_compaction_event_gains_anchor_items_parsed_from_its_record() -> None:
    record = {
        "tier": 3,
        "anchors": [
            {"type": "user_intent", "content": "Fix the cache"},
            {"type": "key_decision", "content": "- use an LRU\n- N/A\n- keep the API"},
            {"type": "next_step", "content": "none"},
        ],
    }
    payload = {"type": "compaction_recorded", "record": record, "before": [], "after": []}

    event = parse_event(json.dumps(envelope(payload, schema_version=1)))

    assert event.schema_version == SCHEMA_VERSIONS["compaction_recorded"] == 2
    assert isinstance(event.payload, CompactionRecorded)
    got = [(i.anchor_type, i.position, i.item) for i in event.payload.anchor_items]
    assert got == [
        ("user_intent", 0, "Fix the cache"),
        ("key_decision", 0, "use an LRU"),
        ("key_decision", 1, "keep the API"),
    ]


def test_version_one_usage_event_keeps_its_estimate_as_the_raw_one() -> None:
    payload = {"type": "usage_reported", "estimated_input_tokens": 1234, "input_tokens": 1500}

    event = parse_event(json.dumps(envelope(payload, schema_version=1)))

    assert isinstance(event.payload, UsageReported)
    assert event.payload.raw_estimated_tokens == 1234
    assert event.payload.prompt == "view"
