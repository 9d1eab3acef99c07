"""Figures of one strategy on one session, and their sums over many sessions.

``measure`` reads a ``StrategyResult``: tokens billed (the views, each counted in the session's
world as ``compactlens replay`` counts it: calibrated on the transcript's usage unless the run
is uncalibrated, then bytes / 4; plus what the summariser read and wrote), turns over the
window, emergencies, the peak ratio, artifact retention, anchor retention and invariant
violations (``validate_history`` on every view, and the task missing from a view).

Cost, as ``analytics.jobs.costs`` prices a replay: each turn's view is split into cache reads,
writes and uncached tokens by the price profile's rules (``analytics.jobs.cache_model``), in
the world's cost calibration (the session's fit over its usage reports): the cached prefix is
the leading messages the view shares with the previous turn's (the system message on the first
turn, warm from earlier sessions; the harness's hidden prompt always), each answer is billed as
output (the reported output tokens where the transcript has them), and each summariser call as
uncached input plus output. The profile is the one asked for, else the session's model's.

Artifact retention uses the artifacts job's definitions (``analytics.jobs.artifacts``: its path
pattern and its path and command argument keys) over the messages a strategy took out of the
context (summarised, dropped or replaced): paths and commands in their tool calls, paths in their
user/assistant text. Tool output is left out here, unlike the job, because a strategy that masks
tool output must not score by what it masked; an artifact is retained when its text is still
somewhere in the view that replaced it. Anchor retention is the analytics job's item-level
survival from each summary to the next (``analytics.jobs.retention``), over every anchor kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime

import polars as pl
from pydantic import BaseModel, ConfigDict

from analytics.importers import ImportedSession
from analytics.jobs.artifacts import COMMAND_KEYS, PATH_KEYS, PATH_PATTERN
from analytics.jobs.cache_model import (
    CacheSplit,
    cached_prefix,
    call_cost,
    split_cost,
    split_prompt,
)
from analytics.jobs.prices import PriceProfile, profile_for_model
from analytics.jobs.retention import anchor_survival, retention_detail
from analytics.tuning.strategies import StrategyResult, task_index, view_bytes
from compactor import Anchor, Message, validate_history

_PATH_RE = re.compile(PATH_PATTERN)
_WS_RE = re.compile(r"\s+")
_TASK_PROBE_CHARS = 100


class SessionMetrics(BaseModel):
    """One strategy on one session. ``wall_time_s`` is the only figure that is not reproducible."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    model: str = ""
    turns: int = 0
    view_tokens: int = 0
    uncompacted_tokens: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    turns_over_window: int = 0
    emergencies: int = 0
    peak_tokens: int = 0
    artifacts_at_risk: int = 0
    artifacts_kept: int = 0
    anchor_items_next: int = 0
    anchor_items_kept: int = 0
    violations: int = 0
    wall_time_s: float = 0.0
    profile: str = ""
    cost: float = 0.0
    """Turns and summariser calls, in the profile's currency (``analytics.jobs.prices``)."""
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    uncached_tokens: int = 0

    @property
    def tokens_billed(self) -> int:
        return self.view_tokens + self.summarizer_input_tokens + self.summarizer_output_tokens


def _normalise(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def message_artifacts(msg: Message) -> set[str]:
    """File paths and commands (whitespace folded) a message names."""
    found: set[str] = set()
    for tc in msg.tool_calls:
        try:
            args = json.loads(tc.arguments)
        except ValueError:
            args = None
        if isinstance(args, dict):
            for key in PATH_KEYS:
                if isinstance(args.get(key), str) and args[key].strip():
                    found.add(_normalise(args[key]))
            for key in COMMAND_KEYS:
                value = args.get(key)
                if isinstance(value, str) and value.strip():
                    found.add(_normalise(value))
        found.update(_PATH_RE.findall(tc.arguments[:4000]))
    if msg.role in ("user", "assistant") and not msg.is_tool_result:
        found.update(_PATH_RE.findall(msg.content[:20000]))
    return {a for a in found if a}


def _view_text(view: Sequence[Message]) -> str:
    parts: list[str] = []
    for m in view:
        parts.append(m.content)
        parts.extend(tc.arguments for tc in m.tool_calls)
    return _normalise("\n".join(parts))


def artifact_counts(result: StrategyResult) -> tuple[int, int]:
    """(artifacts at risk, artifacts kept) over every turn of ``result``.

    At each turn the strategy's input is its previous view plus the messages appended since;
    the messages of that input missing from the new view were taken out, and their artifacts
    are at risk; those whose text is in the new view were kept.
    """
    at_risk = kept = 0
    previous: list[Message] = [result.system] if result.system is not None else []
    upto = 0
    for turn in result.turns:
        incoming = [*previous, *result.history[upto : turn.index]]
        present = {id(m) for m in turn.view}
        artifacts: set[str] = set()
        for m in incoming:
            if id(m) not in present:
                artifacts |= message_artifacts(m)
        if artifacts:
            text = _view_text(turn.view)
            at_risk += len(artifacts)
            kept += sum(1 for a in artifacts if a in text)
        previous, upto = turn.view, turn.index
    return at_risk, kept


def anchor_counts(summaries: Sequence[Sequence[Anchor]]) -> tuple[int, int]:
    """(anchor items of a summary that has a next one, those kept or changed in the next)."""
    rows = [
        {
            "session_id": "s",
            "compaction_id": f"c{k}",
            "seq": k,
            "anchor_type": a.type.value,
            "position": p,
            "item": item,
        }
        for k, anchors in enumerate(summaries)
        for a in anchors
        for p, item in enumerate(a.items)
    ]
    if len(summaries) < 2 or not rows:
        return 0, 0
    survival = anchor_survival(retention_detail(pl.DataFrame(rows)))
    items = survival["items_next"].fill_null(0)
    share = survival["survival_next"].fill_null(0.0)
    return int(items.sum()), round(float((items * share).sum()))


def _task_present(view: Sequence[Message], task: Message) -> bool:
    if any(m is task for m in view):
        return True
    probe = task.content.strip()[:_TASK_PROBE_CHARS]
    return any(probe in m.content for m in view)


def violation_count(result: StrategyResult) -> int:
    """Turns with a broken tool exchange, plus turns whose view lacks the task."""
    task_at = task_index(result.history)
    count = 0
    for turn in result.turns:
        if validate_history(turn.view):
            count += 1
        task = result.history[task_at] if task_at is not None else None
        if task_at is not None and task_at < turn.index and task is not None:
            count += 0 if _task_present(turn.view, task) else 1
    return count


def view_tokens(result: StrategyResult) -> list[int]:
    """Each turn's view in the session's world (as the replay counted it, where it did)."""
    world = result.world
    return [
        t.tokens if t.tokens is not None else world.tokens(k, view_bytes(t.view))
        for k, t in enumerate(result.turns)
    ]


def uncompacted_tokens(result: StrategyResult, original: Sequence[Message]) -> int:
    """The views without any compaction, summed over the turns (in the session's world)."""
    head = view_bytes([result.system]) if result.system is not None else 0
    total = 0
    running, upto = head, 0
    for k, turn in enumerate(result.turns):
        running += view_bytes(original[upto : turn.index])
        upto = turn.index
        counted = turn.history_tokens
        total += counted if counted is not None else result.world.tokens(k, running)
    return total


def _shared(previous: Sequence[Message], view: Sequence[Message]) -> int:
    """How many leading messages ``view`` shares with ``previous`` (the same or equal)."""
    n = 0
    for a, b in zip(previous, view, strict=False):
        if a is not b and a != b:
            break
        n += 1
    return n


def cache_costs(result: StrategyResult, profile: PriceProfile) -> tuple[CacheSplit, float]:
    """The summed cache split of ``result``'s turns and their cost under ``profile``, the
    answers and the summariser's calls included (see the module text)."""
    read = write = uncached = 0
    cost = 0.0
    cal, outputs = result.world.calibration, result.world.outputs
    previous: list[Message] = [result.system] if result.system is not None else []
    before: datetime | None = None
    for k, turn in enumerate(result.turns):
        shared = _shared(previous, turn.view)
        # a first turn without a system message has nothing warm; later ones at least the
        # harness's hidden prompt, which leads every prompt (as the cost job has it)
        prefix = 0 if k == 0 and not shared else cal.tokens(view_bytes(turn.view[:shared]))
        at = result.world.call_at.get(turn.index)
        gap = (at - before).total_seconds() if at is not None and before is not None else None
        before = at
        warm = cached_prefix(profile, prefix, gap)  # none once the TTL passed: all of it cold
        split = split_prompt(profile, cal.tokens(view_bytes(turn.view)), warm)
        answer = result.history[turn.index] if turn.index < len(result.history) else None
        said = outputs.get(k + 1)
        output = (
            said if said is not None else cal.tokens_of_text(view_bytes([answer] if answer else []))
        )
        cost += split_cost(profile, split, output)
        read, write, uncached = read + split.read, write + split.write, uncached + split.uncached
        previous = turn.view
    summaries = call_cost(profile, result.summarizer_input_tokens, result.summarizer_output_tokens)
    return CacheSplit(read, write, uncached), cost + summaries


def measure(
    session: ImportedSession,
    result: StrategyResult,
    window: int,
    wall_time_s: float = 0.0,
    profile: PriceProfile | None = None,
) -> SessionMetrics:
    """Every figure of ``result`` (``session`` replayed under one strategy at ``window``),
    priced under ``profile`` (default: the session's model's)."""
    original = session.messages[1:] if result.system is not None else session.messages
    tokens = view_tokens(result)
    priced_as = profile or profile_for_model(session.model)
    split, cost = cache_costs(result, priced_as)
    at_risk, kept = artifact_counts(result)
    items_next, items_kept = anchor_counts(result.summaries)
    return SessionMetrics(
        session_id=session.session_id,
        model=session.model or "",
        turns=len(result.turns),
        view_tokens=sum(tokens),
        uncompacted_tokens=uncompacted_tokens(result, original),
        summarizer_input_tokens=result.summarizer_input_tokens,
        summarizer_output_tokens=result.summarizer_output_tokens,
        turns_over_window=sum(1 for t in tokens if t > window),
        emergencies=sum(1 for t in result.turns if t.emergency),
        peak_tokens=max(tokens, default=0),
        artifacts_at_risk=at_risk,
        artifacts_kept=kept,
        anchor_items_next=items_next,
        anchor_items_kept=items_kept,
        violations=violation_count(result),
        wall_time_s=wall_time_s,
        profile=priced_as.name,
        cost=cost,
        cache_read_tokens=split.read,
        cache_write_tokens=split.write,
        uncached_tokens=split.uncached,
    )


def totals(rows: Iterable[SessionMetrics], window: int) -> dict[str, float | int | None]:
    """The figures of many sessions: sums, the peak ratio, retention shares (SPEC 5.3 names).

    Artifact retention is 1.0 when nothing was at risk; anchor retention is None when no
    summary had a successor.
    """
    rows = list(rows)
    billed = sum(r.tokens_billed for r in rows)
    uncompacted = sum(r.uncompacted_tokens for r in rows)
    at_risk = sum(r.artifacts_at_risk for r in rows)
    items = sum(r.anchor_items_next for r in rows)
    return {
        "sessions": len(rows),
        "turns": sum(r.turns for r in rows),
        "tokens_billed": billed,
        "uncompacted_tokens": uncompacted,
        "saved_share": 1 - billed / uncompacted if uncompacted else 0.0,
        "summarizer_tokens": sum(
            r.summarizer_input_tokens + r.summarizer_output_tokens for r in rows
        ),
        "turns_over_window": sum(r.turns_over_window for r in rows),
        "emergencies": sum(r.emergencies for r in rows),
        "peak_ratio": max((r.peak_tokens for r in rows), default=0) / window if window else 0.0,
        "artifact_retention": sum(r.artifacts_kept for r in rows) / at_risk if at_risk else 1.0,
        "anchor_retention": sum(r.anchor_items_kept for r in rows) / items if items else None,
        "violations": sum(r.violations for r in rows),
        "wall_time_s": sum(r.wall_time_s for r in rows),
        "cost": sum(r.cost for r in rows),
        "cache_read_tokens": sum(r.cache_read_tokens for r in rows),
        "cache_write_tokens": sum(r.cache_write_tokens for r in rows),
        "uncached_tokens": sum(r.uncached_tokens for r in rows),
    }
