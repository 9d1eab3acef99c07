"""What the library logs when it fails open: the error's type and code, once per kind, never the
content of the conversation (in any capture mode, tracebacks and chained exceptions included)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from compactor import (
    CompactionRecord,
    CompactionSession,
    CompactionTier,
    JsonlRecordStore,
    Message,
    ProgressiveCompactor,
)
from compactor.events import Capture, Event
from tests.compactor.builders import ScriptedSummarizer, conversation, window_for

MARKER = "zebra-7734-marker"


class QuotingStore:
    """A record store whose errors quote the record (as a careless backend's would)."""

    def __init__(self) -> None:
        self.calls = 0

    def append(self, record: CompactionRecord) -> None:
        self.calls += 1
        raise RuntimeError(f"cannot store {record!r}")

    def list(self, session_id: str) -> list[CompactionRecord]:
        return []


class QuotingSink:
    """An event sink whose errors quote the event."""

    def emit(self, event: Event) -> None:
        raise OSError(28, f"no space for {event!r}")

    def flush(self) -> None:
        raise OSError(28, "no space")

    def close(self) -> None:
        pass


class QuotingExtractor:
    def extract(self, messages: list[Message]) -> None:
        raise ValueError(f"memory store rejected {messages!r}")


def _everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    formatter = logging.Formatter("%(levelname)s %(name)s %(message)s")
    return "\n".join(formatter.format(r) for r in caplog.records)  # exc_info formatted too


def _marked(n: int) -> list[Message]:
    msgs = conversation(n)
    return [m.model_copy(update={"content": f"{m.content} {MARKER}"}) for m in msgs]


@pytest.mark.parametrize("capture", ["full", "metadata"])
def test_a_failing_record_store_logs_one_warning_without_any_content(
    capture: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    msgs = _marked(30)
    store = QuotingStore()
    pc = ProgressiveCompactor(
        ScriptedSummarizer(),
        window_for(msgs, 0.85),
        record_store=store,
        capture=capture,
        memory_extractor=QuotingExtractor(),
    )
    for _ in range(10):
        _, record = pc.compact_with_record(msgs)
        assert record.tier == CompactionTier.FULL
    assert store.calls == 10 and pc.record_store_errors == 10
    logged = _everything_logged(caplog)
    assert MARKER not in logged
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, [r.getMessage() for r in warnings]  # one per kind
    assert any("RuntimeError" in r.getMessage() for r in warnings)
    assert any("ValueError" in r.getMessage() for r in warnings)
    assert all(r.exc_info is None for r in caplog.records)


@pytest.mark.parametrize("capture", ["full", "metadata"])
def test_a_failing_event_sink_logs_one_warning_per_kind_without_any_content(
    capture: Capture, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)
    msgs = _marked(30)
    pc = ProgressiveCompactor(
        ScriptedSummarizer(),
        window_for(msgs, 0.85),
        record_store=JsonlRecordStore(tmp_path / "records"),
    )
    session = CompactionSession(
        pc, msgs[0], session_id="s", event_sink=QuotingSink(), capture=capture
    )
    for m in msgs[1:]:
        session.append(m)
    for _ in range(3):
        session.prepare()
        session.append(Message(role="user", content=f"more {MARKER}"))
    assert session.sink_errors > 30
    logged = _everything_logged(caplog)
    assert MARKER not in logged
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert 1 <= len(warnings) <= 2, [r.getMessage() for r in warnings]  # emit, flush
    assert all("OSError ENOSPC" in r.getMessage() for r in warnings)
