"""Every session in ../shared/data/transcripts replayed at 8k, 16k and 32k-token windows.

Through ``CompactionSession`` with the offline ``ExtractiveSummarizer``: no exception, no invalid
view, no view over the window, and the whole task text in every view: verbatim, or, for a task
too large for its share of the window, cut in the middle with both ends kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.importers import ImportedSession, import_path
from analytics.replay.driver import replay_session
from analytics.tuning.strategies import task_index
from compactor import (
    CompactionOffloader,
    CompactionRecord,
    CompactionTier,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    estimate_tokens,
    validate_history,
)
from tests.transcripts import DEV, TRANSCRIPTS


@pytest.fixture(scope="module")
def sessions() -> list[ImportedSession]:
    found, issues = import_path(DEV)
    assert issues == [] or all("manifest" in i.path or i.path.endswith(".md") for i in issues)
    assert found, f"no transcripts under {TRANSCRIPTS}"
    return found


TRUNCATION_MARK = "bytes truncated by compactlens]"
EDGE = 80


def _task_in_view(task: str, view: list[Message], window: int) -> str | None:
    """None when the task is in ``view`` as required, else what is wrong."""
    if any(task in m.content for m in view):
        return None
    head, tail = task[:EDGE], task[-EDGE:]
    cut = [m for m in view if TRUNCATION_MARK in m.content and head in m.content]
    if not cut:
        return "the task is missing from the view"
    if tail not in cut[0].content:
        return "the task lost its end"
    if estimate_tokens([Message(role="user", content=task)]) <= window // 8:
        return "a task well within a quarter of the window was cut"
    return None


@pytest.mark.parametrize("window", [8_000, 16_000, 32_000])
def test_every_transcript_replays_with_valid_views_and_the_whole_task(
    sessions: list[ImportedSession], window: int, tmp_path: Path
) -> None:
    base = ProgressiveCompactor(
        ExtractiveSummarizer(), window, offloader=CompactionOffloader(tmp_path, "replay")
    )
    problems: list[str] = []
    views = 0
    tiers: set[CompactionTier] = set()
    for imported in sessions:
        task_at = task_index(imported.messages)
        task = imported.messages[task_at].content if task_at is not None else ""

        def check(
            turn: int,
            view: list[Message],
            record: CompactionRecord,
            s: ImportedSession = imported,
            task: str = task,
            task_at: int | None = task_at,
        ) -> None:
            nonlocal views
            views += 1
            where = f"{s.source_path} [{s.session_id}] turn {turn} tier {record.tier.name}"
            if bad := validate_history(view):
                problems.append(f"{where}: invalid view: {bad[:2]}")
            if base.tokens(view) > window:
                problems.append(f"{where}: view {base.tokens(view)} tokens > window {window}")
            late = task_at is not None and turn > task_at and task.strip()
            if late and (wrong := _task_in_view(task, view, window)):
                problems.append(f"{where}: {wrong}")

        result = replay_session(imported, base, on_view=check)
        tiers.update(r.tier for r in result.effective)
    assert views > 1000, "every transcript must really be replayed"
    assert problems == [], "\n".join(problems[:20])
    assert {CompactionTier.WARN, CompactionTier.SOFT} <= tiers, "replays must really compact"


def test_replays_calibrate_on_the_prompt_size_the_agent_really_sent(
    sessions: list[ImportedSession], tmp_path: Path
) -> None:
    """Claude Code's reported prompts include ~15k tokens of harness prompt and tool schemas
    that the transcript does not show; the replay learns that overhead from the usage."""
    claude = next(s for s in sessions if s.format == "claude-code" and len(s.usage) > 10)
    base = ProgressiveCompactor(
        ExtractiveSummarizer(), 1_000_000, offloader=CompactionOffloader(tmp_path, "cal")
    )
    seen: list[str] = []
    replay_session(claude, base, on_view=lambda _i, _v, r: seen.append(r.estimator))
    reported = [u.input_tokens for u in claude.usage if u.input_tokens]
    first_turn_estimate = base.tokens(claude.messages[: claude.turns[0]])
    overhead = float(seen[-1].split("+")[1])
    assert overhead > 0.5 * (min(reported) - first_turn_estimate)
    assert min(reported) - first_turn_estimate > 5000, "the harness overhead is in the data"
    plain: list[str] = []
    replay_session(
        claude, base, calibrate=False, on_view=lambda _i, _v, r: plain.append(r.estimator)
    )
    assert set(plain) == {"bytes/4"}
