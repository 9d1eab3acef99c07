"""Live sessions: what a transcript followed as its harness writes it says at once.

Per session of a Claude Code or Codex transcript: the context the provider last reported (the
whole prompt of the latest call, cache included) against the window where the transcript
records it, where the next automatic compaction is expected (the harness records no threshold,
so the size at which its last automatic compaction fired stands in for it), and each native
compaction's tokens before → after. The figures come from the transcript as its importer reads
it (the store keeps only the usage around each compaction), read again only when the file
changed (``figures_at`` caches by size, modification time and inode); ``live_sessions`` joins
them to the stored live versions, most recently imported first, with ``audit_json``'s entry of
each native compaction (what it lost, whether it grew). ``compactlens watch`` prints them, the
app's live page shows them. Nothing here writes.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from analytics.errors import AnalyticsError
from analytics.importers import ImportedSession, ImportIssue, iter_sessions
from analytics.queries.audit import audit_json
from analytics.store import EventStore

LIVE_SHOWN = 25
"""How many sessions ``live_sessions`` returns (the most recently imported)."""


@dataclass(frozen=True)
class Compacted:
    trigger: str
    tokens_before: int
    tokens_after: int
    at: int
    """The history length when it happened."""


@dataclass(frozen=True)
class SessionFigures:
    """One imported session's live figures."""

    session_id: str
    messages: int
    context_tokens: int | None
    """The provider's whole prompt of the latest call (None: no usage recorded)."""
    context_at: int
    """The message that call produced."""
    window: int
    """The model's context window where the transcript records it, else 0."""
    compactions: tuple[Compacted, ...]

    @property
    def context_now(self) -> tuple[int | None, str]:
        """(tokens, how known): the latest call's prompt, or, when the harness compacted after
        that call, the compacted view's estimate."""
        last = self.compactions[-1] if self.compactions else None
        if last is not None and (self.context_tokens is None or self.context_at < last.at):
            if not last.tokens_after:  # its summary line is not written yet
                return None, ""
            return last.tokens_after, "estimated, just after its compaction"
        return self.context_tokens, "the provider's last prompt"

    @property
    def fires_at(self) -> int | None:
        """Where the next automatic compaction is expected: where the last one fired."""
        auto = [c.tokens_before for c in self.compactions if c.trigger == "auto"]
        return auto[-1] if auto else None

    @property
    def next_compaction(self) -> str | None:
        """How far the next automatic compaction is, in words (None: no automatic one yet, or
        no size known now)."""
        fires, (tokens, _) = self.fires_at, self.context_now
        if fires is None or tokens is None:
            return None
        left = fires - tokens
        return f"{left:,} tokens away" if left > 0 else "due"


def figures_of(session: ImportedSession) -> SessionFigures:
    latest = max(session.usage, key=lambda u: u.message_index, default=None)
    return SessionFigures(
        session_id=session.session_id,
        messages=len(session.messages),
        context_tokens=None if latest is None else latest.input_tokens,
        context_at=-1 if latest is None else latest.message_index,
        window=max((c.context_window for c in session.compactions), default=0),
        compactions=tuple(
            Compacted(c.trigger, c.tokens_before, c.tokens_after, c.at) for c in session.compactions
        ),
    )


def live_figures(path: Path) -> Iterator[SessionFigures]:
    """The figures of every session of ``path`` that has usage or compactions (the file is
    read again; a file that cannot be read has none)."""
    issues: list[ImportIssue] = []
    try:
        for session in iter_sessions(path, "auto", issues=issues):
            if session.usage or session.compactions:
                yield figures_of(session)
    except (AnalyticsError, OSError, ValueError):
        return


@lru_cache(maxsize=256)
def _figures_cached(path: str, size: int, mtime_ns: int, inode: int) -> tuple[SessionFigures, ...]:
    del size, mtime_ns, inode  # the cache key: the file as it is now
    return tuple(live_figures(Path(path)))


def figures_at(path: Path) -> tuple[SessionFigures, ...] | None:
    """``live_figures`` of ``path``, read again only when the file changed; None when the file
    is gone or cannot be read."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return _figures_cached(str(path), info.st_size, info.st_mtime_ns, info.st_ino)


LIVE_VERSIONS = "SELECT session_id, metadata FROM sessions WHERE deleted_at IS NULL"


def version_of(meta: object) -> tuple[object, object]:
    """(source file, identity) of a stored session's metadata (a JSON text or a dict)."""
    try:
        data = json.loads(meta) if isinstance(meta, str) else meta
    except ValueError:
        return None, None
    return (
        (data.get("source_file"), data.get("identity")) if isinstance(data, dict) else (None, None)
    )


@dataclass(frozen=True)
class LiveSession:
    """A stored live version of a followed transcript's session, with its live figures."""

    session_id: str
    identity: str
    source_file: str
    agent: str
    imported_at: datetime | None
    """When its latest events were stored (the last import that changed it)."""
    figures: SessionFigures | None
    """None when its file is gone or holds no usage or compaction for it."""
    compactions: list[dict[str, Any]]
    """``audit_json``'s entry of each of its native compactions, in order."""


_RECENT = """
SELECT s.session_id, s.metadata, s.agent, max(e.occurred_at) AS last_at, max(e.seq) AS last_seq
FROM sessions s JOIN events e USING (session_id)
WHERE s.deleted_at IS NULL AND s.source = 'import'
  AND json_extract_string(s.metadata, '$.format') IN ('claude-code', 'codex')
GROUP BY ALL ORDER BY last_at DESC, s.session_id LIMIT ?
"""
_AUDITS: OrderedDict[tuple[str, str, int], list[dict[str, Any]]] = OrderedDict()
"""``audit_json``'s compactions of a session, by store, session and its newest seq: a session
is audited again only when it has new events (an audit takes about a second)."""
_AUDITS_KEPT = 256


def _audited(store: EventStore, session_id: str, last_seq: int) -> list[dict[str, Any]]:
    key = (str(store.path), session_id, last_seq)
    if key in _AUDITS:
        _AUDITS.move_to_end(key)
        return _AUDITS[key]
    found: list[dict[str, Any]] = audit_json(store, session_id)["compactions"]
    _AUDITS[key] = found
    while len(_AUDITS) > _AUDITS_KEPT:
        _AUDITS.popitem(last=False)
    return found


def live_sessions(store: EventStore, limit: int = LIVE_SHOWN) -> list[LiveSession]:
    """The ``limit`` most recently imported live sessions of Claude Code and Codex
    transcripts, newest first."""
    out = []
    for sid, meta, agent, at, last_seq in store.query(_RECENT, [limit]).rows():
        source, identity = version_of(meta)
        if not isinstance(source, str) or not isinstance(identity, str):
            continue
        found = figures_at(Path(source)) or ()
        figures = next((f for f in found if f.session_id == identity), None)
        audit = _audited(store, str(sid), int(last_seq))
        out.append(LiveSession(str(sid), identity, source, str(agent or ""), at, figures, audit))
    return out
