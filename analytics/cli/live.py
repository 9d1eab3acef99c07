"""What ``compactlens watch`` says at once about each live session it imported.

After a transcript is imported, one line per session with usage or compactions: the context the
provider last reported (the whole prompt of the latest call, cache included) against the window
where the transcript records it, the distance to the next automatic compaction (the harness
records no threshold, so the size at which its last automatic compaction fired stands in for it),
and each native compaction's tokens before → after. When a compaction appeared since the last
look, and the watcher holds the store, the audit of it (``analytics.queries.audit``): the
artifacts and user messages it lost, the files read again after it, whether it made the context
bigger. The figures come from the transcript as its importer reads it and from the store's
queries; this module prints nothing and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analytics.errors import AnalyticsError
from analytics.importers import ImportedSession, ImportIssue, iter_sessions
from analytics.queries.audit import audit_json
from analytics.store import EventStore

LOST_SHOWN = 3
"""How many lost artifacts a line names (the rest are counted)."""


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


def live_line(figures: SessionFigures) -> str:
    tokens, how = figures.context_now
    parts = []
    if tokens is not None:
        context = f"context {tokens:,} tokens ({how})"
        if figures.window:
            context += f" of a {figures.window:,} window ({tokens / figures.window:.0%})"
        parts.append(context)
    fires = figures.fires_at
    if fires is not None and tokens is not None:
        left = fires - tokens
        parts.append(
            f"next automatic compaction expected near {fires:,} (where the last fired): "
            + (f"{left:,} tokens away" if left > 0 else "due")
        )
    n = len(figures.compactions)
    if n:
        sizes = ", ".join(
            f"{c.trigger} {c.tokens_before:,} → {c.tokens_after:,}" for c in figures.compactions
        )
        parts.append(f"{n} compaction{'s' * (n != 1)}: {sizes}")
    else:
        parts.append("no compaction yet")
    return f"  {figures.session_id}: " + "; ".join(parts)


LIVE_VERSIONS = "SELECT session_id, metadata FROM sessions WHERE deleted_at IS NULL"


def audit_lines(store: EventStore, source_file: str, identity: str, first: int) -> list[str]:
    """One line per native compaction of the stored live version of ``identity`` (imported
    from ``source_file``), from its ``first`` on: what it lost, and whether it grew."""
    found = [
        sid
        for sid, meta in store.query(LIVE_VERSIONS).rows()
        if _version_of(meta) == (source_file, identity)
    ]
    if len(found) != 1:
        return []
    rows = audit_json(store, str(found[0]))["compactions"]
    return [_audit_line(identity, n, row) for n, row in enumerate(rows, 1) if n > first]


def _version_of(meta: object) -> tuple[object, object]:
    """(source file, identity) of a stored session's metadata (a JSON text or a dict)."""
    try:
        data = json.loads(meta) if isinstance(meta, str) else meta
    except ValueError:
        return None, None
    return (
        (data.get("source_file"), data.get("identity")) if isinstance(data, dict) else (None, None)
    )


def _audit_line(identity: str, n: int, row: dict[str, Any]) -> str:
    kept, lost = row["artifacts"]["kept"], row["artifacts"]["lost"]
    said = f"  {identity} compaction {n} ({row['trigger']}, {row['tokens_before']:,} → "
    said += (
        f"{row['tokens_after']:,} tokens): lost {len(lost)} of {len(kept) + len(lost)} artifacts"
    )
    if lost:
        named = ", ".join(str(a) for a in lost[:LOST_SHOWN])
        said += f" ({named}{', …' if len(lost) > LOST_SHOWN else ''})"
    users = row["user_messages"]
    said += f", {users['lost']} of {users['kept'] + users['lost']} user messages"
    if row["re_reads"]:
        said += f"; {len(row['re_reads'])} read again after it"
    if row.get("grew"):
        said += f"; it made the context bigger (+{row.get('growth_tokens') or 0:,} tokens)"
    elif row.get("grew") is False:
        said += "; it did not make the context bigger"
    return said
