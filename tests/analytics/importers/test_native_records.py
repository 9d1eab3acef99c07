"""The record fields native compactions added: old events read as ours, an encrypted summary
stays null through JSON, metadata capture keeps the markers and drops the text."""

from __future__ import annotations

import json

from compactor import CompactionRecord, CompactionTier
from compactor.events import CompactionRecorded, EventFactory, parse_event, redact_record


def _event_line(record: CompactionRecord) -> str:
    payload = CompactionRecorded(record=record, before=[], after=[])
    return EventFactory("s1").make(payload).to_json_line()


def _record(line: str) -> CompactionRecord:
    payload = parse_event(line).payload
    assert isinstance(payload, CompactionRecorded)
    return payload.record


def test_a_compaction_event_written_before_the_native_fields_reads_as_ours() -> None:
    raw = json.loads(_event_line(CompactionRecord(session_id="s1", tier=CompactionTier.FULL)))
    for key in ("origin", "harness", "summary_encrypted", "tokens_before_source"):
        del raw["payload"]["record"][key]

    record = _record(json.dumps(raw))

    assert (record.origin, record.harness) == ("compactlens", None)
    assert (record.summary_encrypted, record.tokens_before_source) == (False, "estimated")


def test_an_encrypted_native_summary_stays_null_through_json() -> None:
    native = CompactionRecord(
        session_id="s1",
        tier=CompactionTier.FULL,
        origin="native",
        harness="codex",
        summary_text=None,
        summary_encrypted=True,
        tokens_before_source="harness",
    )
    line = _event_line(native)

    record = _record(line)

    assert '"summary_text":null' in line
    assert (record.summary_text, record.summary_encrypted, record.harness) == (None, True, "codex")
    assert redact_record(record).summary_text is None


def test_a_null_summary_that_was_not_encrypted_reads_as_empty() -> None:
    record = CompactionRecord.model_validate({"summary_text": None, "tier": 3})
    assert record.summary_text == ""
