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
sink is made; its tracer makes the spans, and our own span processor (``_Delivery``) sends them,
so that every span is counted as delivered or not (the SDK's batch processor drops spans from a
full queue uncounted, and its flush waits on the network). An agent's ``flush``, which the
session calls after each compaction, never waits on an export. Like every sink, it never raises
into the agent: failures are counted (``errors``) and logged once per kind. Other event types
are ignored.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from compactor.events import CompactionRecorded, Event, SessionStarted
from compactor.records import CompactionRecord, CompactionTier
from compactor.writing._faults import FaultLog, describe

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
        raise ValueError(f"OTLP endpoint {_shown(endpoint)!r} is not a URL: {exc}") from None
    if (
        url.scheme not in ("http", "https")
        or not url.hostname
        or any(c.isspace() for c in endpoint)
    ):
        raise ValueError(
            f"OTLP endpoint {_shown(endpoint)!r} is not an http(s) URL with a host, such as "
            "http://127.0.0.1:4318/v1/traces"
        )


_USERINFO_PASSWORD = re.compile(r"(://[^\s/?#@:]*:)[^\s/?#]*@")


def _shown(endpoint: str) -> str:
    """``endpoint`` as a message may quote it: a ``user:password@`` keeps only the user, and a
    query (which may hold a token) is cut. (``analytics`` has the full ``redact_url``; the
    library must not import it.)"""
    return _USERINFO_PASSWORD.sub(r"\1***@", endpoint.split("?", 1)[0])


class OtlpSink:
    """Sends each effective compaction as a span. ``endpoint``: an OTLP/HTTP traces URL (e.g.
    ``http://127.0.0.1:4318/v1/traces``); or pass ``exporter`` (any SDK ``SpanExporter``, such as
    the in-memory one tests use). ``summaries=True`` adds the summary text of sessions captured
    in full. ``timeout`` (seconds) bounds each export to the endpoint, retries included.

    ``batch=True`` (the default, for agents): spans wait in a queue of ``max_queue`` and a
    background thread exports them, ``max_batch`` at a time, when a batch is full, after
    ``flush`` (which only wakes it: neither ``emit`` nor ``flush`` ever waits on the network)
    and every few seconds; a span that finds the queue full is dropped and counted.
    ``close`` lets the thread drain the queue for at most ``timeout`` seconds and stops at the
    first failed export; what is left is counted undelivered. ``batch=False`` (for short-lived
    commands): the same batches are exported in the caller's thread, on ``emit`` when a batch
    is full and on ``flush`` and ``close``; after an export fails the rest are not tried, only
    counted, so that a command facing a dead endpoint waits for one ``timeout``, not one per
    batch.

    Every span made is accounted for: ``delivered`` (the endpoint acknowledged it) plus
    ``undelivered`` (an export failed, the queue was full, or it was left at close) plus those
    still queued. A compaction whose time OTLP cannot carry (before 1970 or after 2554, from a
    broken clock) is not made a span: ``skipped`` counts it and ``skipped_sessions`` names its
    session, since an export of it would fail its whole batch."""

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
        max_queue: int = 2048,
        max_batch: int = 512,
    ) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        if exporter is None:
            if not endpoint:
                raise ValueError("OtlpSink needs an endpoint (OTLP/HTTP traces URL) or exporter")
            _check_endpoint(endpoint)
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(
                endpoint=endpoint, headers=dict(headers or {}), timeout=timeout
            )
        self._delivery = _Delivery(
            exporter,
            background=batch,
            max_queue=max(1, max_queue),
            max_batch=max(1, max_batch),
            close_within_s=max(0.0, timeout),
        )
        self._provider = TracerProvider(
            resource=Resource.create({"service.name": _SERVICE, **(resource or {})})
        )
        self._provider.add_span_processor(self._delivery)  # type: ignore[arg-type]  # duck-typed
        self._tracer = self._provider.get_tracer("compactlens.compactor")
        self.summaries = summaries
        self._full: set[str] = set()
        self.spans = 0
        self.skipped = 0
        self.skipped_sessions: dict[str, tuple[int, datetime]] = {}
        """Per session whose compactions were skipped: how many, and the time of the first."""
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
        end = _unix_nanos(event.occurred_at)
        start = end - max(0, int(record.duration))
        if not _OTLP_NANOS[0] <= start <= end < _OTLP_NANOS[1]:
            self._skip(event)
            return
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        parent = SpanContext(
            trace_id=trace_id_of(event.session_id),
            span_id=int.from_bytes(hashlib.sha256(event.event_id.encode()).digest()[:8]) or 1,
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
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
        self.spans += 1
        span.end(end_time=end)  # hands the span to the delivery (which may export it here)

    def _skip(self, event: Event) -> None:
        self.skipped += 1
        count, first = self.skipped_sessions.get(event.session_id, (0, event.occurred_at))
        self.skipped_sessions[event.session_id] = (count + 1, first)
        self._faults.note(
            "OTLP span not made: a compaction's time is outside 1970-2554, which OTLP cannot "
            "carry (a broken clock); its session is named in skipped_sessions",
            then="skipping such compactions",
        )

    def flush(self) -> None:
        """Batched: wake the export thread and return at once. Unbatched: export what waits."""
        try:
            self._delivery.flush()
        except Exception as exc:
            self._errors += 1
            self._faults.report("OTLP flush failed", exc)

    def close(self) -> None:
        try:
            self._provider.shutdown()  # the delivery's shutdown: drained as the class says
        except Exception as exc:
            self._errors += 1
            self._faults.report("OTLP shutdown failed", exc)

    @property
    def delivered(self) -> int:
        """Spans the endpoint acknowledged."""
        return self._delivery.delivered

    @property
    def undelivered(self) -> int:
        """Spans that will not be delivered: their export failed, the queue was full, or they
        were still waiting at close (or after a failed export, unbatched)."""
        return self._delivery.undelivered

    @property
    def pending(self) -> int:
        """Spans made but neither delivered nor given up yet (queued or being exported)."""
        return self.spans - self.delivered - self.undelivered

    @property
    def last_error(self) -> str:
        """Why the newest failed export failed (the exporter's result, or its exception's
        type), "" if none did."""
        return self._delivery.last_error

    @property
    def errors(self) -> int:
        """Spans not built, flushes or shutdowns that failed, and spans not delivered."""
        return self._errors + self.undelivered


_OTLP_NANOS = (0, 2**64)
"""The times an OTLP span can carry: unsigned 64-bit nanoseconds since 1970 (to 2554)."""
SCHEDULE_S = 5.0
"""Batched: how long a queued span waits for a full batch or a flush before it is sent anyway."""


def _unix_nanos(at: datetime) -> int:
    """``at`` as integer nanoseconds since 1970 (negative before), without float rounding."""
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Delivery:
    """The span processor behind ``OtlpSink``: spans to the exporter in batches, each counted
    as delivered or not (see ``OtlpSink``). It has the SDK's ``SpanProcessor`` methods without
    subclassing it, so that this module imports the SDK only when a sink is made."""

    def __init__(
        self,
        exporter: Any,
        *,
        background: bool,
        max_queue: int,
        max_batch: int,
        close_within_s: float,
    ) -> None:
        self.exporter = exporter
        self.background = background
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.close_within_s = close_within_s
        self.delivered = 0
        self.failed = 0
        """Spans in exports that failed."""
        self.dropped = 0
        """Batched: spans that found the queue full."""
        self.abandoned = 0
        """Spans never tried: left at close, or (unbatched) after a failed export."""
        self.last_error = ""
        self._queue: deque[Any] = deque()
        self._cond = threading.Condition()
        self._wake = False
        self._closing = False
        self._closed = False
        self._gave_up = False
        self._thread: threading.Thread | None = None

    @property
    def undelivered(self) -> int:
        return self.failed + self.dropped + self.abandoned

    # ------------------------------------------------------------ SpanProcessor

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def _on_ending(self, span: Any) -> None:
        pass

    def on_end(self, span: Any) -> None:
        with self._cond:
            if self._closed or self._gave_up:
                self.abandoned += 1
                return
            if self.background and len(self._queue) >= self.max_queue:
                self.dropped += 1
                return
            self._queue.append(span)
            full = len(self._queue) >= self.max_batch
            if self.background:
                self._start_thread()
                if full:
                    self._wake = True
                    self._cond.notify_all()
        if full and not self.background:
            self._export_queued()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        self.flush()
        return True

    def shutdown(self) -> None:
        if self.background:
            self._close_thread()
        else:
            self._export_queued()
        with self._cond:
            self._closed = True
            self.abandoned += len(self._queue)
            self._queue.clear()
        self.exporter.shutdown()

    # ------------------------------------------------------------ delivery

    def flush(self) -> None:
        if not self.background:
            self._export_queued()
            return
        with self._cond:
            self._wake = True
            self._cond.notify_all()

    def _export(self, batch: list[Any]) -> bool:
        """Export ``batch`` and count it; whether the endpoint took it."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.exporter.export(batch)
            ok = bool(result == SpanExportResult.SUCCESS)
            error = "" if ok else f"the exporter reported {getattr(result, 'name', result)}"
        except Exception as exc:  # an exporter that raises has failed, nothing more
            ok, error = False, f"the exporter raised {describe(exc)}"
        with self._cond:
            if ok:
                self.delivered += len(batch)
            else:
                self.failed += len(batch)
                self.last_error = error
        return ok

    def _take(self) -> list[Any]:
        """Up to ``max_batch`` spans off the queue (the lock held)."""
        return [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]

    def _export_queued(self) -> None:
        """Unbatched: export everything queued, batch by batch, in the caller's thread; after
        a failure, give up on the rest."""
        while True:
            with self._cond:
                if self._gave_up or not self._queue:
                    return
                batch = self._take()
            if not self._export(batch):
                with self._cond:
                    self._gave_up = True
                    self.abandoned += len(self._queue)
                    self._queue.clear()
                return

    def _start_thread(self) -> None:
        """Start the export thread on the first span (the lock held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="compactlens-otlp", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        deadline: float | None = None
        while True:
            with self._cond:
                if not self._closing:
                    self._cond.wait_for(
                        lambda: self._wake or self._closing or len(self._queue) >= self.max_batch,
                        SCHEDULE_S,
                    )
                self._wake = False
                if self._closing:
                    if deadline is None:
                        deadline = time.monotonic() + self.close_within_s
                    if not self._queue or time.monotonic() >= deadline:
                        return
                batch = self._take()
            if batch and not self._export(batch) and self._closing:
                return  # closing, and the endpoint fails: the rest are counted, not tried

    def _close_thread(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            # an export in flight ends within the exporter's own timeout; then the drain
            # gets close_within_s more at most
            thread.join(2 * self.close_within_s + 5.0)
