"""What the native-compaction importers share: the harness's view as it compacts, the figures
of each ``NativeCompaction``, and usage after a compaction.

A harness's view starts as the whole history; each compaction replaces it with what the harness
kept and the summary it wrote, and messages appended afterwards join that view. ``HarnessView``
tracks this, so an importer only says, per compaction, what the harness kept and where it put
its summary (``before`` is then the view it replaced). Token figures the harness did not record
are estimated with ``compactor.estimate_tokens`` (UTF-8 bytes / 4) over the view's messages.
Reading files and knowing any harness's format is the importers' job, not this module's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from analytics.importers.session import Harness, NativeCompaction, TurnUsage, ViewRef
from compactor import Anchor, Message, estimate_tokens


class HarnessView:
    """The harness's view of the history: the whole history until it first compacts, then what
    its latest compaction left followed by every message appended since."""

    def __init__(self) -> None:
        self._items: list[ViewRef] = []
        self._seen = 0

    def upto(self, at: int) -> list[ViewRef]:
        """The view when ``messages[:at]`` is the history (just before a compaction there)."""
        return [*self._items, *range(self._seen, at)]

    def compacted(self, messages: Sequence[Message], at: int, found: Found) -> NativeCompaction:
        """The compaction ``found`` at history length ``at``, with its figures; the view is
        then what it left."""
        done = native_compaction(messages, at, found)
        self._items, self._seen = list(found.after), at
        return done


MAX_SUMMARY_CHARS = 64 * 1024
"""The most of a harness's summary an import keeps (real ones are under 16 KB): a longer one is
its head and a note of the cut, so that a summary of megabytes costs no more than this in the
record, the view after and its anchors (its full size still counts in ``tokens_after``)."""


def cut_summary(text: str | None) -> tuple[str | None, int]:
    """The summary as kept (whole up to ``MAX_SUMMARY_CHARS``, else its head and a line saying
    how long it was), and the estimated tokens of the part not kept, which the harness's view
    after the compaction still held (``Found.hidden_tokens``)."""
    if text is None or len(text) <= MAX_SUMMARY_CHARS:
        return text, 0
    head = text[:MAX_SUMMARY_CHARS]
    kept = (
        f"{head}\n[compactlens: summary cut here; only the first {MAX_SUMMARY_CHARS:,} "
        f"of {len(text):,} characters are kept]"
    )
    full = estimate_tokens([Message(role="user", content=text)])
    return kept, max(0, full - estimate_tokens([Message(role="user", content=kept)]))


def view_tokens(messages: Sequence[Message], refs: Sequence[ViewRef]) -> int:
    """Our estimate of a view: ``estimate_tokens`` of the messages it refers to or holds."""
    return estimate_tokens([messages[r] if isinstance(r, int) else r for r in refs])


@dataclass(frozen=True)
class Found:
    """One compaction as a harness's transcript records it, before its figures are worked out.

    ``harness_tokens`` is the harness's own size of the context it compacted (None if it
    recorded none), ``harness_tokens_after`` its own size of what it left (None: estimated);
    ``hidden_tokens`` what ``after`` holds that its messages do not show (the
    estimated size of an encrypted summary, or of the part of a long one not kept:
    ``cut_summary``).
    """

    harness: Harness
    native_id: str
    line: int | None
    timestamp: datetime | None
    before: list[ViewRef]
    after: list[ViewRef]
    summary_text: str | None
    anchors: list[Anchor]
    trigger: Literal["auto", "manual"] = "auto"
    harness_tokens: int | None = None
    harness_tokens_after: int | None = None
    summary_encrypted: bool = False
    hidden_tokens: int = 0
    context_window: int = 0


def native_compaction(messages: Sequence[Message], at: int, found: Found) -> NativeCompaction:
    """The ``NativeCompaction`` at history length ``at``, with its token figures."""
    measured = found.harness_tokens  # None or 0: the harness recorded no figure
    left = found.harness_tokens_after
    return NativeCompaction(
        harness=found.harness,
        native_id=found.native_id,
        line=found.line,
        at=at,
        timestamp=found.timestamp,
        trigger=found.trigger,
        tokens_before=measured if measured else view_tokens(messages, found.before),
        tokens_before_source="harness" if measured else "estimated",
        tokens_after=left if left else view_tokens(messages, found.after) + found.hidden_tokens,
        tokens_after_source="harness" if left else "estimated",
        summary_text=found.summary_text,
        summary_encrypted=found.summary_encrypted,
        before=found.before,
        after=found.after,
        anchors=found.anchors,
        context_window=found.context_window,
    )


def usage_after_compactions(
    usage: Sequence[TurnUsage], compactions: Sequence[NativeCompaction]
) -> list[TurnUsage]:
    """``usage`` with every call after the first compaction marked ``prompt="view"``: its
    prompt was the harness's compacted view, not the history."""
    if not compactions:
        return list(usage)
    first = compactions[0].at
    return [
        u.model_copy(update={"prompt": "view"}) if u.message_index >= first else u for u in usage
    ]
