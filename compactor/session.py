"""CompactionSession: the agent-loop integration (full history, checkpointed view, events).

The session holds the full, append-only ``history`` (what the user persists) and derives the
view sent to the model each turn: ``[system, *checkpoint prefix, *history after the checkpoint]``.
After every effective compaction the prefix becomes the compacted view, so the ratio falls, the
next summary is incremental over the new messages only, and a turn costs time in proportion to
the view, not to the history. It never mutates the history and never raises from recording.
An exchange whose tool calls are still open is compacted with the rest of the view (so no view
exceeds the window because of it), with a stand-in for each result still to come; it is never
checkpointed: what the compaction made of it (a result offloaded, arguments cut) is kept as how
those history messages are shown, and the real results, once appended, join their call.
With ``CompactorConfig.tool_offload_threshold`` set, large tool results are offloaded as they
are appended (the history keeps the placeholder; the file keeps the full text).
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from compactor.errors import ResumeMismatchError, SessionInUseError
from compactor.events import (
    Capture,
    SessionDeleted,
    SessionStarted,
    UsageReported,
    ViewPrepared,
    compaction_recorded,
    message_appended,
    offload_events,
    sha256_of,
    tool_time_offloaded,
)
from compactor.messages import Message
from compactor.pipeline._cache_bill import OffloadBill, offload_bill
from compactor.pipeline._outcome import CompactionOutcome
from compactor.pipeline._tiers import context_ratio
from compactor.pipeline._tooltime import ToolTimeOffload
from compactor.pipeline._work import Trigger, untouched_record
from compactor.pipeline.pairs import (
    ExchangeTracker,
    missing_results,
    repair_orphaned_tool_pairs,
    repair_with_report,
)
from compactor.pipeline.progressive import ProgressiveCompactor
from compactor.records import CompactionRecord, CompactionTier, OffloadEntry
from compactor.tokens import MAX_REPORTED_TOKENS, message_bytes, raw_tokens, token_count
from compactor.writing._encoding import scrub
from compactor.writing._recording import (
    SessionRecorder,
    claim_session,
    next_seq_of,
    recorded_messages,
)
from compactor.writing.sinks import EventSink


class CompactionSession:
    """One agent conversation: ``prepare()`` before each LLM call, ``append()`` every message.

    It compacts with the compactor it is given, bound to this session's id and capture (so the
    caller's ``compactor.state`` is this session's). A compactor that another open session uses
    under another id or capture is refused (``CompactorInUseError``): give each concurrent
    session ``compactor.for_session(session_id)``; ``close()`` frees a compactor for the next.
    ``clock`` dates its events (default: now); a replay passes the transcript's times, so the
    gaps between its turns (what decides whether the provider's prompt cache had expired) are
    the original session's.
    """

    def __init__(
        self,
        compactor: ProgressiveCompactor,
        system_prompt: str | Message | None = None,
        *,
        session_id: str | None = None,
        event_sink: EventSink | None = None,
        capture: Capture = "full",
        model: str = "",
        agent: str = "",
        parent_session_id: str | None = None,
        source: str = "live",
        metadata: dict[str, Any] | None = None,
        start_seq: int | None = None,
        resume: Sequence[Message] = (),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if resume and not session_id:
            raise ValueError(
                "resume= needs the session_id of the session it resumes: under a new id, the "
                "resumed messages would be recorded nowhere"
            )
        # an id is written in every event: scrubbed once here, it is the same id on the way
        # in (resume lookups) and on the way out (the spool)
        self.session_id = scrub(session_id) if session_id else str(uuid.uuid4())
        # the caller's compactor is the one that compacts (its state is this session's), bound
        # to this id and capture; refused if another open session needs it bound otherwise
        compactor.serve(self, self.session_id, capture)
        self.compactor = compactor
        self.event_sink = event_sink
        self.capture: Capture = capture
        self._hash_key = compactor.hash_key
        """Metadata capture: this session's hashes are keyed, so they join nothing outside it
        (one key, shared with its compactor)."""
        if isinstance(system_prompt, str):
            system_prompt = Message(role="system", content=system_prompt)
        self.system = system_prompt
        self.history: list[Message] = []
        self.records: list[CompactionRecord] = []
        self._tool_time = ToolTimeOffload(
            compactor.config, compactor.offloader, self.session_id, compactor.faults
        )
        self.noops_suppressed = 0
        self.usage_ignored = 0
        """Usage reports ignored because their counts were no token counts (``observe_usage``)."""
        self.resume_mismatches = 0
        """1 when the resumed history's newest recorded message did not hash as recorded."""
        self._unclaim: Callable[[], None] = _nothing
        if session_id:  # one writer per named session and spool, or seqs repeat
            try:
                release = claim_session(event_sink, self.session_id)
            except SessionInUseError:
                compactor.release(self)
                raise
            self._unclaim = weakref.finalize(self, release)
        if start_seq is None:  # only a named session can be a resumed one
            start_seq = (
                next_seq_of(event_sink, self.session_id, compactor.faults) if session_id else 0
            )
        self._clock: Callable[[], datetime] = clock or _now
        """When things happen: the events' ``occurred_at`` and the gaps between turns."""
        self._last_prepared: datetime | None = None
        """When ``prepare()`` last ran: the gap to the next says whether the cache expired."""
        self._recorder = SessionRecorder(
            event_sink, self.session_id, start_seq, compactor.faults, self._clock
        )
        """A session resumed in a new process (same id) continues its ``seq``: from
        ``start_seq``, else from what the sink already holds for this id."""
        self._turn = 0
        self._system_bytes = message_bytes(system_prompt) if system_prompt else 0
        self._prefix: list[Message] = []
        self._prefix_index: list[int | None] = []
        self._prefix_bytes = 0
        self._upto = 0
        self._shown: dict[int, Message] = {}
        """History messages after the checkpoint shown as a compaction left them (those of an
        exchange still open: never checkpointed, but not shown whole again either)."""
        self._new_bytes = 0
        self._last_noop: CompactionTier | Literal["held"] | None = None
        """The tier of the no-op streak in progress (or of held Warn offloads): one event per
        streak, not one per turn."""
        self.offloads_held = 0
        """Warn offloads held back because they would not pay against the cache
        (``CompactorConfig.cache_priced_offload``)."""
        self._settled: int | None = None
        """Tokens of the view the last summarising compaction left (None: none yet)."""
        self._grown_from: tuple[int, int] | None = None
        """(turn, bytes of its view) of the first view sent since the last effective
        compaction: how fast the view grows, to foresee when Soft fires."""
        self._last_view_bytes = 0
        self._pairs = ExchangeTracker()
        self.history_bytes = 0
        """UTF-8 bytes of the whole history as the estimator counts them (kept as it grows)."""
        self._resume(resume, self._started(model, agent, parent_session_id, source, metadata))

    def _resume(self, resume: Sequence[Message], started: Callable[[], SessionStarted]) -> None:
        """Take in the history an earlier process persisted, say the session started, and
        write again the resumed messages the sink lacks: the earlier process appended them,
        but their events were still buffered when it died."""
        sink, faults = self.event_sink, self.compactor.faults
        # asked before this process writes anything of the session
        recorded = recorded_messages(sink, self.session_id, faults) if resume else None
        for msg in resume:
            self._add(msg)
        if recorded is not None and recorded.messages > len(self.history):
            self.compactor.release(self)
            self._unclaim()
            raise ResumeMismatchError(
                f"session {self.session_id!r}: resume= holds {len(self.history)} messages but "
                f"the event sink already recorded {recorded.messages}: the next messages would "
                "take indices the store already holds for other content. Resume with the whole "
                "history the session had (session.history, persisted after each append), or "
                "start a new session_id"
            )
        self._recorder.emit(started)
        if recorded is None:
            return
        key, capture = self._hash_key, self.capture
        newest = recorded.messages - 1
        known = recorded.newest_sha256
        if newest >= 0 and known is not None and sha256_of(self.history[newest], key) != known:
            _LOG.warning(
                "session %r resumed: its message %d does not hash to what the event sink "
                "recorded for it: the history differs from the one recorded, or the "
                "compactor's hash_secret changed (metadata capture: hashes before and after "
                "this resume then join nothing); resume with the same history and secret",
                self.session_id,
                newest,
            )
            self.resume_mismatches += 1
        for index in range(recorded.messages, len(self.history)):
            msg = self.history[index]
            self._recorder.emit(lambda i=index, m=msg: message_appended(i, m, capture, key=key))  # type: ignore[misc]

    @property
    def sink_errors(self) -> int:
        """Events (or flushes) that could not be recorded; the agent was not told."""
        return self._recorder.errors

    @property
    def last_sink_error(self) -> str:
        return self._recorder.last_error

    def _started(
        self,
        model: str,
        agent: str,
        parent_session_id: str | None,
        source: str,
        metadata: dict[str, Any] | None,
    ) -> Callable[[], SessionStarted]:
        system, compactor, capture = self.system, self.compactor, self.capture
        return lambda: SessionStarted(
            context_window=compactor.context_window,
            config=compactor.config.recorded(),
            model=model,
            agent=agent,
            parent_session_id=parent_session_id,
            capture=capture,
            source=source,
            system_prompt_sha256=sha256_of(system, self._hash_key) if system else None,
            system_prompt=system.content if system and capture == "full" else None,
            metadata=_with_offload_root(metadata, compactor),
        )

    # ------------------------------------------------------------ history

    def append(self, msg: Message) -> None:
        """Add one message to the history (the view follows on the next ``prepare``). A tool
        result above ``tool_offload_threshold`` is offloaded first: the history keeps the
        placeholder."""
        name = self._pairs.open_calls.get(msg.tool_call_id or "", "")
        msg, entry = self._tool_time.apply(msg, name)
        index, n_bytes = self._add(msg)
        key, capture = self._hash_key, self.capture
        self._recorder.emit(lambda: message_appended(index, msg, capture, n_bytes=n_bytes, key=key))
        if entry is not None:
            self._recorder.emit(lambda: tool_time_offloaded(entry, key))

    @property
    def tool_offloads(self) -> list[OffloadEntry]:
        """Results offloaded as they were appended (``tool_offload_threshold``)."""
        return self._tool_time.entries

    @property
    def tool_offload_errors(self) -> int:
        """Appended results that could not be offloaded (kept whole in the history)."""
        return self._tool_time.errors

    def _add(self, msg: Message) -> tuple[int, int]:
        """The bookkeeping of one new history message: (its index, its size)."""
        index = len(self.history)
        self.history.append(msg)
        n_bytes = message_bytes(msg)
        self._new_bytes += n_bytes
        self.history_bytes += n_bytes
        self._pairs.add(msg, index)
        return index, n_bytes

    def extend(self, msgs: Iterable[Message]) -> None:
        for m in msgs:
            self.append(m)

    @property
    def checkpoint(self) -> int:
        """History index up to which the latest compaction covers the history."""
        return self._upto

    def view(self) -> list[Message]:
        """The current view without compacting: system, checkpoint prefix, newer history."""
        head = [self.system] if self.system is not None else []
        newer = self.history[self._upto :]
        if self._shown:
            newer = [self._shown.get(i, m) for i, m in enumerate(newer, start=self._upto)]
        return [*head, *self._prefix, *newer]

    def _view_index(self) -> list[int | None]:
        head: list[int | None] = [None] if self.system is not None else []
        return [*head, *self._prefix_index, *range(self._upto, len(self.history))]

    def tokens(self) -> int:
        """Estimated tokens of the current view (O(1): sizes are kept as messages arrive)."""
        n_bytes = self._system_bytes + self._prefix_bytes + self._new_bytes
        return self.compactor.estimator.tokens_for_bytes(n_bytes)

    # ------------------------------------------------------------ turns

    def prepare(self) -> tuple[list[Message], CompactionRecord]:
        """The view to send now, compacted if a tier fires, and the record (tier NONE if not)."""
        tokens = self.tokens()
        plan = self._decide(tokens)
        if not isinstance(plan, _Plan):
            return self._sent(plan, tokens)
        outcome = self.compactor.compact_detailed(
            plan.view, tier=plan.tier, tokens=plan.tokens, trigger=plan.trigger, emit=False
        )
        return self._sent((self._apply(outcome, plan), outcome.record), tokens)

    async def aprepare(self) -> tuple[list[Message], CompactionRecord]:
        """``prepare`` with an async summariser call (cancellable; nothing changes if cancelled)."""
        tokens = self.tokens()
        plan = self._decide(tokens)
        if not isinstance(plan, _Plan):
            return self._sent(plan, tokens)
        outcome = await self.compactor.acompact_detailed(
            plan.view, tier=plan.tier, tokens=plan.tokens, trigger=plan.trigger, emit=False
        )
        return self._sent((self._apply(outcome, plan), outcome.record), tokens)

    def _decide(self, tokens: int) -> _Plan | tuple[list[Message], CompactionRecord]:
        """This turn's compaction to run, or the view to send as it is (with its record).

        A tier's threshold makes a compaction due. ``cold_cache_compact``: below Soft, a turn
        that comes longer than ``cold_cache_ttl_s`` after the previous ``prepare()`` (its cache
        expired: the whole prompt is written again anyway) runs Soft at that fraction of the
        window already (trigger ``cold_cache``). ``cache_priced_offload``: a Warn offload that
        would not pay for itself against a warm cache is held (``_cache_bill``)."""
        compactor, config = self.compactor, self.compactor.config
        now = self._clock()
        before, self._last_prepared = self._last_prepared, now
        cold = before is not None and (now - before).total_seconds() > config.cold_cache_ttl_s
        tier = compactor.tier_for_tokens(tokens)
        if tier not in (CompactionTier.NONE, CompactionTier.WARN):
            return self._plan(tokens, None)
        if (
            config.cold_cache_compact is not None
            and cold
            and compactor.context_window > 0
            and context_ratio(tokens, compactor.context_window, config.reserve_tokens)
            >= config.cold_cache_compact
        ):
            return self._plan(tokens, CompactionTier.SOFT, "cold_cache")
        if tier == CompactionTier.NONE:
            return self._uncompacted(tokens)
        plan = self._plan(tokens, None)
        if config.cache_priced_offload and compactor.offloader is not None:
            bill = offload_bill(
                plan.view,
                config,
                compactor.estimator,
                cached_bytes=0 if cold else self._last_view_bytes,
                growth=self._growth(),
                tokens=tokens,
                window=compactor.context_window,
                settled=self._settled,
                session_id=self.session_id,
            )
            if bill is not None and not bill.pays:
                return self._held(tokens, bill)
        return plan

    def _view_bytes(self) -> int:
        return self._system_bytes + self._prefix_bytes + self._new_bytes

    def _growth(self) -> float | None:
        """Tokens the view gained per turn since the first view sent after the last effective
        compaction (None before one was sent), both ends counted by the estimator as it is
        now: a calibration learnt in between is no growth."""
        if self._grown_from is None:
            return None
        turn, start = self._grown_from
        estimator = self.compactor.estimator
        grown = estimator.tokens_for_bytes(self._view_bytes()) - estimator.tokens_for_bytes(start)
        return grown / (self._turn + 1 - turn)

    def _held(self, tokens: int, bill: OffloadBill) -> tuple[list[Message], CompactionRecord]:
        """The view sent as it is (repaired, as every view sent), with a Warn record that says
        why nothing was offloaded (recorded once per streak of held turns, as no-ops are)."""
        raw = self.view()
        view: list[Message] = raw
        sources: list[int | None] = list(range(len(raw)))
        if self._pairs.needs_repair:  # never send a broken exchange (as _uncompacted)
            repaired = repair_with_report(raw)
            view, sources = repaired.messages, list(repaired.sources)
        compactor = self.compactor
        untouched = untouched_record(
            self.session_id, tokens, len(view), compactor.context_window, compactor.estimator
        )
        record = untouched.model_copy(
            update={
                "tier": CompactionTier.WARN,
                "fallback": bill.words(),
                "config_hash": compactor.config.config_hash(),
            }
        )
        self.offloads_held += 1
        if self._last_noop != _HELD:
            self._last_noop = _HELD
            outcome = CompactionOutcome(view, record, sources, raw)
            self._record_compaction(outcome, self._view_index())
        return view, record

    def compact(self) -> CompactionRecord:
        """Manual ``/compact``: a forced Full summary, Emergency if the summariser fails."""
        plan = self._plan(self.tokens(), CompactionTier.FULL)
        outcome = self.compactor.compact_detailed(
            plan.view, tier=plan.tier, tokens=plan.tokens, trigger="manual", emit=False
        )
        self._apply(outcome, plan)
        return outcome.record

    def _plan(self, tokens: int, tier: CompactionTier | None, trigger: Trigger = "auto") -> _Plan:
        """What to compact: the whole view, and while an exchange is open a stand-in for each
        result still to come (so the compactor sees a valid exchange, sized as sent)."""
        view, index = self.view(), self._view_index()
        open_at = self._pairs.open_at
        if open_at is None:
            return _Plan(view, index, tokens, tier, None, trigger)
        stand_ins = missing_results(self._pairs.open_calls)
        n_bytes = self._system_bytes + self._prefix_bytes + self._new_bytes
        n_bytes += sum(message_bytes(m) for m in stand_ins)
        open_from = len(view) - (len(self.history) - open_at)
        return _Plan(
            [*view, *stand_ins],
            [*index, *[None] * len(stand_ins)],
            self.compactor.estimator.tokens_for_bytes(n_bytes),
            tier,
            open_from,
            trigger,
        )

    def _uncompacted(self, tokens: int) -> tuple[list[Message], CompactionRecord]:
        view = self.view()
        if self._pairs.needs_repair:
            view = repair_orphaned_tool_pairs(view)  # never send a broken exchange
        compactor = self.compactor
        record = untouched_record(
            self.session_id, tokens, len(view), compactor.context_window, compactor.estimator
        )
        return view, record

    def _sent(
        self, prepared: tuple[list[Message], CompactionRecord], tokens_before: int
    ) -> tuple[list[Message], CompactionRecord]:
        """Bookkeeping for the view about to be sent: its size (what usage reports describe,
        so calibration compares like with like) and a ``view_prepared`` event."""
        view, record = prepared
        self._last_view_bytes = self._view_bytes()
        self._turn += 1
        if self._grown_from is None:
            self._grown_from = (self._turn, self._last_view_bytes)
        estimator, config = self.compactor.estimator, self.compactor.config
        self._recorder.emit(
            lambda: ViewPrepared(
                turn=self._turn,
                tokens=self.tokens(),
                tokens_before=tokens_before,
                tier=int(record.tier),
                messages=len(view),
                history_messages=len(self.history),
                history_tokens=estimator.tokens_for_bytes(self._system_bytes + self.history_bytes),
                context_window=self.compactor.context_window,
                reserve_tokens=config.reserve_tokens,
            )
        )
        return view, record

    def _apply(self, outcome: CompactionOutcome, plan: _Plan) -> list[Message]:
        record = outcome.record
        key = record.tier
        if record.effective or key != self._last_noop:
            self._record_compaction(outcome, plan.index)
        else:
            self.noops_suppressed += 1
        if not record.effective:
            self._last_noop = key
            if self._pairs.needs_repair:  # never send a broken exchange
                return repair_orphaned_tool_pairs(outcome.view)
            return outcome.view
        self._last_noop = None
        self._grown_from = None
        if record.tier in (CompactionTier.SOFT, CompactionTier.FULL):
            self._settled = record.tokens_after
        self.records.append(record)
        self._checkpoint(outcome, plan)
        self._recorder.flush()
        return outcome.view

    def _checkpoint(self, outcome: CompactionOutcome, plan: _Plan) -> None:
        """Later views start from this compaction's view. An open exchange stays after the
        checkpoint, shown as the compaction left it; its stand-ins are dropped (the real
        results will follow)."""
        first = 1 if self.system is not None else 0
        opened = len(plan.view) if plan.open_from is None else plan.open_from
        body: list[Message] = []
        body_index: list[int | None] = []
        shown: dict[int, Message] = {}
        for msg, src in zip(outcome.view[first:], outcome.sources[first:], strict=True):
            at = plan.index[src] if src is not None else None
            if src is None or src < opened:
                body.append(msg)
                body_index.append(at)
            elif at is not None and msg != self.history[at]:
                shown[at] = msg  # part of the open exchange, changed (offloaded, cut)
        self._prefix, self._prefix_index = body, body_index
        self._prefix_bytes = sum(message_bytes(m) for m in body)
        self._upto = len(self.history) if self._pairs.open_at is None else self._pairs.open_at
        self._shown = shown
        self._new_bytes = sum(message_bytes(m) for m in self.view()[first + len(body) :])
        self._pairs.checkpointed(self._upto)

    def _record_compaction(self, outcome: CompactionOutcome, index: list[int | None]) -> None:
        record, capture, key = outcome.record, self.capture, self._hash_key
        self._recorder.emit_each(
            lambda: [
                compaction_recorded(outcome, index, capture, key),
                *offload_events(record, key),
            ]
        )

    # ------------------------------------------------------------ usage and lifecycle

    def observe_usage(
        self,
        *,
        input_tokens: int | float | None,
        output_tokens: int | float | None = 0,
        cache_read_tokens: int | float | None = 0,
        cache_creation_tokens: int | float | None = 0,
        model: str = "",
        prompt: Literal["view", "history"] = "view",
    ) -> None:
        """Provider-reported usage of the last call: calibrates the estimator, emits an event.

        ``prompt="view"`` (live agents): the report is about the view the last ``prepare``
        returned, the one actually sent. ``prompt="history"``: it is about the whole uncompacted
        history, as when a replay feeds a transcript's usage, which describes what the original
        agent sent without compaction. A report whose counts are not token counts (None, NaN,
        infinite, negative, above ``MAX_REPORTED_TOKENS``) is ignored, counted in
        ``usage_ignored`` and logged once: odd usage from a provider never stops the agent.
        """
        counts = [
            token_count(v)
            for v in (input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens)
        ]
        if any(c is None for c in counts):
            self.usage_ignored += 1
            self.compactor.faults.note(
                "usage report ignored: its token counts must be whole numbers from 0 to "
                f"{MAX_REPORTED_TOKENS:,}",
                then="the estimator and the event store skip it",
            )
            return
        self._usage(*[c or 0 for c in counts], model=model, prompt=prompt)

    def _usage(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int,
        cache_creation_tokens: int,
        *,
        model: str,
        prompt: Literal["view", "history"],
    ) -> None:
        if prompt == "history":
            n_bytes = self._system_bytes + self.history_bytes
        else:
            n_bytes = self._last_view_bytes
        estimator = self.compactor.estimator
        reserve = self.compactor.config.reserve_tokens
        believed = estimator.tokens_for_bytes(n_bytes) + reserve
        raw = raw_tokens(estimator, n_bytes) + reserve
        observe = getattr(estimator, "observe", None)
        if callable(observe):
            observe(raw, input_tokens)
        self._recorder.emit(
            lambda: UsageReported(
                estimated_input_tokens=believed,
                raw_estimated_tokens=raw,
                prompt=prompt,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=cache_read_tokens,
                cache_creation_tokens=cache_creation_tokens,
                model=model,
                turn=self._turn or None,  # None: no view prepared yet
                history_messages=len(self.history),
            )
        )

    def delete(self) -> None:
        """Cascade GC: the offload folder, the record file, and a ``session_deleted`` event."""
        offloader = self.compactor.offloader
        store = self.compactor.record_store
        try:
            if offloader is not None:
                offloader.delete_session()
            delete = getattr(store, "delete", None)
            if callable(delete):
                delete(self.session_id)
        except OSError as exc:
            self.compactor.faults.report("session cleanup incomplete", exc)
        self._recorder.emit(lambda: SessionDeleted(reason="deleted by the user"))
        self._recorder.flush()
        self.compactor.release(self)
        self._unclaim()

    def close(self) -> None:
        """Flush the session's events, free its compactor for another session, and let
        another writer open this session id on the spool."""
        self._recorder.flush()
        self.compactor.release(self)
        self._unclaim()


_LOG = logging.getLogger(__name__)
_HELD: Literal["held"] = "held"


def _now() -> datetime:
    return datetime.now(UTC)


def _nothing() -> None:
    """What a session that holds no claim lets go of."""


@dataclass(frozen=True)
class _Plan:
    """One compaction to run: the view to compact (``tokens`` of it, ``tier`` forced or None
    to decide), the history index of each of its messages (None: system, synthetic, or a
    stand-in), and where the open exchange starts in it (None: no exchange is open)."""

    view: list[Message]
    index: list[int | None]
    tokens: int
    tier: CompactionTier | None
    open_from: int | None
    trigger: Trigger = "auto"


def _with_offload_root(
    metadata: dict[str, Any] | None, compactor: ProgressiveCompactor
) -> dict[str, Any]:
    """``metadata`` plus where this session's offload files live, so readers can find them."""
    out = dict(metadata or {})
    if compactor.offloader is not None and "offload_root" not in out:
        out["offload_root"] = str(compactor.offloader.work_dir.resolve())
    return out
