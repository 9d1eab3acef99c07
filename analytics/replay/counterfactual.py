"""Counterfactuals for emergency post-mortems: which config change would have avoided it?

The session's prefix, up to and including the emergency's turn, is replayed through
``analytics.replay.driver.replay_session`` (the very path ``compactlens replay`` takes) once as
it was (the baseline) and once per change of ``analytics.replay.changes``: a turn before every
assistant message, plus the emergency's own turn at the end. Where the session recorded the
provider's usage of the uncompacted prompt (a replay of a transcript), the same usage is fed
back turn by turn, so the estimator calibrates exactly as it did and the baseline reproduces the
emergency; otherwise the estimate is frozen at the one the emergency was decided with
(``FixedEstimator``).

A change *avoids* the emergency when its replay has no effective Emergency at that turn, adds
none where the baseline had none, and sends no view over the window at that turn. When the
baseline does not reproduce the emergency, no change is replayed and none is said to avoid it
(``emergency_avoided`` is null). The single changes are always replayed; steps and pairs only
until one avoids it, within ``MAX_REPLAYS``. The smallest avoiding change is then *verified*: the
whole session is replayed with its config, and ``smallest_change_verified`` is true only if that
turn has no emergency there either and none new comes before the session's own next one (an
emergency a turn later is the same one postponed). When none is verified, the smallest larger
window that avoids it is searched (``window_needed``). ``smallest_change_config`` is the whole
``CompactorConfig``, as ``replay --config`` loads it.

The summariser is the offline ``ExtractiveSummarizer`` unless one is passed. Offload files go to
a temporary folder, deleted after each replay; no events are recorded.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import ValidationError

from analytics.errors import AnalyticsError
from analytics.importers import ImportedSession, TurnUsage
from analytics.jobs.common import BYTES_PER_TOKEN
from analytics.replay.changes import TOOL_OFFLOAD_FIELD, Change, catalogue, lowered_threshold
from analytics.replay.driver import replay_session, summarizer_spec
from compactor import (
    CompactionOffloader,
    CompactionRecord,
    CompactionTier,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    OffloadHook,
    ProgressiveCompactor,
    Summarizer,
    TokenEstimator,
    ToolCall,
)

Search = Literal["full", "singles", "baseline"]
MAX_REPLAYS = 24
"""Replays per emergency at most, the baseline and the verification included (the search for
a larger window, when no change avoids it, comes on top: two replays per window at most)."""
WINDOW_FACTORS = (1.25, 1.5, 2.0, 3.0, 4.0)
"""The larger windows tried, as multiples of the session's, when no config change avoids an
emergency: the smallest that does is its ``window_needed``."""
_SESSION_ID = "counterfactual"
_METADATA_ONLY = "counterfactuals need content; this session was captured as metadata"


class CounterfactualError(AnalyticsError):
    """A session cannot be replayed (e.g. it was captured as metadata); the message says why."""


@dataclass(frozen=True)
class PrefixOutcome:
    """One replay: the turns with an effective Emergency, tokens billed, turns, and the
    largest view at the last turn (in the replay's own estimate)."""

    emergency_turns: frozenset[int]
    tokens_billed: int
    turns: int
    last_view_tokens: int = 0

    @property
    def emergency(self) -> bool:
        """An effective Emergency at the last turn (the emergency's own turn)."""
        return self.turns in self.emergency_turns


@dataclass(frozen=True)
class Trial:
    """One change and its replay (``None``: not replayed, the baseline did not reproduce)."""

    change: Change
    outcome: PrefixOutcome | None
    avoided: bool | None


@dataclass
class CounterfactualReport:
    """The baseline, each change tried (in catalogue order), the skipped ones, the smallest
    avoiding change and whether a replay of the whole session confirmed it."""

    summarizer: str
    baseline: PrefixOutcome
    trials: list[Trial] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    verified: bool | None = None
    replays: int = 1
    search: Search = "full"
    window_needed: int | None = None
    """When no change avoids it: the smallest of ``WINDOW_FACTORS`` times the window at which
    the session's own config avoids it, verified by replaying the whole session there."""

    @property
    def reproduced(self) -> bool:
        """The baseline replay reached Emergency at that turn too."""
        return self.baseline.emergency

    @property
    def smallest(self) -> Change | None:
        if not self.reproduced:
            return None
        return next((t.change for t in self.trials if t.avoided), None)

    @property
    def smallest_change(self) -> str | None:
        found = self.smallest
        return found.name if found else None

    def as_dict(self) -> dict[str, Any]:
        """The SPEC 5.3 counterfactual keys of a post-mortem, plus the SPEC 8 additions."""
        found = self.smallest
        return {
            "counterfactuals": [
                {
                    "change": t.change.name,
                    "detail": t.change.detail,
                    "kind": t.change.kind,
                    "emergency_avoided": t.avoided,
                    "tokens_billed": t.outcome.tokens_billed if t.outcome else None,
                }
                for t in self.trials
            ],
            "smallest_change": found.name if found else None,
            "smallest_change_detail": found.detail if found else None,
            "smallest_change_config": found.config_dict() if found else None,
            "smallest_change_verified": self.verified if found else None,
            "reproduced": self.reproduced,
            "summarizer": self.summarizer,
            "baseline": {
                "emergency": self.baseline.emergency,
                "tokens_billed": self.baseline.tokens_billed,
            },
            "skipped": [{"change": name, "reason": why} for name, why in self.skipped],
            "replays": self.replays,
            "search": self.search,
            **(
                {"window_needed": self.window_needed, "window_verified": True, "unavoidable": True}
                if self.window_needed
                else {}
            ),
        }


@dataclass(frozen=True)
class Setting:
    """What every replay of one session shares: its messages, usage and window."""

    history: Sequence[Message]
    context_window: int
    system: Message | None = None
    usage: Sequence[TurnUsage] = ()
    """Provider usage of the uncompacted prompt, keyed by index into ``[system, *history]``."""
    summarizer: Summarizer | None = None
    estimator: TokenEstimator | None = None
    history_missing_tokens: int = 0
    """History the session's transcript lacks (``sessions.history_missing_tokens``): the
    replays calibrate as the session's own replay did."""


def replay_prefix(
    setting: Setting,
    config: CompactorConfig,
    end: int | None,
    *,
    work_dir: Path,
    tool_time_offload: bool = False,
) -> PrefixOutcome:
    """Replay ``history[:end]`` (all of it for ``None``) with a turn before each assistant
    message and, for a prefix, one at its end (the emergency's turn)."""
    return replay_turns(
        setting, config, end, work_dir=work_dir, tool_time_offload=tool_time_offload
    ).upto(None)


@dataclass(frozen=True)
class TurnsReplayed:
    """One replay turn by turn: which turns had an effective Emergency, the tokens billed up
    to each turn and the view each turn ended with (in the replay's own estimate)."""

    emergency_turns: frozenset[int]
    billed: tuple[int, ...]
    last_view: tuple[int, ...]

    def upto(self, turn: int | None) -> PrefixOutcome:
        """The outcome of a replay that stopped at ``turn`` (None: the last)."""
        n = len(self.billed) if turn is None else turn
        if not 0 < n <= len(self.billed):
            return PrefixOutcome(frozenset(), 0, 0, 0)
        emergencies = frozenset(t for t in self.emergency_turns if t <= n)
        return PrefixOutcome(emergencies, self.billed[n - 1], n, self.last_view[n - 1])


def replay_turns(
    setting: Setting,
    config: CompactorConfig,
    end: int | None,
    *,
    work_dir: Path,
    tool_time_offload: bool = False,
) -> TurnsReplayed:
    """``replay_prefix``, turn by turn."""
    history = list(setting.history if end is None else setting.history[:end])
    if tool_time_offload:
        history = _offloaded_as_appended(history, config, work_dir)
    if end is not None:
        history.append(Message(role="assistant", content=""))  # the emergency's own turn
    messages = [setting.system, *history] if setting.system else history
    compactor = ProgressiveCompactor(
        setting.summarizer or ExtractiveSummarizer(),
        setting.context_window,
        config=config,
        offloader=CompactionOffloader(work_dir, _SESSION_ID),
        session_id=_SESSION_ID,
        estimator=setting.estimator,
    )
    imported = ImportedSession(
        session_id=_SESSION_ID,
        source_path="",
        format="openai",
        messages=messages,
        usage=list(setting.usage),
    )
    emergencies: set[int] = set()
    billed: list[int] = []
    last: list[int] = []

    def on_view(_index: int, view: list[Message], record: CompactionRecord) -> None:
        billed.append((billed[-1] if billed else 0) + compactor.tokens(view))
        last.append(record.tokens_after if record.effective else record.tokens_before)
        if record.tier == CompactionTier.EMERGENCY and record.effective is not False:
            emergencies.add(len(billed))

    replay_session(
        imported,
        compactor,
        on_view=on_view,
        calibrate=bool(setting.usage),
        history_missing_tokens=setting.history_missing_tokens,
    )
    return TurnsReplayed(frozenset(emergencies), tuple(billed), tuple(last))


class ReplayCache:
    """Whole-session replays, one per (window, estimator, config), shared by every emergency
    of a session and its session fix: the outcome of a prefix is the whole replay read up to
    the prefix's turn (a turn is decided on the history before it alone), so a session with
    many emergencies replays each change once, not once per emergency."""

    def __init__(self) -> None:
        self._done: dict[str, TurnsReplayed] = {}
        self.replays = 0

    def whole(self, setting: Setting, change: Change) -> TurnsReplayed:
        estimator = setting.estimator.name if setting.estimator is not None else ""
        key = "|".join(
            (
                str(setting.context_window),
                estimator,
                change.config.model_dump_json(),
                str(change.tool_time_offload),
            )
        )
        found = self._done.get(key)
        if found is None:
            with tempfile.TemporaryDirectory(prefix="compactlens-cf-") as tmp:
                found = replay_turns(
                    setting,
                    change.config,
                    None,
                    work_dir=Path(tmp),
                    tool_time_offload=change.tool_time_offload,
                )
            self._done[key] = found
            self.replays += 1
        return found


def _offloaded_as_appended(
    history: list[Message], config: CompactorConfig, work_dir: Path
) -> list[Message]:
    """Tool results above the offload threshold replaced by their placeholder, as an
    ``OffloadHook`` does when they are appended (for a library without the config field)."""
    hook = OffloadHook(work_dir, _SESSION_ID, threshold=config.offload_threshold)
    called: dict[str, str] = {}
    out: list[Message] = []
    for msg in history:
        called.update((tc.id, tc.name) for tc in msg.tool_calls)
        if msg.is_tool_result:
            msg = hook(msg, tool_name=called.get(msg.tool_call_id or "", msg.name or ""))
        out.append(msg)
    return out


def _avoided(baseline: PrefixOutcome, outcome: PrefixOutcome, window: int) -> bool:
    return (
        not outcome.emergency
        and outcome.emergency_turns <= baseline.emergency_turns
        and outcome.last_view_tokens <= window
    )


def _run(
    setting: Setting, change: Change, end: int | None, cache: ReplayCache | None = None
) -> PrefixOutcome:
    """The replay of ``history[:end]`` (all for None): read from ``cache``'s whole-session
    replay when the prefix ends where the session's next turn was (an assistant message),
    else replayed on its own."""
    history = setting.history
    at_turn = end is None or (end < len(history) and history[end].role == "assistant")
    if cache is not None and at_turn:
        turn = None if end is None else sum(m.role == "assistant" for m in history[:end]) + 1
        return cache.whole(setting, change).upto(turn)
    with tempfile.TemporaryDirectory(prefix="compactlens-cf-") as tmp:
        return replay_prefix(
            setting,
            change.config,
            end,
            work_dir=Path(tmp),
            tool_time_offload=change.tool_time_offload,
        )


def counterfactuals(
    history: Sequence[Message],
    config: CompactorConfig,
    context_window: int,
    emergency_index: int,
    *,
    system: Message | None = None,
    summarizer: Summarizer | None = None,
    estimator: TokenEstimator | None = None,
    usage: Sequence[TurnUsage] = (),
    search: Search = "full",
    max_replays: int = MAX_REPLAYS,
    history_missing_tokens: int = 0,
    cache: ReplayCache | None = None,
) -> CounterfactualReport:
    """The baseline and the changes of ``config`` over the prefix, then the verification.

    ``history``: the session's messages without the system prompt (``system`` apart), indexed
    like the store's ``messages.idx``; ``emergency_index``: the ``history_messages`` of the
    emergency's turn (how many history messages the session held when it prepared that turn).
    ``search``: ``"full"`` (singles, then steps and pairs until one avoids it), ``"singles"``,
    or ``"baseline"`` (an emergency no config can avoid: only whether it reproduces).
    ``cache``: whole-session replays shared with the session's other emergencies.
    """
    if not 0 <= emergency_index <= len(history):
        raise CounterfactualError(
            f"emergency_index {emergency_index} is outside the history of {len(history)} "
            "messages; pass the history_messages of the emergency's turn"
        )
    chosen = summarizer or ExtractiveSummarizer()
    setting = Setting(
        history, context_window, system, usage, chosen, estimator, history_missing_tokens
    )
    spec = summarizer_spec(ProgressiveCompactor(chosen, context_window, config=config))
    changes, skipped = catalogue(config)
    baseline = _run(
        setting, Change("baseline", "the session's config", config), emergency_index, cache
    )
    report = CounterfactualReport(spec, baseline, skipped=skipped)
    report.search = search
    for change in changes if search != "baseline" else []:
        if change.kind != "single" and (search == "singles" or not report.reproduced):
            break
        if not report.reproduced:
            report.trials.append(Trial(change, None, None))
            continue
        if change.kind != "single" and (report.smallest or report.replays >= max_replays - 1):
            break
        outcome = _run(setting, change, emergency_index, cache)
        report.replays += 1
        report.trials.append(Trial(change, outcome, _avoided(baseline, outcome, context_window)))
    found = report.smallest
    if found is not None:
        whole = _run(setting, found, None, cache)
        report.replays += 1
        later = _run(setting, Change("baseline", "", config), None, cache).emergency_turns
        report.verified = _avoided_in_whole(baseline.turns, later, whole.emergency_turns)
    if search == "full" and report.reproduced and not report.verified:
        report.window_needed = _smallest_window(setting, config, emergency_index, report, cache)
    return report


def _smallest_window(
    setting: Setting,
    config: CompactorConfig,
    end: int,
    report: CounterfactualReport,
    cache: ReplayCache | None,
) -> int | None:
    """The smallest larger window (``WINDOW_FACTORS``) at which the session's own config has
    no emergency at that turn, in the prefix and then in a replay of the whole session."""
    as_is = Change("baseline", "the session's config", config)
    turn = report.baseline.turns
    for factor in WINDOW_FACTORS:
        window = int(setting.context_window * factor)
        wider = replace(setting, context_window=window)
        outcome = _run(wider, as_is, end, cache)
        report.replays += 1
        if outcome.emergency or outcome.last_view_tokens > window:
            continue
        whole = _run(wider, as_is, None, cache)
        report.replays += 1
        if turn not in whole.emergency_turns:
            return window
    return None


def _avoided_in_whole(turn: int, before: frozenset[int], after: frozenset[int]) -> bool:
    """A replay of the whole session (``after``: its emergency turns) avoids the emergency at
    ``turn`` of the session's own replay (``before``): none at that turn, none new before it,
    and none new until the session's own next emergency (one a turn or two later is the same
    emergency postponed, not avoided); later ones are other emergencies' business."""
    following = min((t for t in before if t > turn), default=None)
    new = {t for t in after - before if following is None or t < following}
    return turn not in after and not new


def usage_from_frames(usage: pl.DataFrame, session_id: str, *, has_system: bool) -> list[TurnUsage]:
    """The provider usage a replay fed this session (``prompt = 'history'``: it describes the
    uncompacted prompt, so it can be fed again), keyed by the index of its assistant message in
    ``[system, *history]`` (a usage event's ``history_messages`` is that message's history
    index). A live
    session's usage (of the view it sent) is not returned: it cannot describe another view."""
    rows = usage.filter(
        (pl.col("session_id") == session_id)
        & (pl.col("prompt") == "history")
        & pl.col("input_tokens").is_not_null()
    )
    shift = 1 if has_system else 0
    return [
        TurnUsage(
            message_index=int(row["history_messages"]) + shift,
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cache_read_tokens=row["cache_read_tokens"],
            cache_write_tokens=row["cache_creation_tokens"],
        )
        for row in rows.sort("seq").iter_rows(named=True)
    ]


def messages_from_frame(messages: pl.DataFrame, session_id: str | None = None) -> list[Message]:
    """Rebuild a session's history (ordered by ``idx``) from the store's ``messages`` frame.

    Raises ``CounterfactualError`` for a session captured as metadata (no content), since a
    replay of sizes alone would not be the same session.
    """
    rows = messages if session_id is None else messages.filter(pl.col("session_id") == session_id)
    if rows.is_empty():
        raise CounterfactualError(f"no messages for session {session_id!r}; nothing to replay")
    if rows["content"].null_count() > 0:
        raise CounterfactualError(_METADATA_ONLY)
    has_name = "name" in rows.columns
    out: list[Message] = []
    for row in rows.sort("idx").iter_rows(named=True):
        out.append(
            Message(
                role=row["role"],
                content=row["content"],
                tool_calls=_tool_calls(row.get("tool_calls")),
                tool_call_id=row.get("tool_call_id"),
                is_error=bool(row.get("is_error")),
                name=row["name"] if has_name else None,
            )
        )
    return out


def _tool_calls(text: str | None) -> tuple[ToolCall, ...]:
    """The ``tool_calls`` JSON text ([{id, name, arguments}]) as ``ToolCall``s."""
    if not text:
        return ()
    calls: list[ToolCall] = []
    for item in json.loads(text):
        arguments = item.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(ToolCall(id=item["id"], name=item["name"], arguments=arguments))
    return tuple(calls)


class FixedEstimator:
    """The estimate a session had when its emergency fired, frozen: ``bytes/4 * slope +
    overhead``, as its record gives them, so that a counterfactual decides tiers on the same
    sizes as the session did (calibration included)."""

    def __init__(self, slope: float = 1.0, overhead: float = 0.0, name: str = "bytes/4") -> None:
        self.slope, self.overhead, self._name = slope, overhead, name

    @property
    def name(self) -> str:
        return self._name

    def tokens_for_bytes(self, n_bytes: int) -> int:
        return int((n_bytes // BYTES_PER_TOKEN) * self.slope + self.overhead)

    @classmethod
    def of_record(
        cls, slope: float | None, overhead: float | None, name: str | None
    ) -> FixedEstimator:
        """The record's estimator (``estimator_slope``, ``estimator_overhead``, ``estimator``);
        bytes/4 when the record gives no numbers (an estimator of the caller's own)."""
        if slope is None:
            return cls()
        return cls(slope, overhead or 0.0, name or "bytes/4")


MAX_SESSION_REPLAYS = 32
"""Configs per session fix at most, its baseline included (a replay already made for one of
the session's emergencies is read from the cache)."""


@dataclass
class SessionFix:
    """The smallest config found that avoids every targeted emergency of a session at once,
    verified by replaying the whole session with it (``config`` None when none was found)."""

    targets: list[int]
    change: Change | None = None
    remaining: list[int] = field(default_factory=list)
    tried: int = 0
    replays: int = 0
    reason: str | None = None
    best: Change | None = None
    """When none avoids them all: the config that avoids the most, adding none."""
    best_avoids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        found, best = self.change, self.best
        return {
            "config": found.config_dict() if found else None,
            "change": found.name if found else None,
            "detail": found.detail if found else None,
            "tool_time_offload": found.tool_time_offload if found else None,
            "verified": found is not None,
            "avoids": self.targets if found else [],
            "emergency_turns_after": self.remaining if found else None,
            "tried": self.tried,
            "replays": self.replays,
            "reason": self.reason,
            "best": (
                {
                    "change": best.name,
                    "detail": best.detail,
                    "config": best.config_dict(),
                    "avoids": self.best_avoids,
                }
                if best and not found
                else None
            ),
        }


def session_fix(
    history: Sequence[Message],
    config: CompactorConfig,
    context_window: int,
    targets: Sequence[int],
    *,
    candidates: Sequence[Change] = (),
    system: Message | None = None,
    summarizer: Summarizer | None = None,
    usage: Sequence[TurnUsage] = (),
    estimator: TokenEstimator | None = None,
    history_missing_tokens: int = 0,
    max_replays: int = MAX_SESSION_REPLAYS,
    cache: ReplayCache | None = None,
) -> SessionFix:
    """One config for the whole session: the first of ``candidates`` (each emergency's own
    verified change, smallest first), the catalogue of changes, then all candidates merged,
    whose replay of the whole session has an emergency at none of ``targets`` (turns) and none
    where the session's own config had none."""
    setting = Setting(
        history,
        context_window,
        system,
        usage,
        summarizer or ExtractiveSummarizer(),
        estimator,
        history_missing_tokens,
    )
    baseline = _run(setting, Change("baseline", "the session's config", config), None, cache)
    fix = SessionFix(sorted(set(targets)), replays=1)
    wanted = frozenset(targets) & baseline.emergency_turns
    if not wanted:
        fix.reason = "a replay of the whole session has none of these emergencies"
        return fix
    best: tuple[int, Change | None, list[int]] = (0, None, [])
    for change in _session_candidates(config, candidates):
        if fix.replays >= max_replays:
            break
        whole = _run(setting, change, None, cache)
        fix.replays += 1
        fix.tried += 1
        if not whole.emergency_turns <= baseline.emergency_turns:
            continue  # it adds an emergency the session did not have
        avoided = sorted(wanted - whole.emergency_turns)
        if len(avoided) == len(wanted):
            fix.change, fix.remaining = change, sorted(whole.emergency_turns)
            fix.targets = sorted(wanted)
            return fix
        if len(avoided) > best[0]:
            best = (len(avoided), change, avoided)
    fix.best, fix.best_avoids = best[1], best[2]
    fix.reason = (
        f"none of the {fix.tried} configs tried avoids all {len(wanted)} of them in one replay"
        + (f"; {best[1].name} avoids {best[0]}" if best[1] else "")
    )
    return fix


def _session_candidates(config: CompactorConfig, own: Sequence[Change]) -> list[Change]:
    """``own``, the catalogue, ``own`` merged, then every knob at once (thresholds one to three
    steps lower with the tail and offloads halved and tool results offloaded as appended),
    each config once, in that order."""
    changes, _skipped = catalogue(config)
    merged = _merged(config, own)
    out: list[Change] = []
    seen: set[str] = set()
    for change in [*own, *changes, *([merged] if merged else []), *_everything(config)]:
        key = change.config.model_dump_json() + str(change.tool_time_offload)
        if key not in seen:
            seen.add(key)
            out.append(change)
    return out


_LOWEST = ("warn", "soft", "full", "min_tail_messages", "offload_threshold")


def _merged(config: CompactorConfig, own: Sequence[Change]) -> Change | None:
    """Every change of ``own`` at once: each field at its lowest among them."""
    if len(own) < 2:
        return None
    update: dict[str, Any] = {}
    for name in (*_LOWEST, "fallback_target", TOOL_OFFLOAD_FIELD):
        ours = getattr(config, name, None)
        values = [v for c in own if (v := getattr(c.config, name, None)) not in (None, ours)]
        if values:
            update[name] = min(values)
    try:
        merged = CompactorConfig.model_validate({**config.model_dump(), **update})
    except ValidationError:
        return None
    detail = ", ".join(f"{k} {getattr(config, k, None)} -> {v}" for k, v in update.items())
    hook = any(c.tool_time_offload for c in own)
    return Change("merged", detail or "the session's config", merged, hook, "merged")


def _everything(config: CompactorConfig) -> list[Change]:
    """Every knob of the catalogue at once, thresholds ``steps`` lower (1 to 3)."""
    out: list[Change] = []
    for steps in (1, 2, 3):
        update: dict[str, Any] = {
            "min_tail_messages": max(1, config.min_tail_messages // 2),
            "offload_threshold": max(1, config.offload_threshold // 2),
        }
        for name in ("full", "soft", "warn"):
            lowered = lowered_threshold({**config.model_dump(), **update}, name, steps)
            update.update(lowered)
        if TOOL_OFFLOAD_FIELD in CompactorConfig.model_fields:
            update[TOOL_OFFLOAD_FIELD] = update["offload_threshold"]
        try:
            changed = CompactorConfig.model_validate({**config.model_dump(), **update})
        except ValidationError:
            continue
        detail = ", ".join(f"{k} {getattr(config, k, None)} -> {v}" for k, v in update.items())
        hook = TOOL_OFFLOAD_FIELD not in CompactorConfig.model_fields
        out.append(Change(f"everything_x{steps}", detail, changed, hook, "everything"))
    return out


def change_of(report: dict[str, Any]) -> Change | None:
    """The verified smallest change of a counterfactual report (``as_dict``), as a Change."""
    config = report.get("smallest_change_config")
    if not report.get("smallest_change_verified") or not isinstance(config, dict):
        return None
    name = str(report.get("smallest_change") or "change")
    hook = "tool_time_offload" in name and TOOL_OFFLOAD_FIELD not in config
    return Change(
        name,
        str(report.get("smallest_change_detail") or name),
        CompactorConfig.model_validate(config),
        hook,
    )
