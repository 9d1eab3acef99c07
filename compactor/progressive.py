"""ProgressiveCompactor: decide a tier, then offload, summarise or truncate, and record it.

The tiers (SPEC 3.2): Warn offloads large tool results in the head; Soft summarises the older
half of the head; Full the whole head; Emergency truncates without an LLM call. Every call
returns a new list (the input is never changed) and a ``CompactionRecord``. The sync and async
entry points share one pipeline, written as a generator that yields its one summariser request,
so both behave identically. Recording never raises into the agent loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compactor.anchors import all_na, merge_anchors, parse_anchors_and_summary
from compactor.calls import (
    SummaryRequest,
    SummaryResponse,
    asummarize_with_timeout,
    summarize_with_timeout,
)
from compactor.compaction_message import (
    build_compaction_message,
    offload_reference,
    read_previous,
    read_references,
    read_section,
)
from compactor.config import CompactorConfig
from compactor.errors import OffloadError
from compactor.events import EventFactory, compaction_recorded, offload_events
from compactor.fallback import (
    TokenBudgetCompactor,
    find_task_index,
    is_compaction_message,
    repair_with_report,
)
from compactor.messages import Message
from compactor.offload import CompactionOffloader
from compactor.outcome import CompactionOutcome
from compactor.protocols import MemoryExtractor, TodoInjector
from compactor.records import (
    CompactionRecord,
    CompactionTier,
    OffloadEntry,
    RecordStore,
    SummarizerStats,
    compression_ratio,
)
from compactor.sinks import EventSink
from compactor.summarize import (
    ChatModel,
    PreviousCompaction,
    Summarizer,
    SummaryResult,
    as_summarizer,
)
from compactor.tiers import (
    Split,
    context_ratio,
    soft_midpoint,
    split_head_tail,
    tier_for_ratio,
)
from compactor.tokens import ByteEstimator, TokenEstimator, message_bytes

log = logging.getLogger(__name__)

Trigger = Literal["auto", "manual"]


_Pipeline = Generator[SummaryRequest, SummaryResponse, CompactionOutcome]


@dataclass
class _Work:
    """Mutable state of one pipeline run."""

    inputs: list[Message]
    view: list[Message]
    sources: list[int | None]
    tier: CompactionTier
    tokens_before: int
    trigger: Trigger
    t0: int
    offloaded: list[OffloadEntry] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    fallback: list[str] = field(default_factory=list)
    summarized: set[int] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)


class ProgressiveCompactor:
    """Tiered, pair-safe, non-destructive context compaction (SPEC 3)."""

    def __init__(
        self,
        summarizer: Summarizer | ChatModel,
        context_window: int,
        *,
        config: CompactorConfig | None = None,
        offloader: CompactionOffloader | None = None,
        record_store: RecordStore | None = None,
        event_sink: EventSink | None = None,
        session_id: str = "",
        memory_extractor: MemoryExtractor | None = None,
        todo_injector: TodoInjector | None = None,
        fallback: TokenBudgetCompactor | None = None,
        estimator: TokenEstimator | None = None,
    ) -> None:
        self.summarizer = as_summarizer(summarizer)
        self.context_window = context_window
        self.config = config or CompactorConfig()
        if not session_id and offloader is not None:
            session_id = offloader.session_id  # the offloader already names the session
        self.session_id = session_id
        self.offloader = (
            offloader.for_session(session_id)
            if offloader and offloader.session_id != session_id
            else offloader
        )
        self.record_store = record_store
        self.event_sink = event_sink
        self.memory_extractor = memory_extractor
        self.todo_injector = todo_injector
        self.estimator = estimator or ByteEstimator()
        self.fallback = fallback or TokenBudgetCompactor(
            context_window, config=self.config, estimator=self.estimator, offloader=self.offloader
        )
        self._last: PreviousCompaction | None = None
        self._events = EventFactory(session_id)
        self.record_store_errors = 0

    def for_session(
        self, session_id: str, *, estimator: TokenEstimator | None = None
    ) -> ProgressiveCompactor:
        """The same settings bound to another session: fresh summary state, its own paths
        (and, if given, its own estimator: calibration is per model and harness)."""
        return ProgressiveCompactor(
            self.summarizer,
            self.context_window,
            config=self.config,
            offloader=self.offloader,
            record_store=self.record_store,
            event_sink=self.event_sink,
            session_id=session_id,
            memory_extractor=self.memory_extractor,
            todo_injector=self.todo_injector,
            estimator=estimator or self.estimator,
        )

    # ------------------------------------------------------------ decisions

    def tokens(self, msgs: Sequence[Message]) -> int:
        return self.estimator.tokens_for_bytes(sum(message_bytes(m) for m in msgs))

    def tier_for_tokens(self, tokens: int) -> CompactionTier:
        if self.context_window <= 0:
            return CompactionTier.NONE
        ratio = context_ratio(tokens, self.context_window, self.config.reserve_tokens)
        return tier_for_ratio(ratio, self.config)

    def determine_tier(self, msgs: Sequence[Message]) -> CompactionTier:
        return self.tier_for_tokens(self.tokens(msgs))

    # ------------------------------------------------------------ public entry points

    def compact(self, msgs: Sequence[Message]) -> list[Message]:
        return self.compact_with_record(msgs)[0]

    def compact_force(self, msgs: Sequence[Message]) -> list[Message]:
        """Emergency truncation now (the seed's ``CompactForce``)."""
        out = self.compact_detailed(msgs, tier=CompactionTier.EMERGENCY, trigger="manual")
        return out.view

    def compact_with_record(
        self, msgs: Sequence[Message]
    ) -> tuple[list[Message], CompactionRecord]:
        out = self.compact_detailed(msgs)
        return out.view, out.record

    async def acompact_with_record(
        self, msgs: Sequence[Message]
    ) -> tuple[list[Message], CompactionRecord]:
        out = await self.acompact_detailed(msgs)
        return out.view, out.record

    async def acompact(self, msgs: Sequence[Message]) -> list[Message]:
        return (await self.acompact_with_record(msgs))[0]

    def compact_detailed(
        self,
        msgs: Sequence[Message],
        *,
        tier: CompactionTier | None = None,
        trigger: Trigger = "auto",
        tokens: int | None = None,
        emit: bool = True,
    ) -> CompactionOutcome:
        """The full result with provenance. ``tier`` forces a tier; ``tokens`` skips counting."""
        gen = self._pipeline(list(msgs), tier, trigger, tokens)
        try:
            request = next(gen)
            while True:
                request = gen.send(
                    summarize_with_timeout(
                        self.summarizer, request, self.config.summarizer_timeout_s
                    )
                )
        except StopIteration as stop:
            return self._finish(stop.value, emit)

    async def acompact_detailed(
        self,
        msgs: Sequence[Message],
        *,
        tier: CompactionTier | None = None,
        trigger: Trigger = "auto",
        tokens: int | None = None,
        emit: bool = True,
    ) -> CompactionOutcome:
        gen = self._pipeline(list(msgs), tier, trigger, tokens)
        try:
            request = next(gen)
            while True:
                request = gen.send(
                    await asummarize_with_timeout(
                        self.summarizer, request, self.config.summarizer_timeout_s
                    )
                )
        except StopIteration as stop:
            return self._finish(stop.value, emit)

    # ------------------------------------------------------------ the pipeline

    def _pipeline(
        self,
        msgs: list[Message],
        force: CompactionTier | None,
        trigger: Trigger,
        tokens: int | None,
    ) -> _Pipeline:
        tokens_before = self.tokens(msgs) if tokens is None else tokens
        tier = force if force is not None else self.tier_for_tokens(tokens_before)
        work = _Work(
            inputs=msgs,
            view=list(msgs),
            sources=list(range(len(msgs))),
            tier=tier,
            tokens_before=tokens_before,
            trigger=trigger,
            t0=time.perf_counter_ns(),
        )
        if tier == CompactionTier.NONE:
            return self._outcome(work, effective=False)
        repaired = repair_with_report(msgs)
        if repaired.notes:
            work.view, work.sources, work.repairs = (
                repaired.messages,
                repaired.sources,
                repaired.notes,
            )
        if tier == CompactionTier.EMERGENCY:
            self._emergency(work)
            return self._outcome(work)
        split = split_head_tail(work.view, self.config.min_tail_messages)
        if split.head_len == 0:
            work.view, work.sources = list(msgs), list(range(len(msgs)))
            return self._outcome(work, effective=False)
        if tier == CompactionTier.WARN:
            self._offload_range(work, split.head_start, split.tail_start)
            if not work.offloaded and not work.repairs:
                return self._outcome(work, effective=False)  # nothing left to offload
        else:
            cut = split.tail_start
            if tier == CompactionTier.SOFT:
                cut = self._soft_cut(work, split)
            ok = yield from self._summarise(work, split.head_start, cut)
            if not ok:
                return self._outcome(work, effective=bool(work.fallback))
        if self._ratio(work.view) >= self.config.emergency:
            work.fallback.append("escalated to emergency")
            self._emergency(work)
        return self._outcome(work)

    def _soft_cut(self, work: _Work, split: Split) -> int:
        """The Soft midpoint, widened to the whole head when the older half holds too little
        new content (little more than the last compaction message) for a summary to pay."""
        cut = soft_midpoint(work.view, split)
        fresh = [m for m in work.view[split.head_start : cut] if not is_compaction_message(m)]
        if self.tokens(fresh) < self.config.soft_min_gain * work.tokens_before:
            work.fallback.append("soft widened to the whole head")
            return split.tail_start
        return cut

    def _summarise(
        self, work: _Work, start: int, cut: int
    ) -> Generator[SummaryRequest, SummaryResponse, bool]:
        part_sources = work.sources[start:cut]
        self._extract_memory(work.view[start:cut])
        self._offload_range(work, start, cut)
        part = work.view[start:cut]
        carriers = [m for m in part if is_compaction_message(m)]
        previous = read_previous(carriers[-1]) if carriers else self._last
        transcript, positions = [], []
        for m, src in zip(part, part_sources, strict=True):
            if not is_compaction_message(m):
                transcript.append(m)
                positions.append(src)
        if not transcript:
            return False
        started = time.perf_counter_ns()
        response = yield SummaryRequest(transcript, previous)
        latency_ms = (time.perf_counter_ns() - started) / 1e6
        label = f"LLM summary failed in Tier{work.tier.label}"
        if isinstance(response, BaseException):
            cause = str(response) or type(response).__name__
            self._llm_fallback(work, f"{label}: {type(response).__name__}: {cause}")
            return True
        anchors, summary = parse_anchors_and_summary(response.text)
        if all_na(anchors) and not summary:
            excerpt = response.text.strip().replace("\n", " ")[:120]
            self._llm_fallback(
                work,
                f"{label}: summary parsed to five N/A anchors and no summary (got {excerpt!r})",
            )
            return True
        merged = merge_anchors(previous.anchors if previous else None, anchors)
        message = self._compaction_message(work, carriers, merged, summary, start)
        view = [*work.view[:start], message, *work.view[cut:]]
        if self.tokens(view) >= work.tokens_before:
            self._llm_fallback(work, f"{label}: the summary did not reduce the context")
            return True
        work.view = view
        work.sources = [*work.sources[:start], None, *work.sources[cut:]]
        work.summarized.update(p for p in positions if p is not None)
        work.extra.update(
            anchors=merged,
            summary=summary,
            n_summarized=len(transcript),
            preserved=len(view) - start - 1,
            stats=self._stats(response, latency_ms),
        )
        self._last = PreviousCompaction(anchors=merged, summary=summary)
        return True

    def _compaction_message(
        self, work: _Work, carriers: list[Message], anchors: Any, summary: str, start: int
    ) -> Message:
        task = read_section(carriers[-1], "Original Request") if carriers else ""
        if not task:
            idx = find_task_index(work.inputs)
            task = work.inputs[idx].content if idx is not None else ""
        refs = [r for c in carriers for r in read_references(c)]
        refs += [offload_reference(e) for e in work.offloaded]
        active = ""
        if self.todo_injector is not None:
            try:
                active = self.todo_injector.active_tasks()
            except Exception as exc:
                work.errors.append(f"todo injector failed: {exc}")
        cap = int(self.context_window * self.config.task_max_fraction) * 4
        return build_compaction_message(
            anchors, summary, task=task, task_max_bytes=cap, references=refs, active_tasks=active
        )

    def _stats(self, result: SummaryResult, latency_ms: float) -> SummarizerStats:
        usage = result.usage
        return SummarizerStats(
            model=result.model,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            latency_ms=latency_ms,
        )

    def _extract_memory(self, msgs: list[Message]) -> None:
        if self.memory_extractor is None:
            return
        try:
            self.memory_extractor.extract(msgs)
        except Exception:
            log.warning("memory extraction failed; continuing", exc_info=True)

    def _offload_range(self, work: _Work, start: int, stop: int) -> None:
        if self.offloader is None:
            return
        names = {tc.id: tc.name for m in work.view for tc in m.tool_calls}
        for i in range(start, stop):
            msg = work.view[i]
            if not msg.is_tool_result:
                continue
            try:
                done = self.offloader.offload(
                    msg,
                    threshold=self.config.offload_threshold,
                    preview_lines=self.config.preview_lines,
                    preview_chars=self.config.preview_chars,
                    tool_name=names.get(msg.tool_call_id or "", ""),
                )
            except OffloadError as exc:
                work.errors.append(str(exc))
                continue
            if done is not None:
                work.offloaded.append(done[0])
                work.view[i] = done[1]

    def _llm_fallback(self, work: _Work, reason: str) -> None:
        """Trim below Warn, keeping system, task, offloads already made and the newest messages."""
        work.errors.append(reason)
        if work.trigger == "manual":
            self._emergency(work)  # a manual /compact that cannot summarise truncates instead
            return
        work.fallback.append("budget_trim")
        self._truncate(work, self.config.fallback_target)

    def _emergency(self, work: _Work) -> None:
        work.errors.append("emergency fallback: forced truncation")
        work.fallback.append("emergency")
        self._offload_range(work, 0, len(work.view))
        self._truncate(work, self.config.emergency_target)
        work.tier = CompactionTier.EMERGENCY
        ratio = self._ratio(work.view)
        if ratio > self.config.emergency_target:
            work.errors.append(
                f"still at {ratio:.0%} of the window after truncation: the system prompt, the "
                "task, the newest exchange and any reserved or calibrated overhead alone exceed "
                f"the {self.config.emergency_target:.0%} target; this window is too small for "
                "this agent"
            )

    def _truncate(self, work: _Work, target: float) -> None:
        cut = self.fallback.truncate(work.view, target)
        work.offloaded += cut.offloaded
        work.errors += cut.errors
        work.extra["dropped"] = work.extra.get("dropped", []) + [
            d.model_copy(update={"index": work.sources[d.index]})
            for d in cut.dropped
            if work.sources[d.index] is not None
        ]
        sources = [work.sources[i] if i is not None else None for i in cut.sources]
        work.extra["preserved"] = sum(
            1
            for m, src in zip(cut.messages, sources, strict=True)
            if src is not None and m.role != "system" and m == work.inputs[src]
        )
        work.sources = sources
        work.view = cut.messages

    def _ratio(self, msgs: Sequence[Message]) -> float:
        return context_ratio(self.tokens(msgs), self.context_window, self.config.reserve_tokens)

    # ------------------------------------------------------------ the record

    def _outcome(self, work: _Work, *, effective: bool = True) -> CompactionOutcome:
        tokens_after = self.tokens(work.view) if effective else work.tokens_before
        split = split_head_tail(work.view, self.config.min_tail_messages)
        preserved = work.extra.get("preserved", split.tail_len if effective else 0)
        record = CompactionRecord(
            session_id=self.session_id,
            tier=work.tier,
            tokens_before=work.tokens_before,
            tokens_after=tokens_after,
            msgs_before=len(work.inputs),
            msgs_after=len(work.view),
            anchors=work.extra.get("anchors", []),
            offloaded=work.offloaded,
            summarized=work.extra.get("n_summarized", 0),
            preserved_tail=preserved,
            summary_text=work.extra.get("summary", ""),
            compression_ratio=compression_ratio(work.tokens_before, tokens_after),
            duration=time.perf_counter_ns() - work.t0,
            error="; ".join(work.errors),
            trigger=work.trigger,
            effective=effective,
            context_window=self.context_window,
            fallback=" + ".join(work.fallback),
            repairs=work.repairs,
            dropped=work.extra.get("dropped", []),
            summarizer=work.extra.get("stats"),
            estimator=self.estimator.name,
            config_hash=self.config.config_hash(),
        )
        if not effective:
            work.view, work.sources = list(work.inputs), list(range(len(work.inputs)))
        return CompactionOutcome(
            view=work.view,
            record=record,
            sources=work.sources,
            inputs=work.inputs,
            summarized_positions=work.summarized,
        )

    def _finish(self, outcome: CompactionOutcome, emit: bool) -> CompactionOutcome:
        record = outcome.record
        if record.effective and record.tier != CompactionTier.NONE and self.record_store:
            try:
                self.record_store.append(record)
            except Exception:
                self.record_store_errors += 1
                log.warning("could not persist compaction record %s", record.id, exc_info=True)
        if emit and self.event_sink is not None and record.tier != CompactionTier.NONE:
            try:
                index = list(range(len(outcome.inputs)))
                payloads = [compaction_recorded(outcome, index, "full"), *offload_events(record)]
                for payload in payloads:
                    self.event_sink.emit(self._events.make(payload))
                self.event_sink.flush()
            except Exception:
                log.warning("event sink failed for record %s", record.id, exc_info=True)
        return outcome
