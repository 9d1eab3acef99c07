"""CompactionSession: the agent-loop integration (full history, checkpointed view, events).

The session holds the full, append-only ``history`` (what the user persists) and derives the
view sent to the model each turn: ``[system, *checkpoint prefix, *history after the checkpoint]``.
After every effective compaction the prefix becomes the compacted view, so the ratio falls, the
next summary is incremental over the new messages only, and a turn costs time in proportion to
the view, not to the history. It never mutates the history and never raises from recording.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from compactor.encoding import scrub
from compactor.events import (
    Capture,
    EventFactory,
    SessionDeleted,
    SessionStarted,
    UsageReported,
    ViewPrepared,
    compaction_recorded,
    message_appended,
    offload_events,
    sha256_of,
)
from compactor.messages import Message
from compactor.outcome import CompactionOutcome
from compactor.pairs import repair_orphaned_tool_pairs
from compactor.progressive import ProgressiveCompactor
from compactor.records import CompactionRecord, CompactionTier, compression_ratio
from compactor.sinks import EventSink
from compactor.tokens import TokenEstimator, message_bytes

log = logging.getLogger(__name__)


class CompactionSession:
    """One agent conversation: ``prepare()`` before each LLM call, ``append()`` every message."""

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
    ) -> None:
        if resume and not session_id:
            raise ValueError(
                "resume= needs the session_id of the session it resumes: under a new id, the "
                "resumed messages would be recorded nowhere"
            )
        # an id is written in every event: scrubbed once here, it is the same id on the way
        # in (resume lookups) and on the way out (the spool)
        self.session_id = scrub(session_id) if session_id else str(uuid.uuid4())
        if compactor.session_id != self.session_id or compactor.capture != capture:
            compactor = compactor.for_session(self.session_id, capture=capture)
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
        self.sink_errors = 0
        self.last_sink_error = ""
        self.noops_suppressed = 0
        if start_seq is None:  # only a named session can be a resumed one
            start_seq = _next_seq(event_sink, self.session_id) if session_id else 0
        self._events = EventFactory(self.session_id, start_seq=start_seq)
        """A session resumed in a new process (same id) continues its ``seq``: from
        ``start_seq``, else from what the sink already holds for this id."""
        self._turn = 0
        self._system_bytes = message_bytes(system_prompt) if system_prompt else 0
        self._prefix: list[Message] = []
        self._prefix_index: list[int | None] = []
        self._prefix_bytes = 0
        self._upto = 0
        self._new_bytes = 0
        self._last_noop: CompactionTier | None = None
        """The tier of the no-op streak in progress: one event per streak, not one per turn."""
        self._last_view_bytes = 0
        self._open_calls: set[str] = set()
        self._needs_repair = False
        self.history_bytes = 0
        """UTF-8 bytes of the whole history as the estimator counts them (kept as it grows)."""
        for msg in resume:  # recorded by the earlier process already: no events
            self._add(msg)
        self._emit(
            SessionStarted(
                context_window=compactor.context_window,
                config=compactor.config.model_dump(),
                model=model,
                agent=agent,
                parent_session_id=parent_session_id,
                capture=capture,
                source=source,
                system_prompt_sha256=sha256_of(system_prompt, self._hash_key)
                if system_prompt
                else None,
                system_prompt=system_prompt.content
                if system_prompt and capture == "full"
                else None,
                metadata=_with_offload_root(metadata, compactor),
            )
        )

    # ------------------------------------------------------------ history

    def append(self, msg: Message) -> None:
        """Add one message to the history (the view follows on the next ``prepare``)."""
        index, n_bytes = self._add(msg)
        self._emit(message_appended(index, msg, self.capture, n_bytes=n_bytes, key=self._hash_key))

    def _add(self, msg: Message) -> tuple[int, int]:
        """The bookkeeping of one new history message: (its index, its size)."""
        index = len(self.history)
        self.history.append(msg)
        n_bytes = message_bytes(msg)
        self._new_bytes += n_bytes
        self.history_bytes += n_bytes
        self._track_pairs(msg)
        return index, n_bytes

    def _track_pairs(self, msg: Message) -> None:
        """O(1) bookkeeping of open tool calls, so that only a broken view pays for repair."""
        if msg.is_tool_result:
            if msg.tool_call_id in self._open_calls:
                self._open_calls.discard(msg.tool_call_id or "")
            else:
                self._needs_repair = True  # a result without its call
            return
        if self._open_calls:
            self._needs_repair = True  # a call was left without its result
            self._open_calls.clear()
        self._open_calls.update(tc.id for tc in msg.tool_calls)

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
        return [*head, *self._prefix, *self.history[self._upto :]]

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
        if self.compactor.tier_for_tokens(tokens) == CompactionTier.NONE:
            return self._sent(self._uncompacted(tokens), tokens)
        outcome = self.compactor.compact_detailed(self.view(), tokens=tokens, emit=False)
        return self._sent((self._apply(outcome), outcome.record), tokens)

    async def aprepare(self) -> tuple[list[Message], CompactionRecord]:
        """``prepare`` with an async summariser call (cancellable; nothing changes if cancelled)."""
        tokens = self.tokens()
        if self.compactor.tier_for_tokens(tokens) == CompactionTier.NONE:
            return self._sent(self._uncompacted(tokens), tokens)
        outcome = await self.compactor.acompact_detailed(self.view(), tokens=tokens, emit=False)
        return self._sent((self._apply(outcome), outcome.record), tokens)

    def compact(self) -> CompactionRecord:
        """Manual ``/compact``: a forced Full summary, Emergency if the summariser fails."""
        outcome = self.compactor.compact_detailed(
            self.view(), tier=CompactionTier.FULL, trigger="manual", emit=False
        )
        self._apply(outcome)
        return outcome.record

    def _uncompacted(self, tokens: int) -> tuple[list[Message], CompactionRecord]:
        view = self.view()
        if self._needs_repair or self._open_calls:
            view = repair_orphaned_tool_pairs(view)  # never send a broken exchange
        record = CompactionRecord(
            session_id=self.session_id,
            tier=CompactionTier.NONE,
            tokens_before=tokens,
            tokens_after=tokens,
            msgs_before=len(view),
            msgs_after=len(view),
            effective=False,
            compression_ratio=compression_ratio(tokens, tokens),
            context_window=self.compactor.context_window,
            estimator=self.compactor.estimator.name,
        )
        return view, record

    def _sent(
        self, prepared: tuple[list[Message], CompactionRecord], tokens_before: int
    ) -> tuple[list[Message], CompactionRecord]:
        """Bookkeeping for the view about to be sent: its size (what usage reports describe,
        so calibration compares like with like) and a ``view_prepared`` event."""
        view, record = prepared
        self._last_view_bytes = self._system_bytes + self._prefix_bytes + self._new_bytes
        self._turn += 1
        self._emit(
            ViewPrepared(
                turn=self._turn,
                tokens=self.tokens(),
                tokens_before=tokens_before,
                tier=int(record.tier),
                messages=len(view),
                history_messages=len(self.history),
                history_tokens=self.compactor.estimator.tokens_for_bytes(
                    self._system_bytes + self.history_bytes
                ),
                context_window=self.compactor.context_window,
                reserve_tokens=self.compactor.config.reserve_tokens,
            )
        )
        return view, record

    def _apply(self, outcome: CompactionOutcome) -> list[Message]:
        record = outcome.record
        index = self._view_index()
        key = record.tier
        if record.effective or key != self._last_noop:
            self._emit(compaction_recorded(outcome, index, self.capture, self._hash_key))
            for payload in offload_events(record, self._hash_key):
                self._emit(payload)
        else:
            self.noops_suppressed += 1
        if not record.effective:
            self._last_noop = key
            if self._needs_repair or self._open_calls:
                return repair_orphaned_tool_pairs(outcome.view)  # never send a broken exchange
            return outcome.view
        self._last_noop = None
        self.records.append(record)
        body = outcome.view[1:] if self.system is not None else list(outcome.view)
        sources = outcome.sources[1:] if self.system is not None else outcome.sources
        self._prefix = body
        self._prefix_index = [index[s] if s is not None else None for s in sources]
        self._prefix_bytes = sum(message_bytes(m) for m in body)
        self._upto = len(self.history)
        self._new_bytes = 0
        self._needs_repair = False
        self._open_calls.clear()
        self._flush()
        return outcome.view

    # ------------------------------------------------------------ usage and lifecycle

    def observe_usage(
        self,
        *,
        input_tokens: int,
        output_tokens: int = 0,
        cache_read_tokens: int = 0,
        cache_creation_tokens: int = 0,
        model: str = "",
        prompt: Literal["view", "history"] = "view",
    ) -> None:
        """Provider-reported usage of the last call: calibrates the estimator, emits an event.

        ``prompt="view"`` (live agents): the report is about the view the last ``prepare``
        returned, the one actually sent. ``prompt="history"``: it is about the whole uncompacted
        history, as when a replay feeds a transcript's usage, which describes what the original
        agent sent without compaction.
        """
        if prompt == "history":
            n_bytes = self._system_bytes + self.history_bytes
        else:
            n_bytes = self._last_view_bytes
        estimator = self.compactor.estimator
        reserve = self.compactor.config.reserve_tokens
        believed = estimator.tokens_for_bytes(n_bytes) + reserve
        raw = _raw_tokens(estimator, n_bytes) + reserve
        observe = getattr(estimator, "observe", None)
        if callable(observe):
            observe(raw, input_tokens)
        self._emit(
            UsageReported(
                estimated_input_tokens=believed,
                raw_estimated_tokens=raw,
                prompt=prompt,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=cache_read_tokens,
                cache_creation_tokens=cache_creation_tokens,
                model=model,
                turn=len(self.history),
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
            log.warning("session %s: cleanup incomplete: %s", self.session_id, exc)
        self._emit(SessionDeleted(reason="deleted by the user"))
        self._flush()

    def close(self) -> None:
        self._flush()

    def _emit(self, payload: Any) -> None:
        if self.event_sink is None:
            return
        try:
            self.event_sink.emit(self._events.make(payload))
        except Exception as exc:
            self.sink_errors += 1
            self.last_sink_error = f"{type(exc).__name__}: {exc}"
            log.warning("session %s: event not recorded: %s", self.session_id, exc)

    def _flush(self) -> None:
        if self.event_sink is None:
            return
        try:
            self.event_sink.flush()
        except Exception as exc:
            self.sink_errors += 1
            self.last_sink_error = f"{type(exc).__name__}: {exc}"


def _raw_tokens(estimator: TokenEstimator, n_bytes: int) -> int:
    """The uncalibrated estimate that calibrating estimators fit (their own base estimator)."""
    raw = getattr(estimator, "raw_tokens", None)
    return int(raw(n_bytes)) if callable(raw) else estimator.tokens_for_bytes(n_bytes)


def _next_seq(sink: EventSink | None, session_id: str) -> int:
    """The seq after the last one ``sink`` holds for ``session_id`` (0 for a new session)."""
    next_seq = getattr(sink, "next_seq", None)
    if not callable(next_seq):
        return 0
    try:
        return int(next_seq(session_id))
    except Exception as exc:  # a sink that cannot tell must not stop the agent
        log.warning("session %s: could not read its last seq: %s", session_id, exc)
        return 0


def _with_offload_root(
    metadata: dict[str, Any] | None, compactor: ProgressiveCompactor
) -> dict[str, Any]:
    """``metadata`` plus where this session's offload files live, so readers can find them."""
    out = dict(metadata or {})
    if compactor.offloader is not None and "offload_root" not in out:
        out["offload_root"] = str(compactor.offloader.work_dir.resolve())
    return out
