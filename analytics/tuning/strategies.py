"""Compaction strategies behind one interface, replayed turn by turn over an imported session.

A strategy turns a session into the view it would have sent before each assistant message
(``StrategyResult.turns``), plus what its summariser read and wrote, in the session's world
(``analytics.tuning.world``: by default the prompt sizes a calibrated replay has, as
``compactlens replay`` and a live agent count them; uncalibrated, bytes / 4).
``ProgressiveStrategy`` is the product (``replay_session`` with the offline
``ExtractiveSummarizer``, the very path ``replay`` takes); ``NoCompaction`` is the baseline of
hard truncation at the window. The other rivals live in ``analytics.tuning.rivals``. Nothing
here measures (``analytics.tuning.metrics`` does) or writes outside a temporary folder.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from analytics.importers import ImportedSession
from analytics.replay.driver import replay_session
from analytics.tuning.world import (
    ReplayEvents,
    SessionWorld,
    agent_session,
    call_times,
    replay_session_id,
    session_world,
)
from compactor import (
    Anchor,
    CompactionOffloader,
    CompactionRecord,
    CompactionTier,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    PreviousCompaction,
    ProgressiveCompactor,
    Summarizer,
    SummaryResult,
    TokenUsage,
    estimate_tokens,
)


@dataclass(frozen=True)
class TurnView:
    """The view a strategy sent before the assistant message at ``index`` of the session."""

    index: int
    view: list[Message]
    emergency: bool = False
    """Messages were dropped without being summarised (a forced truncation) this turn."""
    tokens: int | None = None
    """The view's tokens as the replay counted them (None: count it in the result's world)."""
    history_tokens: int | None = None
    """The uncompacted history's tokens as the replay counted them (None: likewise)."""


@dataclass
class StrategyResult:
    """Every view of one session under one strategy, and what its summariser cost."""

    history: list[Message]
    """The session's messages after the system message, as the transcript has them."""
    system: Message | None
    turns: list[TurnView] = field(default_factory=list)
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    summaries: list[list[Anchor]] = field(default_factory=list)
    """The anchors of each summary, in order (for anchor retention)."""
    world: SessionWorld = field(default_factory=SessionWorld)
    """How the session's prompts are counted and priced (``analytics.tuning.world``)."""


@runtime_checkable
class Strategy(Protocol):
    """One way of keeping a context under a window, in the session's world: calibrated on the
    transcript's usage (the default, as ``replay``) or bytes / 4 (``calibrate=False``)."""

    @property
    def name(self) -> str: ...

    def run(
        self, session: ImportedSession, window: int, *, calibrate: bool = True
    ) -> StrategyResult: ...


class MeteredSummarizer:
    """A summariser counting what an LLM summariser would have read and written.

    The ``ExtractiveSummarizer`` reports those figures as its own usage (input: the transcript
    plus the previous compaction it merges into; output: the text written; both with
    ``estimate_tokens``), and they are counted as reported, so a replay's records bill what the
    lab bills; for an ``inner`` that reports none (tests use a fixed text) the same estimate is
    made here, so every strategy's summaries cost the same.
    """

    def __init__(self, inner: Summarizer | None = None) -> None:
        self._inner = inner or ExtractiveSummarizer()
        self.input_tokens = 0
        self.output_tokens = 0

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        result = self._inner.summarize(transcript, previous)
        usage = result.usage
        if usage is None:
            read = estimate_tokens(transcript)
            if previous is not None:
                read += estimate_tokens([Message(role="user", content=previous.render())])
            wrote = estimate_tokens([Message(role="assistant", content=result.text)])
            usage = TokenUsage(input_tokens=read, output_tokens=wrote)
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        return SummaryResult(text=result.text, usage=usage, model=result.model)


COMPACTION_MARK = "[Context Compaction]"
"""How a compaction message starts (SPEC 3.2)."""


def split_system(session: ImportedSession) -> tuple[Message | None, list[Message]]:
    msgs = session.messages
    if msgs and msgs[0].role == "system":
        return msgs[0], list(msgs[1:])
    return None, list(msgs)


def turn_indices(history: Sequence[Message]) -> list[int]:
    """History indices of the assistant messages: the points where the agent called the model."""
    return [i for i, m in enumerate(history) if m.role == "assistant"]


def task_index(history: Sequence[Message]) -> int | None:
    """The task (SPEC 3.3a.2): the first user message that is not a tool result and not a
    compaction message, or None."""
    for i, m in enumerate(history):
        if (
            m.role == "user"
            and m.tool_call_id is None
            and not m.content.startswith(COMPACTION_MARK)
        ):
            return i
    return None


def view_bytes(msgs: Sequence[Message]) -> int:
    """The bytes ``estimate_tokens`` counts (so ``bytes // 4`` is the estimate)."""
    total = 0
    for m in msgs:
        total += len(m.content.encode("utf-8", "surrogatepass"))
        for tc in m.tool_calls:
            total += len(f"{tc.id}{tc.name}{tc.arguments}".encode("utf-8", "surrogatepass"))
        if m.tool_call_id:
            total += len(m.tool_call_id.encode("utf-8", "surrogatepass"))
    return total


def tail_start(msgs: Sequence[Message], keep: int) -> int:
    """Start of the newest ``keep`` messages, moved back so it is not a tool result."""
    start = max(len(msgs) - keep, 0)
    while 0 < start < len(msgs) and msgs[start].is_tool_result:
        start -= 1
    return start


def fitting_suffix(msgs: Sequence[Message], budget_bytes: int) -> int:
    """Start of the longest suffix of ``msgs`` within ``budget_bytes`` that does not begin with
    a tool result (``len(msgs)`` when nothing fits): dropping the oldest, pair-safely."""
    best = len(msgs)
    used = 0
    for start in range(len(msgs) - 1, -1, -1):
        used += view_bytes([msgs[start]])
        if used > budget_bytes:
            break
        if not msgs[start].is_tool_result:
            best = start
    return best


def window_bytes(window: int) -> int:
    """The largest byte count whose estimate (``bytes // 4``) is still within ``window``."""
    return 4 * window + 3


def truncate_to_window(
    base: list[Message], rest: Sequence[Message], limit_bytes: int
) -> tuple[list[Message], bool]:
    """``base`` plus the newest of ``rest`` within ``limit_bytes`` (the window's bytes in the
    turn's world), pair-safe; True if any dropped."""
    if view_bytes(base) + view_bytes(rest) <= limit_bytes:
        return [*base, *rest], False
    start = fitting_suffix(rest, limit_bytes - view_bytes(base))
    return [*base, *rest[start:]], True


@dataclass(frozen=True)
class NoCompaction:
    """No compaction; when the view exceeds the window, the oldest messages are dropped
    (pair-safe) until it fits. The system message and the task are always kept."""

    @property
    def name(self) -> str:
        return "no-compaction"

    def run(
        self, session: ImportedSession, window: int, *, calibrate: bool = True
    ) -> StrategyResult:
        """Each turn's view is ``truncate_to_window`` of what came before, measured with the
        running sums of message sizes: time linear in the history, not quadratic."""
        system, history = split_system(session)
        world = session_world(session, calibrate=calibrate)
        result = StrategyResult(history=history, system=system, world=world)
        task = task_index(history)
        head = [system] if system is not None else []
        sizes = [view_bytes([m]) for m in history]
        before = list(itertools.accumulate(sizes, initial=0))  # before[i]: bytes of history[:i]
        head_bytes = view_bytes(head)
        for turn, i in enumerate(turn_indices(history)):
            limit = world.window_bytes(turn, window)
            view, dropped = [*head, *history[:i]], False
            if head_bytes + before[i] > limit:
                base, first, base_bytes = head, 0, head_bytes
                if task is not None and task < i:  # the task stays, what precedes it goes
                    base, first = [*head, history[task]], task + 1
                    base_bytes += sizes[task]
                if base_bytes + before[i] - before[first] <= limit:
                    view = [*base, *history[first:i]]
                else:  # the longest suffix within the budget, moved on past tool results
                    start = bisect.bisect_left(before, before[i] - (limit - base_bytes), first, i)
                    while start < i and history[start].is_tool_result:
                        start += 1
                    view, dropped = [*base, *history[start:i]], True
            result.turns.append(TurnView(index=i, view=view, emergency=dropped))
        return result


def scratch_dir() -> str | None:
    """Where a replay's offload files go (deleted when it ends): ``/dev/shm`` where it exists,
    since the offloader fsyncs every file and a memory file system makes that free (about 5x
    faster replays with offloading); else the system temporary folder."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


_NAMED_FIELDS = {"warn", "soft", "full", "min_tail_messages", "offload_threshold"}


def fallback_for(warn: float) -> float:
    """The ``fallback_target`` a grid or search config takes when it names none: the library
    default, unless that is not below ``warn`` (it must be); then 80% of ``warn``."""
    default = float(CompactorConfig.model_fields["fallback_target"].default)
    return default if default < warn else round(0.8 * warn, 4)


@dataclass(frozen=True)
class ProgressiveStrategy:
    """The ``ProgressiveCompactor`` with ``config`` through ``CompactionSession``.

    Tool-time offload is the config's ``tool_offload_threshold``: the session offloads each
    tool result above it as it is appended, as a live agent's session would (``history`` keeps
    the messages as the transcript has them; the views hold the placeholders).
    """

    config: CompactorConfig

    @property
    def name(self) -> str:
        c = self.config
        # every other field that differs from the defaults is named too: the name is the
        # trial's key, so two configs must never share one
        defaults = CompactorConfig().model_dump()
        derived_fallback = fallback_for(c.warn)
        extras = "".join(
            f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}"
            for k, v in c.model_dump().items()
            if k not in _NAMED_FIELDS
            and v != defaults[k]
            and not (k == "fallback_target" and v == derived_fallback)
        )
        return (
            f"progressive w{c.warn:g} s{c.soft:g} f{c.full:g} tail{c.min_tail_messages} "
            f"off{c.offload_threshold}{extras}"
        )

    def run(
        self, session: ImportedSession, window: int, *, calibrate: bool = True
    ) -> StrategyResult:
        """``replay_session`` as ``compactlens replay --config`` runs it, under the session id
        it would have (with ``calibrate`` the transcript's usage calibrates the estimator;
        without, it is dropped first, as ``--uncalibrated`` does); each turn's tokens are those
        of its ``view_prepared`` event, the figures the store sums."""
        system, history = split_system(session)
        result = StrategyResult(history=history, system=system)
        summarizer = MeteredSummarizer()
        events = ReplayEvents()
        sid = replay_session_id(session, window, self.config, calibrate)
        with tempfile.TemporaryDirectory(prefix="compactlens-tune-", dir=scratch_dir()) as work_dir:
            compactor = ProgressiveCompactor(
                summarizer,
                window,
                config=self.config,
                offloader=CompactionOffloader(work_dir, sid),
            )

            def on_view(i: int, view: list[Message], record: CompactionRecord) -> None:
                emergency = record.effective and record.tier == CompactionTier.EMERGENCY
                offset = 1 if system is not None else 0
                result.turns.append(TurnView(index=i - offset, view=view, emergency=emergency))
                if record.effective and record.summarizer is not None and record.anchors:
                    result.summaries.append(list(record.anchors))

            replay_session(
                agent_session(session, calibrate),
                compactor,
                event_sink=events,
                session_id=sid,
                on_view=on_view,
            )
        result.turns = [
            dataclasses.replace(turn, tokens=seen.tokens, history_tokens=seen.history_tokens)
            for turn, seen in zip(result.turns, events.views, strict=True)
        ]
        result.world = SessionWorld(
            calibration=events.calibration(),
            outputs=events.outputs(),
            call_at=call_times(session),
        )
        result.summarizer_input_tokens = summarizer.input_tokens
        result.summarizer_output_tokens = summarizer.output_tokens
        return result
