"""``OtlpSink`` and ``TeeSink``: every effective compaction one span, checked against the events.

A synthetic coding session runs through ``CompactionSession`` at a 16k window with the offline
summariser; the session's sink is a ``TeeSink`` of a strict ``MemorySink`` (the truth: the events
themselves) and an ``OtlpSink`` on the SDK's in-memory exporter.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from analytics.replay.synthetic import generate_session
from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    ExtractiveSummarizer,
    MemorySink,
    Message,
    OtlpSink,
    ProgressiveCompactor,
    TeeSink,
)
from compactor.events import Capture, CompactionRecorded, Event
from compactor.otlp import trace_id_of

MARKER = "ZQX-secret-marker-7731"


def _run(tmp_path: Path, sink: Any, capture: Capture = "full", seed: int = 3) -> None:
    msgs = [
        m.model_copy(update={"content": f"{m.content} {MARKER}"}) if m.role == "tool" else m
        for m in generate_session(seed)
    ]
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(), 16_000, offloader=CompactionOffloader(tmp_path, "s")
    )
    session = CompactionSession(
        compactor, msgs[0].content, session_id=f"otlp-{seed}", event_sink=sink, capture=capture
    )
    for m in msgs[1:]:
        if m.role == "assistant":
            session.prepare()
        session.append(m)
    session.close()


def _effective(events: list[Event]) -> list[CompactionRecorded]:
    found = [e.payload for e in events if isinstance(e.payload, CompactionRecorded)]
    return [p for p in found if p.record.effective and p.record.tier != CompactionTier.NONE]


@pytest.fixture
def exported(tmp_path: Path) -> tuple[MemorySink, InMemorySpanExporter]:
    memory, spans = MemorySink(strict=True), InMemorySpanExporter()
    _run(tmp_path, TeeSink(memory, OtlpSink(exporter=spans, batch=False)))
    return memory, spans


def test_every_effective_compaction_is_one_span_with_its_figures(
    exported: tuple[MemorySink, InMemorySpanExporter],
) -> None:
    memory, spans = exported
    records = {p.record.id: p.record for p in _effective(memory.events)}
    finished = spans.get_finished_spans()
    assert records and len(finished) == len(records)
    for span in finished:
        attrs = dict(span.attributes or {})
        record = records[str(attrs["compactlens.compaction_id"])]
        assert span.name == "compaction"
        assert attrs["gen_ai.conversation.id"] == "otlp-3"
        assert attrs["gen_ai.conversation.compacted"] is True
        assert attrs["compactlens.tier"] == record.tier.name
        assert attrs["compactlens.tokens_before"] == record.tokens_before
        assert attrs["compactlens.tokens_after"] == record.tokens_after
        assert attrs["compactlens.compression_ratio"] == pytest.approx(record.compression_ratio)
        assert attrs["compactlens.offloaded"] == len(record.offloaded)
        assert attrs["compactlens.summarized"] == record.summarized
        assert attrs["compactlens.emergency"] is (record.tier == CompactionTier.EMERGENCY)
        assert span.context is not None and span.context.trace_id == trace_id_of("otlp-3")
    tiers = {str(dict(s.attributes or {})["compactlens.tier"]) for s in finished}
    assert "EMERGENCY" in tiers and len(tiers) > 1  # the session reaches several tiers


@pytest.mark.parametrize("capture", ["full", "metadata"])
def test_no_content_reaches_a_span_unless_summaries_are_asked_for(
    tmp_path: Path, capture: Capture
) -> None:
    spans = InMemorySpanExporter()
    _run(tmp_path, OtlpSink(exporter=spans, batch=False), capture)
    finished = spans.get_finished_spans()
    assert finished
    for span in finished:
        values = " ".join(str(v) for v in (span.attributes or {}).values())
        assert MARKER not in values and "compactlens.summary" not in (span.attributes or {})


def test_summaries_are_sent_only_for_sessions_captured_in_full(tmp_path: Path) -> None:
    cases: tuple[tuple[Capture, bool], ...] = (("full", True), ("metadata", False))
    for capture, expected in cases:
        spans = InMemorySpanExporter()
        _run(tmp_path / capture, OtlpSink(exporter=spans, batch=False, summaries=True), capture)
        with_summary = [
            s for s in spans.get_finished_spans() if "compactlens.summary" in (s.attributes or {})
        ]
        assert bool(with_summary) is expected, capture


class _Broken:
    def emit(self, event: Event) -> None:
        raise RuntimeError(f"disk on fire {MARKER}")

    def flush(self) -> None:
        raise OSError(28, "No space left on device")

    def close(self) -> None:
        pass


def test_a_failing_sink_does_not_keep_events_from_the_others_and_leaks_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = MemorySink(strict=True)
    tee = TeeSink(_Broken(), memory)
    _run(tmp_path, tee)
    assert memory.events and tee.errors >= len(memory.events)
    warnings = [r.getMessage() for r in caplog.records]
    assert len([w for w in warnings if "_Broken.emit failed" in w]) == 1  # once per kind
    assert all(MARKER not in w for w in warnings)


def test_an_unreachable_collector_never_raises_into_the_agent(tmp_path: Path) -> None:
    # nothing listens on port 9; batched (the default), the agent never waits on the network
    sink = OtlpSink("http://127.0.0.1:9/v1/traces", timeout=0.5)
    started = time.monotonic()
    _run(tmp_path, sink)
    assert sink.spans > 0  # spans were made; sending them fails in the export thread, not here
    sink.close()  # the export thread's last attempt ends within the timeout
    assert sink.undelivered == sink.spans == sink.errors  # and the sink says so
    assert sink.delivered == 0 and sink.pending == 0
    assert time.monotonic() - started < 30


def test_a_sink_without_endpoint_or_exporter_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="needs an endpoint"):
        OtlpSink()


@pytest.mark.parametrize(
    "endpoint",
    [
        "not a url",
        "127.0.0.1:4318/v1/traces",
        "ftp://host/v1/traces",
        "http:///v1/traces",
        "http://host:port/v1/traces",
        "http://ho st:4318/v1/traces",
        "http://h\udcffst:4318/v1/traces",
    ],
)
def test_an_endpoint_that_is_not_an_http_url_is_refused_when_the_sink_is_made(
    endpoint: str,
) -> None:
    with pytest.raises(ValueError, match="OTLP endpoint") as info:
        OtlpSink(endpoint)
    assert repr(endpoint) in str(info.value)


def test_messages_without_compactions_make_no_span() -> None:
    spans = InMemorySpanExporter()
    sink = OtlpSink(exporter=spans, batch=False)
    session = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 1_000_000),
        "sys",
        session_id="calm",
        event_sink=sink,
    )
    session.append(Message(role="user", content="hello"))
    session.prepare()
    session.close()
    assert spans.get_finished_spans() == ()
