"""Replaying a session the harness compacted itself replays the original history.

So our compactor and the harness's can be compared on the same session: the replay appends
every message the harness saw before its compactions and after them, never its summaries, and
calibrates only on the provider usage of calls whose prompt was that history (after the
harness's compaction, its usage describes its own compacted view).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.importers import iter_sessions
from analytics.replay.driver import replay_session
from compactor import ExtractiveSummarizer, MemorySink, ProgressiveCompactor
from compactor.events import MessageAppended, UsageReported
from tests.transcripts import NATIVE

needs_native = pytest.mark.skipif(not NATIVE.is_dir(), reason=f"{NATIVE} not present")
CLAUDE = sorted(NATIVE.glob("claude-code/**/*.jsonl")) if NATIVE.is_dir() else []


@needs_native
@pytest.mark.parametrize("path", CLAUDE, ids=lambda p: p.parts[-4])
def test_replaying_a_natively_compacted_session_replays_its_original_history(
    path: Path, tmp_path: Path
) -> None:
    [imported] = iter_sessions(path)
    summaries = {c.summary_text for c in imported.compactions}
    sink = MemorySink()
    compactor = ProgressiveCompactor(ExtractiveSummarizer(), 160_000)

    result = replay_session(imported, compactor, event_sink=sink)

    appended = [e.payload for e in sink.events if isinstance(e.payload, MessageAppended)]
    assert [m.content for m in appended] == [m.content for m in imported.messages]
    assert not summaries & {m.content for m in appended}
    first = imported.compactions[0].at
    history = [u for u in imported.usage if u.input_tokens and u.message_index < first]
    assert history and all(u.prompt == "history" for u in history)
    assert all(u.prompt == "view" for u in imported.usage if u.message_index >= first)
    reported = [e.payload for e in sink.events if isinstance(e.payload, UsageReported)]
    assert [r.input_tokens for r in reported] == [u.input_tokens for u in history]
    assert result.turns == len(imported.turns)
