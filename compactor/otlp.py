"""``OtlpSink``: effective compactions as OpenTelemetry spans, for Langfuse, Phoenix or any OTLP
backend.

An event sink an agent adds beside its spool (or that ``compactlens export otlp`` feeds with the
events of a store): each effective ``compaction_recorded`` event becomes one span named
``compaction`` on its session's trace, with the GenAI semantic conventions' conversation id
(``gen_ai.conversation.id`` = the session id, ``gen_ai.conversation.compacted = true``) and
vendor-prefixed attributes (``compactlens.tier``, ``.tokens_before``, ``.tokens_after``,
``.compression_ratio``, ``.offloaded``, ``.summarized``, ``.emergency``, ...). A session's trace id
is derived from its id, so spans sent by different processes land on one trace. No message
content is ever an attribute; the summary text is added (``compactlens.summary``, capped) only for
sessions whose ``session_started`` says ``capture="full"`` and only when ``summaries=True``.

The OpenTelemetry SDK is an optional extra (``pip install compactlens[otel]``), imported when a
sink is made. Like every sink, it never raises into the agent: failures are counted
(``errors``) and logged once per kind. Other event types are ignored.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from compactor.events import CompactionRecorded, Event, SessionStarted
from compactor.faults import FaultLog
from compactor.records import CompactionRecord, CompactionTier

log = logging.getLogger(__name__)

SPAN_NAME = "compaction"
SUMMARY_CHARS = 4000
_SERVICE = "compactlens"


def compaction_attributes(
    session_id: str, record: CompactionRecord, *, summary: bool = False
) -> dict[str, str | int | float | bool]:
    """The span attributes of one compaction (no content unless ``summary``)."""
    attrs: dict[str, str | int | float | bool] = {
        "gen_ai.conversation.id": session_id,
        "gen_ai.conversation.compacted": True,
        "compactlens.compaction_id": record.id,
        "compactlens.tier": record.tier.name,
        "compactlens.trigger": record.trigger,
        "compactlens.origin": record.origin,
        "compactlens.tokens_before": int(record.tokens_before),
        "compactlens.tokens_after": int(record.tokens_after),
        "compactlens.compression_ratio": float(record.compression_ratio),
        "compactlens.offloaded": len(record.offloaded),
        "compactlens.summarized": int(record.summarized),
        "compactlens.emergency": record.tier == CompactionTier.EMERGENCY,
        "compactlens.context_window": int(record.context_window),
    }
    if record.harness:
        attrs["compactlens.harness"] = record.harness
    if record.emergency:
        attrs["compactlens.emergency_kind"] = record.emergency
    if record.error_codes:
        attrs["compactlens.error_codes"] = ",".join(record.error_codes)
    if summary and record.summary_text:
        attrs["compactlens.summary"] = record.summary_text[:SUMMARY_CHARS]
    return attrs


def trace_id_of(session_id: str) -> int:
    """A session's trace id: 128 bits of the sha256 of its id (never zero)."""
    value = int.from_bytes(hashlib.sha256(session_id.encode("utf-8", "replace")).digest()[:16])
    return value or 1


def _check_endpoint(endpoint: str) -> None:
    """Raise ValueError, saying why, unless ``endpoint`` is an http(s) URL with a host: a typo
    is said when the sink is made, not as failed exports later."""
    try:
        endpoint.encode("utf-8")  # a lone surrogate (undecodable bytes in argv) is no host
        url = urlsplit(endpoint)
        url.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError as exc:  # UnicodeEncodeError included
        raise ValueError(f"OTLP endpoint {endpoint!r} is not a URL: {exc}") from None
    if (
        url.scheme not in ("http", "https")
        or not url.hostname
        or any(c.isspace() for c in endpoint)
    ):
        raise ValueError(
            f"OTLP endpoint {endpoint!r} is not an http(s) URL with a host, such as "
            "http://127.0.0.1:4318/v1/traces"
        )


class OtlpSink:
    """Sends each effective compaction as a span. ``endpoint``: an OTLP/HTTP traces URL (e.g.
    ``http://127.0.0.1:4318/v1/traces``); or pass ``exporter`` (any SDK ``SpanExporter``, such as
    the in-memory one tests use). ``batch=False`` exports each span at once (for short-lived
    commands); the default batches in a background thread, so ``emit`` never waits on the
    network. ``summaries=True`` adds the summary text of sessions captured in full. ``timeout``
    (seconds) bounds each export to the endpoint, retries included."""

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        exporter: Any = None,
        headers: Mapping[str, str] | None = None,
        batch: bool = True,
        summaries: bool = False,
        resource: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        if exporter is None:
            if not endpoint:
                raise ValueError("OtlpSink needs an endpoint (OTLP/HTTP traces URL) or exporter")
            _check_endpoint(endpoint)
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(
                endpoint=endpoint, headers=dict(headers or {}), timeout=timeout
            )
        exporter = _Counted(exporter)
        self._exporter = exporter
        self._provider = TracerProvider(
            resource=Resource.create({"service.name": _SERVICE, **(resource or {})})
        )
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer("compactlens.compactor")
        self.summaries = summaries
        self._full: set[str] = set()
        self.spans = 0
        self._errors = 0
        self._faults = FaultLog(log)

    def emit(self, event: Event) -> None:
        try:
            self._emit(event)
        except Exception as exc:  # recording never breaks the agent
            self._errors += 1
            self._faults.report("OTLP span not built", exc)

    def _emit(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, SessionStarted):
            if payload.capture == "full":
                self._full.add(event.session_id)
            return
        if not isinstance(payload, CompactionRecorded):
            return
        record = payload.record
        if not record.effective or record.tier == CompactionTier.NONE:
            return
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        parent = SpanContext(
            trace_id=trace_id_of(event.session_id),
            span_id=int.from_bytes(hashlib.sha256(event.event_id.encode()).digest()[:8]) or 1,
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        end = int(event.occurred_at.timestamp() * 1e9)
        start = end - max(0, int(record.duration))
        attrs = compaction_attributes(
            event.session_id,
            record,
            summary=self.summaries and event.session_id in self._full,
        )
        span = self._tracer.start_span(
            SPAN_NAME,
            context=trace.set_span_in_context(NonRecordingSpan(parent)),
            attributes=attrs,
            start_time=start,
        )
        span.end(end_time=end)
        self.spans += 1

    def flush(self) -> None:
        try:
            self._provider.force_flush()
        except Exception as exc:
            self._errors += 1
            self._faults.report("OTLP flush failed", exc)

    def close(self) -> None:
        try:
            self._provider.shutdown()
        except Exception as exc:
            self._errors += 1
            self._faults.report("OTLP shutdown failed", exc)

    @property
    def undelivered(self) -> int:
        """Spans the exporter reported it could not deliver (the endpoint refused or was down)."""
        failed: int = self._exporter.failed
        return failed

    @property
    def errors(self) -> int:
        """Spans not built, flushes or shutdowns that failed, and spans not delivered."""
        return self._errors + self.undelivered


class _Counted:
    """A span exporter that counts the spans its inner exporter could not deliver."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failed = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.inner.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        if result != SpanExportResult.SUCCESS:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))
