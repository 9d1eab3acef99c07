"""A write that a full disk stops part-way leaves no fragment: spool and record files only ever
end at a complete line, and what could not be written arrives once, whole, when space returns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor import CompactionRecord, CompactionTier, JsonlRecordStore, SpoolSink
from compactor.events import Event, EventFactory, MessageAppended, SessionStarted, parse_event
from tests.compactor.tmpfs import fill_disk


def _session_events(n: int, content_bytes: int = 600) -> list[Event]:
    """One session's events: its start, then ``n`` messages of ``content_bytes`` each."""
    factory = EventFactory("torn")
    out: list[Event] = [factory.make(SessionStarted(context_window=1000))]
    for i in range(n):
        payload = MessageAppended(
            index=i, role="user", bytes=content_bytes, sha256="0" * 64, content="x" * content_bytes
        )
        out.append(factory.make(payload))
    return out


def _lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), "the file ends inside a line"
    return data.splitlines()


def test_a_spool_flush_torn_by_a_full_disk_is_cut_back_and_every_event_arrives_once(
    tiny_disk: Path,
) -> None:
    spool = tiny_disk / "spool"
    spool.mkdir()
    sink = SpoolSink(spool, buffer_events=10_000)
    events = _session_events(40)  # about 28 kB: more than the disk has left
    filler = fill_disk(tiny_disk, leave=8192)
    for event in events:
        sink.emit(event)
    sink.flush()
    assert sink.errors == 1
    assert "No space left on device" in sink.last_error
    assert sink.path is not None
    on_disk = _lines(sink.path)  # only complete lines after the failed flush
    for line in on_disk:
        parse_event(line)
    assert sink.written == len(on_disk)
    assert sink.pending == len(events) - sink.written

    filler.unlink()
    sink.flush()
    assert sink.errors == 1 and sink.pending == 0
    lines = _lines(sink.path)
    ids = [parse_event(line).event_id for line in lines]
    assert ids == [e.event_id for e in events]
    assert sink.written == len(events)


def _record(summary_bytes: int) -> CompactionRecord:
    return CompactionRecord(
        session_id="s1", tier=CompactionTier.FULL, summary_text="y" * summary_bytes
    )


def test_a_record_append_torn_by_a_full_disk_raises_and_leaves_no_fragment(
    tiny_disk: Path,
) -> None:
    store = JsonlRecordStore(tiny_disk / "records")
    store.root.mkdir()
    first = _record(100)
    store.append(first)
    filler = fill_disk(tiny_disk, leave=4096)
    torn = _record(20_000)
    with pytest.raises(OSError, match="No space left"):
        store.append(torn)
    path = store.path_for("s1")
    assert [json.loads(line)["id"] for line in _lines(path)] == [first.id]

    filler.unlink()
    after = _record(100)
    store.append(after)
    result = store.read("s1")
    assert result.errors == []
    assert [r.id for r in result.records] == [first.id, after.id]
