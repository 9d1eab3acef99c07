"""Every session in ../shared/data/transcripts replayed at 16k and 32k-token windows.

Through ``CompactionSession`` with the offline ``ExtractiveSummarizer``: no exception, no invalid
view, no view over the window, and the task message in every view.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.importers import ImportedSession, import_path
from analytics.replay import replay_session
from compactor import (
    CompactionOffloader,
    CompactionRecord,
    CompactionTier,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    find_task_index,
    validate_history,
)

TRANSCRIPTS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "transcripts"


@pytest.fixture(scope="module")
def sessions() -> list[ImportedSession]:
    found, issues = import_path(TRANSCRIPTS)
    assert issues == [] or all("manifest" in i.path or i.path.endswith(".md") for i in issues)
    assert found, f"no transcripts under {TRANSCRIPTS}"
    return found


def _task_probe(msgs: list[Message]) -> tuple[int, str | None]:
    """(index of the task message, the start of its text)."""
    idx = find_task_index(msgs)
    if idx is None:
        return len(msgs), None
    text = msgs[idx].content.strip()
    return idx, text[:100] if text else None


@pytest.mark.parametrize("window", [16_000, 32_000])
def test_every_transcript_replays_with_valid_views_under_the_window(
    sessions: list[ImportedSession], window: int, tmp_path: Path
) -> None:
    base = ProgressiveCompactor(
        ExtractiveSummarizer(), window, offloader=CompactionOffloader(tmp_path, "replay")
    )
    problems: list[str] = []
    tiers: set[CompactionTier] = set()
    for imported in sessions:
        task_at, probe = _task_probe(imported.messages)

        def check(
            turn: int,
            view: list[Message],
            record: CompactionRecord,
            s: ImportedSession = imported,
            probe: str | None = probe,
            task_at: int = task_at,
        ) -> None:
            where = f"{s.source_path} [{s.session_id}] tier {record.tier.name}"
            if bad := validate_history(view):
                problems.append(f"{where}: invalid view: {bad[:2]}")
            if base.tokens(view) > window:
                problems.append(f"{where}: view {base.tokens(view)} tokens > window {window}")
            if turn > task_at and probe and not any(probe in m.content for m in view):
                problems.append(f"{where}: the task is missing from the view")

        result = replay_session(imported, base, on_view=check)
        tiers.update(r.tier for r in result.effective)
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
