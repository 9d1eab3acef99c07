"""Replay: drive an imported session through ``CompactionSession`` turn by turn.

A turn is each point where the agent called the model: before each assistant message the
session prepares a view, exactly as a live agent would, and the provider usage recorded in the
transcript is reported after it, so estimator calibration works on replays. Replays emit the
same events as live sessions (``source="replay"``). ``replay_config_hash`` names what decides a
replay's outcome besides the transcript and the window (the ``CompactorConfig``, the summariser,
the estimator), so replays under different settings get different session ids. This module does
not read files or own a store; callers pass imported sessions and a sink.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from analytics.importers import ImportedSession
from analytics.importers.history import Visible, missing_history_tokens
from compactor import (
    CompactionRecord,
    CompactionSession,
    CompactionTier,
    EventSink,
    ExtractiveSummarizer,
    Message,
    OverheadCalibratedEstimator,
    ProgressiveCompactor,
)
from compactor.events import Capture

ViewCallback = Callable[[int, list[Message], CompactionRecord], None]
"""Called with the index of the assistant message about to be produced, the view, the record."""


@dataclass
class ReplayResult:
    session_id: str
    format: str
    turns: int = 0
    events_lost: int = 0
    """Events the session could not hand to its sink (each one makes the command fail)."""
    records: list[CompactionRecord] = field(default_factory=list)
    max_view_tokens: int = 0

    @property
    def effective(self) -> list[CompactionRecord]:
        return [r for r in self.records if r.effective and r.tier != CompactionTier.NONE]

    @property
    def tokens_saved(self) -> int:
        return sum(r.tokens_before - r.tokens_after for r in self.effective)


def summarizer_spec(compactor: ProgressiveCompactor) -> str:
    """The summariser as text: ``extractive``, or the chat model's class, model and endpoint."""
    summarizer: Any = compactor.summarizer
    if isinstance(summarizer, ExtractiveSummarizer):
        return "extractive"
    chat = getattr(summarizer, "chat_model", None)
    if chat is not None:
        base_url = getattr(chat, "base_url", None) or ""
        return f"{type(chat).__name__}:{getattr(chat, 'model', '')}@{base_url}"
    return f"{type(summarizer).__name__}:{getattr(summarizer, 'model_name', '')}"


KEYED_SINCE = ("cache_priced_offload", "cache_read_price", "cache_write_price")
"""Config fields added since replays were last keyed (release 3b7a7e4): left out of the key
while at their default, so a replay of a config that leaves them alone keeps its family and an
upgrade does not replay a transcript a second time beside the first. Add new fields here."""


def replay_config_hash(compactor: ProgressiveCompactor, *, calibrate: bool = True) -> str:
    """8 hex digits of the ``CompactorConfig``, the summariser and the estimator."""
    parts = [
        compactor.config.model_dump(mode="json", exclude=compactor.config.at_default(KEYED_SINCE)),
        summarizer_spec(compactor),
        type(compactor.estimator).__name__,
        calibrate,
    ]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:8]


class _TranscriptClock:
    """A replay's clock: the transcript's time of the call being replayed
    (``ImportedSession.call_times``), the first one until a call is reached."""

    def __init__(self, at: datetime | None) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at if self.at is not None else datetime.now(UTC)


def replay_session(
    imported: ImportedSession,
    compactor: ProgressiveCompactor,
    *,
    event_sink: EventSink | None = None,
    session_id: str | None = None,
    on_view: ViewCallback | None = None,
    calibrate: bool = True,
    capture: Capture = "full",
    metadata: Mapping[str, Any] | None = None,
    history_missing_tokens: int | None = None,
) -> ReplayResult:
    """Replay one imported session; ``on_view`` sees every prepared view and its record.

    With ``calibrate`` (the default) the session gets its own ``OverheadCalibratedEstimator``,
    fed by the transcript's provider usage, so tiers are decided on the prompt size the agent
    really had (its harness's system prompt and tool schemas included), as a live agent would.
    ``capture="metadata"`` records no message text; ``metadata`` joins the session's metadata.
    ``history_missing_tokens``: the history the transcript lacks, when known (a replay of a
    stored session, whose file is not at hand); else found from ``imported``.
    """
    msgs = imported.messages
    system = msgs[0] if msgs and msgs[0].role == "system" else None
    sid = session_id or imported.session_id
    missing = (
        missing_history_tokens(imported)
        if history_missing_tokens is None
        else history_missing_tokens
    )
    visible = Visible(imported) if missing else None
    estimator: OverheadCalibratedEstimator | None = None
    if calibrate and imported.has_usage:
        estimator = OverheadCalibratedEstimator()
        compactor = compactor.for_session(sid, estimator=estimator)
    times = imported.call_times()
    clock = _TranscriptClock(min(times.values(), default=None))
    session = CompactionSession(
        compactor,
        system,
        session_id=sid,
        event_sink=event_sink,
        clock=clock if times else None,
        model=imported.model or "",
        agent=imported.agent or imported.format,
        parent_session_id=imported.parent_session_id,
        source="replay",
        capture=capture,
        metadata={
            "source_path": imported.source_path,
            "format": imported.format,
            **({"history_missing_tokens": missing} if missing else {}),
            **(metadata or {}),
        },
    )
    result = ReplayResult(session_id=sid, format=imported.format)
    for i, msg in enumerate(msgs[1:] if system else msgs, start=1 if system else 0):
        if msg.role == "assistant":
            clock.at = times.get(i, clock.at)  # the call this view was prepared for
            view, record = session.prepare()
            result.turns += 1
            result.max_view_tokens = max(result.max_view_tokens, compactor.tokens(view))
            if record.tier != CompactionTier.NONE:
                result.records.append(record)
            if on_view is not None:
                on_view(i, view, record)
            usage = imported.usage_at(i)
            if visible and estimator and usage is not None and usage.input_tokens:
                # the history the file lacks is not overhead once a prompt shows less of it
                estimator.bound_overhead(usage.input_tokens - visible(usage))
            # after the harness's own compaction the report is of its view, not the history
            if usage is not None and usage.input_tokens and usage.prompt == "history":
                session.observe_usage(
                    input_tokens=usage.input_tokens,
                    prompt="history",  # the transcript's usage is of the uncompacted prompt
                    output_tokens=usage.output_tokens or 0,
                    cache_read_tokens=usage.cache_read_tokens or 0,
                    cache_creation_tokens=usage.cache_write_tokens or 0,
                    model=imported.model or "",
                )
        session.append(msg)
    session.close()
    result.events_lost = session.sink_errors
    return result
