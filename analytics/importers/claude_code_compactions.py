"""Claude Code's own compactions: ``compact_boundary`` lines and their summaries → native ones.

A boundary (``{"type": "system", "subtype": "compact_boundary", "logicalParentUuid": …,
"compactMetadata": {"trigger", "preTokens"}}``) marks where Claude Code replaced its context
with a summary; the user line after it with ``isCompactSummary`` holds the summary text. The
history stays whole: the summary is no message of it, and the chain runs on across the boundary
(``claude_code_chains``). Claude Code keeps no earlier message verbatim, so the view after a
compaction is the summary alone (files it re-attaches are later lines of the chain), the one
before it everything since the previous compaction (and that one's summary); ``tokens_before``
is ``preTokens``. Nothing here reads files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from analytics.importers.claude_code_chains import Boundary
from analytics.importers.native import Found, HarnessView, cut_summary
from analytics.importers.native_anchors import claude_code_anchors
from analytics.importers.reading import RecordError, opt_int, parse_timestamp
from analytics.importers.session import NativeCompaction, ViewRef
from compactor import Message


@dataclass
class Mark:
    """A boundary found in a chain, ``at`` messages into it, and the summary after it."""

    at: int
    boundary: Boundary
    summary: str | None = None


def boundary_of(obj: dict[str, Any], lineno: int, uuid: str) -> tuple[Boundary | None, str]:
    """The boundary a ``compact_boundary`` line records (None for any other line), and a
    problem to report ("" if none): an unreadable ``preTokens`` or ``postTokens`` keeps the
    compaction, its size estimated."""
    if obj.get("type") != "system" or obj.get("subtype") != "compact_boundary":
        return None, ""
    meta = obj.get("compactMetadata")
    meta = meta if isinstance(meta, dict) else {}
    problem = ""
    try:
        pre_tokens = opt_int(meta, "preTokens", "compactMetadata")
    except RecordError as exc:
        pre_tokens, problem = None, f"{exc}; the compaction is kept, its size estimated"
    try:
        post_tokens = opt_int(meta, "postTokens", "compactMetadata")
    except RecordError as exc:
        post_tokens, problem = None, f"{exc}; the compaction is kept, its size after estimated"
    boundary = Boundary(
        uuid=uuid,
        lineno=lineno,
        trigger="manual" if meta.get("trigger") == "manual" else "auto",
        pre_tokens=pre_tokens,
        post_tokens=post_tokens,
        timestamp=stamp if isinstance(stamp := obj.get("timestamp"), str) else None,
    )
    return boundary, problem


def summary_of(obj: dict[str, Any], message: dict[str, Any]) -> str | None:
    """The summary text of a compact summary line (None for any other user line)."""
    if obj.get("isCompactSummary") is not True:
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
    raise RecordError("message.content: expected the summary text, got neither text nor blocks")


def compactions_of(messages: Sequence[Message], marks: Sequence[Mark]) -> list[NativeCompaction]:
    """One ``NativeCompaction`` per boundary of the chain, in order."""
    view = HarnessView()
    out: list[NativeCompaction] = []
    for mark in marks:
        summary, hidden = cut_summary(mark.summary)
        after: list[ViewRef] = []
        if summary is not None:
            after.append(Message(role="user", content=summary))
        found = Found(
            harness="claude-code",
            native_id=mark.boundary.uuid,
            line=mark.boundary.lineno,
            timestamp=parse_timestamp(mark.boundary.timestamp),
            before=view.upto(mark.at),
            after=after,
            summary_text=summary,
            anchors=claude_code_anchors(summary),
            trigger=mark.boundary.trigger,
            harness_tokens=mark.boundary.pre_tokens,
            harness_tokens_after=mark.boundary.post_tokens,
            hidden_tokens=hidden,
        )
        out.append(view.compacted(messages, mark.at, found))
    return out
