"""Replay: drive an imported session through ``CompactionSession`` turn by turn.

A turn is each point where the agent called the model: before each assistant message the
session prepares a view, exactly as a live agent would, and the provider usage recorded in the
transcript is reported after it, so estimator calibration works on replays. Replays emit the
same events as live sessions (``source="replay"``). This module does not read files or own a
store; callers pass imported sessions and a sink.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from analytics.importers import ImportedSession
from compactor import (
    CompactionRecord,
    CompactionSession,
    CompactionTier,
    EventSink,
    Message,
    OverheadCalibratedEstimator,
    ProgressiveCompactor,
    message_bytes,
)

ViewCallback = Callable[[int, list[Message], CompactionRecord], None]
"""Called with the index of the assistant message about to be produced, the view, the record."""


@dataclass
class ReplayResult:
    session_id: str
    format: str
    turns: int = 0
    records: list[CompactionRecord] = field(default_factory=list)
    max_view_tokens: int = 0

    @property
    def effective(self) -> list[CompactionRecord]:
        return [r for r in self.records if r.effective and r.tier != CompactionTier.NONE]

    @property
    def tokens_saved(self) -> int:
        return sum(r.tokens_before - r.tokens_after for r in self.effective)


def replay_session(
    imported: ImportedSession,
    compactor: ProgressiveCompactor,
    *,
    event_sink: EventSink | None = None,
    session_id: str | None = None,
    on_view: ViewCallback | None = None,
    calibrate: bool = True,
) -> ReplayResult:
    """Replay one imported session; ``on_view`` sees every prepared view and its record.

    With ``calibrate`` (the default) the session gets its own ``OverheadCalibratedEstimator``,
    fed by the transcript's provider usage, so tiers are decided on the prompt size the agent
    really had (its harness's system prompt and tool schemas included), as a live agent would.
    """
    msgs = imported.messages
    system = msgs[0] if msgs and msgs[0].role == "system" else None
    sid = session_id or imported.session_id
    if calibrate and imported.usage:
        compactor = compactor.for_session(sid, estimator=OverheadCalibratedEstimator())
    session = CompactionSession(
        compactor,
        system,
        session_id=sid,
        event_sink=event_sink,
        model=imported.model or "",
        agent=imported.agent or imported.format,
        parent_session_id=imported.parent_session_id,
        source="replay",
        metadata={"source_path": imported.source_path, "format": imported.format},
    )
    result = ReplayResult(session_id=sid, format=imported.format)
    system_bytes = message_bytes(system) if system is not None else 0
    for i, msg in enumerate(msgs[1:] if system else msgs, start=1 if system else 0):
        if msg.role == "assistant":
            view, record = session.prepare()
            result.turns += 1
            result.max_view_tokens = max(result.max_view_tokens, compactor.tokens(view))
            if record.tier != CompactionTier.NONE:
                result.records.append(record)
            if on_view is not None:
                on_view(i, view, record)
            usage = imported.usage_at(i)
            if usage is not None and usage.input_tokens:
                original = (session.history_bytes + system_bytes) // 4
                session.observe_usage(
                    input_tokens=usage.input_tokens,
                    estimated_input_tokens=original,
                    output_tokens=usage.output_tokens or 0,
                    cache_read_tokens=usage.cache_read_tokens or 0,
                    cache_creation_tokens=usage.cache_write_tokens or 0,
                    model=imported.model or "",
                )
        session.append(msg)
    session.close()
    return result
