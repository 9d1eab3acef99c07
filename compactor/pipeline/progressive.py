"""ProgressiveCompactor: decide a tier, then offload, summarise or truncate, and record it.

The tiers (SPEC 3.2): Warn offloads large tool results in the head; Soft summarises the older
half of the head; Full the whole head; Emergency truncates without an LLM call. Every call
returns a new list (the input is never changed) and a ``CompactionRecord``. The sync and async
entry points share one pipeline, written as a generator that yields its one summariser request,
so both behave identically. The task, anchors and summary of the last compaction are state
(``CompactionState``), never re-read from text this compactor wrote. The summarise step lives in
``summary_step``, the record in ``work``; recording never raises into the agent loop.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Generator, Sequence

from compactor.config import CompactorConfig
from compactor.errors import CompactorInUseError, OffloadError
from compactor.events import (
    Capture,
    EventFactory,
    compaction_recorded,
    hash_key,
    offload_events,
    redact_record,
)
from compactor.messages import Message
from compactor.pipeline._outcome import CompactionOutcome
from compactor.pipeline._summary_step import SummaryStep
from compactor.pipeline._tiers import (
    Split,
    context_ratio,
    soft_midpoint,
    split_head_tail,
    tier_for_ratio,
)
from compactor.pipeline._work import (
    RecordContext,
    Trigger,
    Work,
    finish_outcome,
    preserved_verbatim,
)
from compactor.pipeline.fallback import TokenBudgetCompactor
from compactor.pipeline.offload import CompactionOffloader
from compactor.pipeline.pairs import repair_with_report
from compactor.protocols import MemoryExtractor, TodoInjector
from compactor.records import CompactionRecord, CompactionTier, RecordStore
from compactor.summaries._calls import (
    SummaryRequest,
    SummaryResponse,
    asummarize_with_timeout,
    summarize_with_timeout,
)
from compactor.summaries._message import (
    CompactionState,
    is_compaction_message,
    task_carrier_index,
)
from compactor.summaries.summarize import ChatModel, Summarizer, as_summarizer
from compactor.tokens import ByteEstimator, TokenEstimator, message_budget_tokens, message_bytes
from compactor.writing._faults import FaultLog
from compactor.writing.sinks import EventSink

log = logging.getLogger(__name__)

_Pipeline = Generator[SummaryRequest, SummaryResponse, CompactionOutcome]


class ProgressiveCompactor:
    """Tiered, pair-safe, non-destructive context compaction (SPEC 3).

    ``capture`` decides what the events it emits may hold: ``"full"`` or ``"metadata"`` (sizes,
    hashes, roles and fixed error codes only).
    """

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
        capture: Capture = "full",
        hash_secret: bytes | None = None,
    ) -> None:
        self.summarizer = as_summarizer(summarizer)
        self.context_window = context_window
        self.config = config or CompactorConfig()
        if not session_id and offloader is not None:
            session_id = offloader.session_id  # the offloader already names the session
        self.offloader = offloader
        self.record_store = record_store
        self.event_sink = event_sink
        self.memory_extractor = memory_extractor
        self.todo_injector = todo_injector
        self.estimator = estimator or ByteEstimator()
        self.hash_secret = hash_secret
        """Metadata capture: what this session's hash key is derived from (the offloader's
        work dir secret unless given; None: a random key, for this process only)."""
        self.fallback = fallback or TokenBudgetCompactor(
            context_window, config=self.config, estimator=self.estimator
        )
        self.record_store_errors = 0
        self.faults = FaultLog(log)
        """Failures this compactor (and its sessions) failed open on, by kind; each kind is
        logged once, by type and code, never with content."""
        self._serving: weakref.ref[object] | None = None
        self._bind(session_id, capture)

    def _bind(self, session_id: str, capture: Capture) -> None:
        """Bind to ``session_id`` with ``capture``: its offload folder, its hash key and event
        ids, and no summary state (a session never inherits another's summary)."""
        self.session_id = session_id
        self.capture: Capture = capture
        if self.offloader is not None and self.offloader.session_id != session_id:
            self.offloader = self.offloader.for_session(session_id)
        if self.hash_secret is None and capture == "metadata" and self.offloader is not None:
            self.hash_secret = self.offloader.hash_secret()
        self.hash_key = hash_key(capture, session_id, self.hash_secret)
        """The key of this session's hashes in metadata capture (None in full capture)."""
        self.fallback = self.fallback.rebind(estimator=self.estimator, offloader=self.offloader)
        self.state: CompactionState | None = None
        """What the last compaction message of this session says (None before the first)."""
        self.task = ""
        """The full task text of this session, once a compaction has seen it."""
        self._state_content = ""
        self._events = EventFactory(session_id)

    def serve(self, session: object, session_id: str, capture: Capture) -> None:
        """Become the compactor of ``session`` (a ``CompactionSession``), bound to its id and
        capture. Refused (``CompactorInUseError``) when that needs a rebinding while another
        session, still open, uses this compactor: the two would share paths and summary state."""
        current = self._serving() if self._serving is not None else None
        if (self.session_id, self.capture) != (session_id, capture):
            if current is not None and current is not session:
                raise CompactorInUseError(self.session_id, self.capture, session_id, capture)
            self._bind(session_id, capture)
        self._serving = weakref.ref(session)

    def release(self, session: object) -> None:
        """``session`` is closed: another session may have this compactor now."""
        if self._serving is not None and self._serving() is session:
            self._serving = None

    def for_session(
        self,
        session_id: str,
        *,
        estimator: TokenEstimator | None = None,
        capture: Capture | None = None,
    ) -> ProgressiveCompactor:
        """The same settings bound to another session: fresh summary state, its own paths
        (and, if given, its own estimator: calibration is per model and harness; its own
        capture)."""
        clone = ProgressiveCompactor(
            self.summarizer,
            self.context_window,
            config=self.config,
            offloader=self.offloader,
            record_store=self.record_store,
            event_sink=self.event_sink,
            session_id=session_id,
            memory_extractor=self.memory_extractor,
            todo_injector=self.todo_injector,
            fallback=self.fallback,
            estimator=estimator or self.estimator,
            capture=capture or self.capture,
            hash_secret=self.hash_secret,
        )
        clone.faults = self.faults  # one warning per kind for the whole family of sessions
        return clone

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
        """Emergency truncation now (the seed's ``CompactForce``). With ``context_window <= 0``
        there is no budget to truncate to: the input comes back unchanged (the record of
        ``compact_detailed`` says why, code ``no_context_window``)."""
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
            outcome: CompactionOutcome = stop.value
        # outside the handler: an error while finishing must not chain the StopIteration,
        # whose value (the whole view) a logged traceback would print
        return self._finish(outcome, emit)

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
            outcome: CompactionOutcome = stop.value
        return self._finish(outcome, emit)

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
        work = Work.start(msgs, tier, tokens_before, trigger)
        if tier == CompactionTier.NONE:
            return self._outcome(work, effective=False)
        if self.context_window <= 0:  # a forced tier: compact_force, a manual /compact
            work.fail(
                "no_context_window",
                f"context_window is {self.context_window}: with no window there is no budget "
                "to compact to, so the view is returned unchanged; give the compactor the "
                "model's context window",
            )
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
            return self._outcome(work, effective=False)
        if tier == CompactionTier.WARN:
            self.offload_range(work, split.head_start, split.tail_start)
            if not work.offloaded and not work.repairs:
                return self._outcome(work, effective=False)  # nothing left to offload
        else:
            cut = self._soft_cut(work, split) if tier == CompactionTier.SOFT else split.tail_start
            step = SummaryStep(self, work, split.head_start, cut)
            done = yield from step.run()
            if done is None:  # nothing new to summarise; offloads made on the way still count
                return self._outcome(work, effective=bool(work.fallback or work.offloaded))
            if not done:
                self._llm_fallback(work)
        # a fallback that ran Emergency already (a manual /compact) is not escalated again
        escalate = work.tier != CompactionTier.EMERGENCY
        if escalate and self._ratio(work.view) >= self.config.emergency:
            work.fallback.append("escalated to emergency")
            self._emergency(work)
        return self._outcome(work)

    def commit_state(self, state: CompactionState, message: Message, task: str) -> None:
        """Remember what the compaction message just built says (the summary step calls it)."""
        self.state, self._state_content, self.task = state, message.content, task

    def known_state(self, carrier: Message) -> CompactionState | None:
        """This compactor's own state when ``carrier`` is the message it built last."""
        return self.state if carrier.content == self._state_content else None

    def _soft_cut(self, work: Work, split: Split) -> int:
        """The Soft midpoint, widened to the whole head when the older half holds too little
        new content (little more than the last compaction message) for a summary to pay."""
        cut = soft_midpoint(work.view, split)
        fresh = [m for m in work.view[split.head_start : cut] if not is_compaction_message(m)]
        if self.tokens(fresh) < self.config.soft_min_gain * work.tokens_before:
            work.fallback.append("soft widened to the whole head")
            return split.tail_start
        return cut

    def offload_range(self, work: Work, start: int, stop: int) -> None:
        """Offload the large tool results of ``work.view[start:stop]`` (fail-open)."""
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
                work.fail("offload_failed", str(exc))
                continue
            if done is not None:
                work.offloaded.append(done[0])
                work.view[i] = done[1]

    def _llm_fallback(self, work: Work) -> None:
        """Trim below Warn, keeping system, task, offloads already made and the newest messages."""
        if work.trigger == "manual":
            self._emergency(work)  # a manual /compact that cannot summarise truncates instead
            return
        work.fallback.append("budget_trim")
        self._truncate(work, self.config.fallback_target)

    def _emergency(self, work: Work) -> None:
        work.fallback.append("emergency")
        self.offload_range(work, 0, len(work.view))
        self._truncate(work, self.config.emergency_target)
        work.tier = CompactionTier.EMERGENCY
        if work.dropped or work.cut:
            work.emergency = "truncation"
            work.fail("emergency_truncation", "emergency fallback: forced truncation")
        elif work.offloaded:
            work.emergency = "offload"
            work.fail("emergency_offload", "emergency fallback: offloaded, nothing dropped")
        ratio = self._ratio(work.view)
        if ratio > self.config.emergency_target:
            work.fail(
                "window_too_small",
                f"still at {ratio:.0%} of the window after truncation, above the "
                f"{self.config.emergency_target:.0%} target; what cannot be cut: "
                f"{self._irreducible(work.view)}; this window is too small for this agent",
            )

    def _irreducible(self, view: Sequence[Message]) -> str:
        """What an Emergency view still holds, part by part, in tokens: the figures a user
        needs to choose a larger window or a smaller prompt."""
        first = 1 if view and view[0].role == "system" else 0
        carrier = task_carrier_index(view)
        parts = {
            "system prompt": view[:first],
            "task": [view[carrier]] if carrier is not None else [],
        }
        parts["newest messages"] = [m for i, m in enumerate(view) if i >= first and i != carrier]
        est = self.estimator
        text = ", ".join(
            f"{name} {message_budget_tokens(est, sum(message_bytes(m) for m in msgs)):,} tokens"
            for name, msgs in parts.items()
        )
        return (
            f"{text} ({len(parts['newest messages'])} kept), reserve "
            f"{self.config.reserve_tokens:,} tokens, estimator overhead "
            f"{est.tokens_for_bytes(0):,} tokens, of a {self.context_window:,}-token window"
        )

    def _truncate(self, work: Work, target: float) -> None:
        cut = self.fallback.truncate(work.view, target)
        work.offloaded += cut.offloaded
        for error in cut.errors:
            work.fail("offload_failed", error)
        work.dropped += [
            d.model_copy(update={"index": work.sources[d.index]})
            for d in cut.dropped
            if work.sources[d.index] is not None
        ]
        work.cut += len(cut.truncated)
        sources = [work.sources[i] if i is not None else None for i in cut.sources]
        work.preserved = preserved_verbatim(cut.messages, sources, work.inputs)
        work.sources = sources
        work.view = cut.messages

    def _ratio(self, msgs: Sequence[Message]) -> float:
        return context_ratio(self.tokens(msgs), self.context_window, self.config.reserve_tokens)

    # ------------------------------------------------------------ the record

    def _outcome(self, work: Work, *, effective: bool = True) -> CompactionOutcome:
        ctx = RecordContext(
            session_id=self.session_id,
            context_window=self.context_window,
            estimator=self.estimator,
            config_hash=self.config.config_hash(),
        )
        tail = split_head_tail(work.view, self.config.min_tail_messages).tail_len
        return finish_outcome(work, ctx, self.tokens(work.view), tail, effective=effective)

    def _finish(self, outcome: CompactionOutcome, emit: bool) -> CompactionOutcome:
        record = outcome.record
        if record.effective and record.tier != CompactionTier.NONE and self.record_store:
            try:
                # metadata capture keeps content out of the record files as out of the events
                full = self.capture == "full"
                self.record_store.append(record if full else redact_record(record, self.hash_key))
            except Exception as exc:
                self.record_store_errors += 1
                self.faults.report("compaction record not persisted", exc)
        if emit and self.event_sink is not None and record.tier != CompactionTier.NONE:
            try:
                index = list(range(len(outcome.inputs)))
                payloads = [
                    compaction_recorded(outcome, index, self.capture, self.hash_key),
                    *offload_events(record, self.hash_key),
                ]
                for payload in payloads:
                    self.event_sink.emit(self._events.make(payload))
                self.event_sink.flush()
            except Exception as exc:
                self.faults.report("compaction event not recorded", exc)
        return outcome
