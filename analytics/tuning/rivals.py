"""The rival strategies other agents use, as baselines for the progressive compactor.

* ``ObservationMasking(m)``: the last ``m`` tool results verbatim, older ones replaced by a
  short placeholder (the JetBrains "Complexity Trap" baseline). No summariser, no window guard.
* ``ThresholdSummary(fraction)``: when the view exceeds ``fraction`` of the window, everything
  but the newest messages is summarised into one message (Claude Code's and Codex CLI's
  auto-compaction, at 83.5% and 90%).
* ``OpenHandsCondenser(max_events)``: keeps the first events; when the view holds more than
  ``max_events`` messages (or exceeds the window) the middle is summarised and the newest half
  kept (OpenHands' summarising condenser).

Summaries come from the same metered ``ExtractiveSummarizer`` as the progressive strategy, are
incremental over the previous summary, and keep the system message and the task verbatim. A
view still over the window after summarising is truncated pair-safely (an emergency). Sizes
are counted in the session's world (``analytics.tuning.world``), as the progressive strategy's
are: calibrated on the transcript's usage by default, so a threshold counts the harness's
hidden prompt as Claude Code's own does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from analytics.importers import ImportedSession
from analytics.tuning.strategies import (
    MeteredSummarizer,
    StrategyResult,
    TurnView,
    split_system,
    tail_start,
    task_index,
    truncate_to_window,
    turn_indices,
    view_bytes,
)
from analytics.tuning.world import SessionWorld, session_world
from compactor import (
    ExtractiveSummarizer,
    Message,
    PreviousCompaction,
    Summarizer,
    parse_anchors_and_summary,
)

MASK_PLACEHOLDER = "[old tool output omitted]"
SUMMARY_PREFIX = "[Context Summary]\n"


@dataclass(frozen=True)
class ObservationMasking:
    """Tool results older than the newest ``m`` are replaced by ``MASK_PLACEHOLDER``."""

    m: int = 10

    @property
    def name(self) -> str:
        return f"masking m{self.m}"

    def run(
        self, session: ImportedSession, window: int, *, calibrate: bool = True
    ) -> StrategyResult:
        system, history = split_system(session)
        world = session_world(session, calibrate=calibrate)
        result = StrategyResult(history=history, system=system, world=world)
        head = [system] if system is not None else []
        masked: dict[int, Message] = {}
        results = [i for i, msg in enumerate(history) if msg.is_tool_result]
        for i in turn_indices(history):
            seen = [r for r in results if r < i]
            old = set(seen[: max(len(seen) - self.m, 0)])
            for r in old:
                if r not in masked:
                    masked[r] = _masked(history[r])
            view = [masked[j] if j in old else msg for j, msg in enumerate(history[:i])]
            result.turns.append(TurnView(index=i, view=[*head, *view]))
        return result


def _masked(msg: Message) -> Message:
    return Message(
        role=msg.role,
        content=MASK_PLACEHOLDER,
        tool_call_id=msg.tool_call_id,
        name=msg.name,
        is_error=msg.is_error,
    )


@dataclass
class _Summaries:
    """The summary state a summarising rival carries from turn to turn."""

    upto: int
    """History index from which messages are still verbatim."""
    summarizer: MeteredSummarizer = field(default_factory=MeteredSummarizer)
    previous: PreviousCompaction | None = None
    message: Message | None = None

    def summarise(self, transcript: list[Message], result: StrategyResult) -> None:
        answer = self.summarizer.summarize(transcript, self.previous)
        anchors, summary = parse_anchors_and_summary(answer.text)
        self.previous = PreviousCompaction(anchors=anchors, summary=summary)
        self.message = Message(role="user", content=SUMMARY_PREFIX + answer.text)
        result.summaries.append(anchors)
        result.summarizer_input_tokens = self.summarizer.input_tokens
        result.summarizer_output_tokens = self.summarizer.output_tokens


def _first(history: Sequence[Message], keep_first: int) -> int:
    """End of the kept first messages: at least ``keep_first`` and the task, pair-safe."""
    task = task_index(history)
    end = max(keep_first, task + 1 if task is not None else 0)
    end = min(end, len(history))
    while end < len(history) and history[end].is_tool_result:
        end += 1
    return end


def _view(
    head: list[Message], history: Sequence[Message], first: int, state: _Summaries, i: int
) -> tuple[list[Message], list[Message]]:
    """(the kept first messages and the summary, the verbatim messages since) at turn ``i``."""
    base = [*head, *history[: min(first, i)]]
    if state.message is not None:
        base.append(state.message)
    return base, list(history[max(state.upto, first) : i])


def _fit(
    base: list[Message], rest: list[Message], world: SessionWorld, turn: int, window: int
) -> tuple[list[Message], bool]:
    return truncate_to_window(base, rest, world.window_bytes(turn, window))


@dataclass(frozen=True)
class ThresholdSummary:
    """A full summary of all but the newest ``keep_last`` messages when the view exceeds
    ``fraction`` of the window."""

    fraction: float = 0.835
    keep_last: int = 6
    summarizer: Callable[[], Summarizer] = ExtractiveSummarizer

    @property
    def name(self) -> str:
        return f"threshold {self.fraction:g}"

    def run(
        self, session: ImportedSession, window: int, *, calibrate: bool = True
    ) -> StrategyResult:
        system, history = split_system(session)
        world = session_world(session, calibrate=calibrate)
        result = StrategyResult(history=history, system=system, world=world)
        head = [system] if system is not None else []
        first = _first(history, 0)
        state = _Summaries(upto=first, summarizer=MeteredSummarizer(self.summarizer()))
        limit = self.fraction * window
        for turn, i in enumerate(turn_indices(history)):
            base, rest = _view(head, history, first, state, i)
            if world.tokens(turn, view_bytes([*base, *rest])) > limit:
                cut = max(state.upto, first) + tail_start(rest, self.keep_last)
                if cut > max(state.upto, first):
                    state.summarise(list(history[max(state.upto, first) : cut]), result)
                    state.upto = cut
                    base, rest = _view(head, history, first, state, i)
            view, dropped = _fit(base, rest, world, turn, window)
            result.turns.append(TurnView(index=i, view=view, emergency=dropped))
        return result


@dataclass(frozen=True)
class OpenHandsCondenser:
    """Keeps the first ``keep_first`` events (and the task); when the view holds more than
    ``max_events`` messages, or exceeds the window, the events between the first ones and the
    newest ``max_events // 2`` are summarised."""

    max_events: int = 100
    keep_first: int = 1
    summarizer: Callable[[], Summarizer] = ExtractiveSummarizer

    @property
    def name(self) -> str:
        return f"openhands n{self.max_events}"

    def run(
        self, session: ImportedSession, window: int, *, calibrate: bool = True
    ) -> StrategyResult:
        system, history = split_system(session)
        world = session_world(session, calibrate=calibrate)
        result = StrategyResult(history=history, system=system, world=world)
        head = [system] if system is not None else []
        first = _first(history, self.keep_first)
        state = _Summaries(upto=first, summarizer=MeteredSummarizer(self.summarizer()))
        for turn, i in enumerate(turn_indices(history)):
            limit = world.window_bytes(turn, window)
            base, rest = _view(head, history, first, state, i)
            events = len(base) - len(head) + len(rest)
            if events > self.max_events or view_bytes([*base, *rest]) > limit:
                start = max(state.upto, first)
                cut = start + tail_start(rest, self.max_events // 2)
                if cut > start:
                    state.summarise(list(history[start:cut]), result)
                    state.upto = cut
                    base, rest = _view(head, history, first, state, i)
            view, dropped = _fit(base, rest, world, turn, window)
            result.turns.append(TurnView(index=i, view=view, emergency=dropped))
        return result
