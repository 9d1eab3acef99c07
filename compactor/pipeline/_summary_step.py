"""The Soft/Full summarise step: offload, ask the summariser, and build the compaction message.

It runs over ``view[start:cut]`` of one ``Work``: memory extraction (fail-open), offloading,
one summariser request (yielded, so the caller decides sync or async), validation of the answer
(five N/A anchors and no summary, or no reduction, is a failure), the merge with the previous
compaction's anchors, and the new ``CompactionState``. The previous state and the task come
from the compactor's memory when the compaction message in the view is its own, and are parsed
from the message otherwise (a compactor restarted on a saved view). It never truncates: on
failure it notes why and returns False, and the compactor falls back.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from typing import Protocol

from compactor._truncation import truncate_middle
from compactor.config import CompactorConfig
from compactor.messages import Message
from compactor.pipeline._work import Work
from compactor.protocols import MemoryExtractor, TodoInjector
from compactor.records import SummarizerStats
from compactor.summaries._calls import SummaryRequest, SummaryResponse
from compactor.summaries._message import (
    CompactionState,
    find_task_index,
    offload_reference,
    parse_compaction_message,
    render_compaction_message,
)
from compactor.summaries.anchors import Anchor, all_na, merge_anchors, parse_anchors_and_summary
from compactor.summaries.summarize import SummaryResult
from compactor.tokens import TokenEstimator, task_cap_bytes
from compactor.writing._faults import FaultLog


class SummaryOwner(Protocol):
    """What the step needs of the compactor that runs it (``ProgressiveCompactor``)."""

    context_window: int
    config: CompactorConfig
    estimator: TokenEstimator
    state: CompactionState | None
    task: str
    memory_extractor: MemoryExtractor | None
    todo_injector: TodoInjector | None
    faults: FaultLog

    def tokens(self, msgs: Sequence[Message]) -> int: ...

    def offload_range(self, work: Work, start: int, stop: int) -> None: ...

    def known_state(self, carrier: Message) -> CompactionState | None: ...

    def commit_state(self, state: CompactionState, message: Message, task: str) -> None: ...


class SummaryStep:
    """One summarisation of ``work.view[start:cut]`` into a compaction message."""

    def __init__(self, owner: SummaryOwner, work: Work, start: int, cut: int) -> None:
        self.owner = owner
        self.work = work
        self.start = start
        self.cut = cut

    def run(self) -> Generator[SummaryRequest, SummaryResponse, bool | None]:
        """True: summarised; False: failed (noted on the work); None: nothing to summarise."""
        work, start, cut = self.work, self.start, self.cut
        part_sources = work.sources[start:cut]
        self._extract_memory(work.view[start:cut])
        self.owner.offload_range(work, start, cut)
        part = work.view[start:cut]
        states = [(m, parse_compaction_message(m)) for m in part]
        carriers = [(m, state) for m, state in states if state is not None]
        prior, task = self._prior(carriers)
        transcript = [m for m, s in states if s is None]
        positions = [p for (_m, s), p in zip(states, part_sources, strict=True) if s is None]
        folded = [p for (_m, s), p in zip(states, part_sources, strict=True) if s is not None]
        if not transcript:
            return None
        started = time.perf_counter_ns()
        response = yield SummaryRequest(transcript, prior.previous if prior else None)
        latency_ms = (time.perf_counter_ns() - started) / 1e6
        label = f"LLM summary failed in Tier{work.tier.label}"
        if isinstance(response, BaseException):
            cause = str(response) or type(response).__name__
            name = type(response).__name__
            work.fail(f"summarizer_failed:{name}", f"{label}: {name}: {cause}")
            return False
        work.stats = _stats(response, latency_ms)  # a call answered is billed, kept or not
        anchors, summary = parse_anchors_and_summary(response.text)
        if all_na(anchors) and not summary:
            excerpt = response.text.strip().replace("\n", " ")[:120]
            work.fail(
                "summary_empty",
                f"{label}: summary parsed to five N/A anchors and no summary (got {excerpt!r})",
            )
            return False
        state = self._state(prior, anchors, summary, task)
        message = render_compaction_message(state)
        view = [*work.view[:start], message, *work.view[cut:]]
        if self.owner.tokens(view) >= work.tokens_before:
            work.fail("summary_not_smaller", f"{label}: the summary did not reduce the context")
            return False
        self.owner.commit_state(state, message, task)
        work.view = view
        work.sources = [*work.sources[:start], None, *work.sources[cut:]]
        # the previous compaction message is folded into the new one (its state is merged):
        # in a diff it is "summarized", not "dropped"
        work.summarized.update(p for p in [*positions, *folded] if p is not None)
        work.anchors, work.summary = state.anchors, summary
        work.n_summarized = len(transcript)
        work.preserved = len(view) - start - 1
        return True

    def _prior(
        self, carriers: list[tuple[Message, CompactionState]]
    ) -> tuple[CompactionState | None, str]:
        """The previous compaction's state and the full task text."""
        if carriers:
            message, parsed = carriers[-1]
            own = self.owner.known_state(message)
            if own is not None:
                return own, self.owner.task
            return parsed, parsed.task
        idx = find_task_index(self.work.inputs)
        task = self.work.inputs[idx].content if idx is not None else self.owner.task
        return self.owner.state, task

    def _state(
        self, prior: CompactionState | None, anchors: list[Anchor], summary: str, task: str
    ) -> CompactionState:
        merged = merge_anchors(prior.anchors if prior else None, anchors)
        refs = list(prior.references) if prior else []
        refs += [offload_reference(e) for e in self.work.offloaded]
        owner = self.owner
        cap = task_cap_bytes(owner.estimator, owner.context_window, owner.config.task_max_fraction)
        carried = truncate_middle(task, cap)
        return CompactionState(
            anchors=merged,
            summary=summary,
            task=carried,
            references=refs,
            active_tasks=self._active_tasks(),
        )

    def _active_tasks(self) -> str:
        injector = self.owner.todo_injector
        if injector is None:
            return ""
        try:
            return injector.active_tasks().strip()
        except Exception as exc:
            self.work.fail("todo_injector_failed", f"todo injector failed: {exc}")
            return ""

    def _extract_memory(self, msgs: list[Message]) -> None:
        extractor = self.owner.memory_extractor
        if extractor is None:
            return
        try:
            extractor.extract(msgs)
        except Exception as exc:
            self.owner.faults.report("memory extraction failed", exc, then="compacting anyway")


def _stats(result: SummaryResult, latency_ms: float) -> SummarizerStats:
    usage = result.usage
    return SummarizerStats(
        model=result.model,
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        latency_ms=latency_ms,
    )
