"""Hand-built sessions with known sizes for the tuning tests.

``six_turn_session``: a 40-byte system prompt, a 60-byte task, then five exchanges (an assistant
message calling ``run`` with ``{"command":"ls"}``: 21 bytes with its id; a 400-byte result: 402
bytes with its id) and a closing assistant message: six turns.
"""

from __future__ import annotations

from analytics.importers import ImportedSession
from compactor import Message, PreviousCompaction, SummaryResult, ToolCall

SUMMARY_TEXT = "## Anchors\n### User Intent\nfix it\n## Summary\n" + "s" * 37
"""82 bytes (20 tokens); with the 18-byte summary prefix the summary message is 100 bytes."""


def six_turn_session(session_id: str = "six", *, model: str | None = None) -> ImportedSession:
    msgs = [Message(role="system", content="S" * 40), Message(role="user", content="T" * 60)]
    for k in range(1, 6):
        call = ToolCall(id=f"c{k}", name="run", arguments='{"command":"ls"}')
        msgs.append(Message(role="assistant", tool_calls=[call]))
        msgs.append(Message(role="tool", content="x" * 400, tool_call_id=f"c{k}"))
    msgs.append(Message(role="assistant", content="done"))
    return ImportedSession(
        session_id=session_id, source_path="built", format="openai", messages=msgs, model=model
    )


class FixedSummarizer:
    """Always answers ``SUMMARY_TEXT``."""

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        return SummaryResult(text=SUMMARY_TEXT, model="fixed")
