"""What ``compactlens watch`` says at once about each live session it imported.

After a transcript is imported, one line per session with usage or compactions: the context the
provider last reported (the whole prompt of the latest call, cache included) against the window
where the transcript records it, the distance to the next automatic compaction (the harness
records no threshold, so the size at which its last automatic compaction fired stands in for it),
and each native compaction's tokens before → after. When a compaction appeared since the last
look, and the watcher holds the store, the audit of it (``analytics.queries.audit``): the
artifacts and user messages it lost, the files read again after it, whether it made the context
bigger. The figures are ``analytics.queries.live``'s (the app's live page shows the same);
this module only words them, and prints and writes nothing.
"""

from __future__ import annotations

from typing import Any

from analytics.queries.audit import audit_json
from analytics.queries.live import LIVE_VERSIONS, SessionFigures, live_figures, version_of
from analytics.store import EventStore

__all__ = ["audit_lines", "live_figures", "live_line"]

LOST_SHOWN = 3
"""How many lost artifacts a line names (the rest are counted)."""


def live_line(figures: SessionFigures) -> str:
    tokens, how = figures.context_now
    parts = []
    if tokens is not None:
        context = f"context {tokens:,} tokens ({how})"
        if figures.window:
            context += f" of a {figures.window:,} window ({tokens / figures.window:.0%})"
        parts.append(context)
    distance = figures.next_compaction
    if distance is not None:
        parts.append(
            f"next automatic compaction expected near {figures.fires_at:,} (where the last "
            f"fired): {distance}"
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


def audit_lines(store: EventStore, source_file: str, identity: str, first: int) -> list[str]:
    """One line per native compaction of the stored live version of ``identity`` (imported
    from ``source_file``), from its ``first`` on: what it lost, and whether it grew."""
    found = [
        sid
        for sid, meta in store.query(LIVE_VERSIONS).rows()
        if version_of(meta) == (source_file, identity)
    ]
    if len(found) != 1:
        return []
    rows = audit_json(store, str(found[0]))["compactions"]
    return [_audit_line(identity, n, row) for n, row in enumerate(rows, 1) if n > first]


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
