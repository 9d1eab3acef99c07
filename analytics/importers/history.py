"""History a transcript does not hold: sessions that start mid-conversation.

A transcript cut from a longer session (a resumed Claude Code session, a file whose first lines
were removed) begins with a prompt the provider counted far above what the file's own messages
explain. The gap between a report and the estimate of what it describes is the harness's hidden
overhead (its system prompt and tool schemas: the same every call) plus any history the file
does not show. The smallest gap of the session bounds the overhead from above, so the first
report's gap beyond it is missing history; when no smaller report follows, a cut the file
itself shows (``metadata["starts_mid_session"]``) or a gap no harness of that kind carries
says so, against the harness's usual overhead.
"""

from __future__ import annotations

from analytics.importers.native import view_tokens
from analytics.importers.session import ImportedSession, TurnUsage
from compactor import ByteEstimator, message_bytes

USUAL_OVERHEAD: dict[str, tuple[int, int]] = {
    "claude-code": (11_000, 60_000),
    "codex": (2_000, 40_000),
    "aider": (0, 200_000),
}
"""(least, most) tokens a harness adds unseen to every prompt, by agent: Claude Code 1.x adds
about 11.6k-18.5k, 2.x about 39k-50k with its tools and CLAUDE.md (measured on the dev
transcripts that start at their beginning). aider sends its repo map and the files in the chat,
any size: only a cut it shows counts. Others: ``DEFAULT_OVERHEAD``."""
DEFAULT_OVERHEAD = (0, 20_000)
BYTES_PER_TOKEN = ByteEstimator.bytes_per_token
MIN_MISSING = 1_000
"""A later gap must be this much below the first to show the overhead (not noise: a cached
block counted differently)."""


class Visible:
    """What each report's prompt held that the file shows (bytes/4): the history before it,
    or, after the harness compacted, the compaction's view and what followed. Prefix sums, so
    a session's every report costs one pass over its messages."""

    def __init__(self, session: ImportedSession) -> None:
        self._session = session
        self._prefix = [0]
        for message in session.messages:
            self._prefix.append(self._prefix[-1] + message_bytes(message))

    def _tokens(self, lo: int, hi: int) -> int:
        return (self._prefix[hi] - self._prefix[lo]) // BYTES_PER_TOKEN

    def __call__(self, usage: TurnUsage) -> int:
        at = min(usage.message_index, len(self._prefix) - 1)
        before = [c for c in self._session.compactions if c.at <= at]
        if usage.prompt == "history" or not before:
            return self._tokens(0, at)
        last = before[-1]
        return view_tokens(self._session.messages, last.after) + self._tokens(last.at, at)


def report_gaps(session: ImportedSession) -> list[int]:
    """Each report's prompt minus what the file shows of it, in report order."""
    visible = Visible(session)
    return [
        u.input_tokens - visible(u)
        for u in session.usage
        if u.input_tokens is not None and u.input_tokens > 0
    ]


def missing_history_tokens(session: ImportedSession) -> int:
    """About how many tokens of earlier history the session's first prompt held that the file
    does not (0 when nothing says any is missing).

    Only two things say so: the file itself (a first line answering one it does not hold) or a
    first gap larger than any overhead the harness carries. Then the overhead is the smallest
    gap of the session, when a later report shows one smaller than the first (after the
    harness's own compaction); else the harness's least (a cut file) or most overhead. A gap
    that merely shrinks (aider dropping its repo map) is not evidence.
    """
    gaps = report_gaps(session)
    if not gaps:
        return 0
    first, smallest = gaps[0], min(gaps)
    least, most = USUAL_OVERHEAD.get(session.agent or session.format, DEFAULT_OVERHEAD)
    cut = bool(session.metadata.get("starts_mid_session"))
    if not cut and first <= most:
        return 0
    if first - smallest >= MIN_MISSING:
        overhead = min(max(smallest, 0), most)
    else:
        overhead = least if cut else most
    return max(first - overhead, 0)
