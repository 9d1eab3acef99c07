"""The agent's world of one session: how many tokens its prompts are, turn by turn.

``compactlens replay`` (and a live agent) calibrates an ``OverheadCalibratedEstimator`` on the
transcript's provider usage, so a prompt counts the harness's hidden system prompt and tool
schemas, and tiers fire on that count. The lab measures the same way by default: progressive
trials run through ``replay_session`` exactly as ``replay`` does, with a sink that keeps the
events the store's figures come from (``view_prepared``: the view's and the history's tokens;
``usage_reported``: what the cost model fits), and the rivals are measured and decide with the
estimator such a replay has before each turn (``session_world``: one replay that never
compacts; the estimator learns from the transcript's usage alone, whatever the views were).
Uncalibrated (``calibrate=False``, as ``replay --uncalibrated``) the usage is dropped first and
every count is bytes / 4.

Cost follows ``analytics.jobs.costs``: prompt tokens through the session's ``fit_calibration``
over its usage reports, each answer's reported output tokens where the report exists. Nothing
here prices or writes files.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from analytics.importers import ImportedSession
from analytics.jobs.cache_model import Calibration, fit_calibration
from analytics.replay.driver import replay_config_hash, replay_session
from compactor import (
    ByteEstimator,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    TokenEstimator,
)
from compactor.events import Capture, Event, UsageReported, ViewPrepared

BYTES = ByteEstimator()


def agent_session(session: ImportedSession, calibrate: bool) -> ImportedSession:
    """``session`` as a replay sees it: without its usage when uncalibrated (what
    ``compactlens replay --uncalibrated`` drops), so nothing calibrates."""
    return session if calibrate or not session.usage else session.uncalibrated()


def replay_session_id(
    session: ImportedSession, window: int, config: CompactorConfig, calibrate: bool
) -> str:
    """The id ``compactlens replay --config`` gives ``session``'s replay in a fresh store
    (``<imported id>@<window>#<replay_config_hash>``, as ``analytics.cli.commands.run_replay``
    names it). Offload placeholders name the session's folder, so a replay under another id
    would send prompts of other sizes."""
    like_replay = ProgressiveCompactor(ExtractiveSummarizer(), window, config=config)
    return f"{session.session_id}@{window}#{replay_config_hash(like_replay, calibrate=calibrate)}"


class WatchedCompactor(ProgressiveCompactor):
    """A ``ProgressiveCompactor`` that remembers the compactor a replay binds to its session
    (``replay_session`` binds one with a calibrating estimator when the transcript has usage),
    so the estimator in use can be read between turns."""

    bound: ProgressiveCompactor | None = None

    def for_session(
        self,
        session_id: str,
        *,
        estimator: TokenEstimator | None = None,
        capture: Capture | None = None,
    ) -> ProgressiveCompactor:
        self.bound = super().for_session(session_id, estimator=estimator, capture=capture)
        return self.bound

    @property
    def estimator_now(self) -> TokenEstimator:
        """The estimator the session decides with (its own, or the one bound to the session)."""
        return (self.bound or self).estimator


class ReplayEvents:
    """An ``EventSink`` keeping what the store's token and cost figures come from: each
    ``view_prepared`` (in turn order) and each ``usage_reported``."""

    def __init__(self) -> None:
        self.views: list[ViewPrepared] = []
        self.usage: list[UsageReported] = []

    def emit(self, event: Event) -> None:
        payload = event.payload
        if isinstance(payload, ViewPrepared):
            self.views.append(payload)
        elif isinstance(payload, UsageReported):
            self.usage.append(payload)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None

    def calibration(self) -> Calibration:
        """The cost model's fit over the usage reports (``analytics.jobs.costs``)."""
        return fit_calibration(
            [u.raw_estimated_tokens or 0 for u in self.usage],
            [u.input_tokens for u in self.usage],
        )

    def outputs(self) -> dict[int, int]:
        """Reported answer tokens by the (1-based) turn each report follows."""
        return {u.turn: u.output_tokens for u in self.usage if u.turn is not None}


@dataclass(frozen=True)
class SessionWorld:
    """Token counts of one session's prompts as a replay of it has them (see the module text).
    The default is the uncalibrated world: bytes / 4 everywhere."""

    estimators: Sequence[TokenEstimator] = ()
    """The estimator before each turn's view (0-based turn); past the end, bytes / 4."""
    calibration: Calibration = field(default_factory=Calibration)
    """What the cost model prices prompts with."""
    outputs: dict[int, int] = field(default_factory=dict)
    """Reported answer tokens by 1-based turn (the rest: the answer's estimate)."""
    call_at: dict[int, datetime] = field(default_factory=dict)
    """When each call was made, by history index of its answer (``call_times``): the gap to the
    call before says whether the provider's cache had expired (empty: undated, always warm)."""

    def estimator(self, turn: int) -> TokenEstimator:
        return self.estimators[turn] if turn < len(self.estimators) else BYTES

    def tokens(self, turn: int, n_bytes: int) -> int:
        """A prompt of ``n_bytes`` at 0-based ``turn``, in the agent's tokens."""
        return self.estimator(turn).tokens_for_bytes(n_bytes)

    def window_bytes(self, turn: int, window: int) -> int:
        """The most bytes whose count at ``turn`` is still within ``window`` (0 when none):
        counts grow with bytes, so a binary search finds it for any estimator."""
        estimator = self.estimator(turn)
        if estimator is BYTES:
            return 4 * window + 3
        if estimator.tokens_for_bytes(0) > window:
            return 0
        low, high = 0, 4 * window + 4
        while estimator.tokens_for_bytes(high) <= window:
            low, high = high, high * 2
        while high - low > 1:
            middle = (low + high) // 2
            if estimator.tokens_for_bytes(middle) <= window:
                low = middle
            else:
                high = middle
        return low


_WORLDS: dict[tuple[str, int], tuple[ImportedSession, SessionWorld]] = {}
"""The worlds made in this process, by session id and reserve, beside the session they are of
(every rival of a run needs the same one; an entry is used only for that very session)."""
MAX_WORLDS = 1024
_WORLDS_LOCK = threading.Lock()  # Dask may run a worker's tasks in threads


def session_world(
    session: ImportedSession, *, calibrate: bool = True, reserve_tokens: int = 0
) -> SessionWorld:
    """The world ``session`` is replayed in: with ``calibrate`` and usage in the transcript, the
    estimator a ``replay`` of it has before each turn (a copy taken then) and the cost model's
    calibration; else bytes / 4. ``reserve_tokens`` is the config's (the estimator is fed the
    reported prompt against the estimate plus that reserve). Kept for the next strategy."""
    if not calibrate or not session.has_usage:
        return SessionWorld(call_at=call_times(session))
    key = (session.session_id, reserve_tokens)
    with _WORLDS_LOCK:
        kept = _WORLDS.get(key)
    if kept is not None and kept[0] is session:
        return kept[1]
    world = _replayed_world(session, reserve_tokens)
    with _WORLDS_LOCK:
        while len(_WORLDS) >= MAX_WORLDS:
            del _WORLDS[next(iter(_WORLDS))]
        _WORLDS[key] = (session, world)
    return world


def _replayed_world(session: ImportedSession, reserve_tokens: int) -> SessionWorld:
    never = WatchedCompactor(
        ExtractiveSummarizer(), 0, config=CompactorConfig(reserve_tokens=reserve_tokens)
    )  # a window of 0 never compacts: the views are the history
    events = ReplayEvents()
    estimators: list[TokenEstimator] = []

    def on_view(_i: int, _view: list[Message], _record: object) -> None:
        # a copy keeps the fitted figures of this turn; the estimator goes on learning
        estimators.append(copy.copy(never.estimator_now))

    replay_session(session, never, event_sink=events, session_id="world", on_view=on_view)
    return SessionWorld(estimators, events.calibration(), events.outputs(), call_times(session))


def call_times(session: ImportedSession) -> dict[int, datetime]:
    """``ImportedSession.call_times`` by history index (a leading system message not counted,
    as strategies' turns index it): the times a replay's clock dates the same turns with."""
    offset = 1 if session.messages and session.messages[0].role == "system" else 0
    return {i - offset: at for i, at in session.call_times().items()}
