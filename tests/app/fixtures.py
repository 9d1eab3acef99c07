"""A fixture store for the app tests: real transcripts replayed at 16k, plus a hostile session.

``build_home`` replays two mini-swe-agent trajectories and a Claude Code session through the
compactor (offline extractive summariser, 16k window, offload files under the home) with the
same code the CLI runs, then runs one synthetic session whose content holds ``<script>`` and
HTML, with a symbolic link planted in its offload folder that points outside it. Nothing is
mocked; the store is a real DuckDB file under the given folder, closed when this returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analytics.cli.commands import run_replay
from analytics.queries.materialize import refresh
from analytics.queries.stats import fleet_stats
from analytics.store import EventStore
from analytics.store.projector import Projector
from compactor import (
    CompactionOffloader,
    CompactionSession,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    SpoolSink,
    ToolCall,
)

TRANSCRIPTS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "transcripts"
REPLAYED = (
    "mini-swe-agent/output/deepseek_chat_dev/sqlfluff__sqlfluff-1763/sqlfluff__sqlfluff-1763.traj.json",
    "mini-swe-agent/output/deepseek_chat_test_1-100/django__django-11910/django__django-11910.traj.json",
    "claude-code-viewer/mock-global-claude-dir/projects/sample-project/"
    "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
)
WINDOW = 16_000
HOSTILE_ID = "hostile-<script>-session"
SCRIPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@dataclass
class FixtureHome:
    home: Path
    sessions: list[str] = field(default_factory=list)
    hostile: str = HOSTILE_ID
    stats: dict[str, Any] = field(default_factory=dict)
    """``fleet_stats`` of the built store (what ``compactlens stats --json`` prints)."""


def compactor_at(
    home: Path, window: int = WINDOW, session: str = "fixture"
) -> ProgressiveCompactor:
    return ProgressiveCompactor(
        ExtractiveSummarizer(), window, offloader=CompactionOffloader(home, session)
    )


def hostile_messages(turns: int = 14) -> list[Message]:
    """A session whose task, tool results and file names carry script and HTML."""
    out = [Message(role="user", content=f"Fix the page {SCRIPT} and **bold** [x](javascript:1)")]
    for i in range(turns):
        call = ToolCall(id=f"call_{i}", name="read_file", arguments='{"path": "page.html"}')
        out.append(Message(role="assistant", content=f"Reading {SCRIPT}", tool_calls=(call,)))
        body = f"<html><body>{SCRIPT}</body></html>\n" + "x = 1  # filler line\n" * 300
        out.append(Message(role="tool", content=body, tool_call_id=f"call_{i}", name="read_file"))
    out.append(Message(role="assistant", content="Done."))
    return out


def run_hostile(home: Path, session_id: str = HOSTILE_ID, window: int = 8_000) -> None:
    """The hostile session through ``CompactionSession`` into ``home/spool`` (not projected)."""
    sink = SpoolSink(home / "spool")
    session = CompactionSession(
        compactor_at(home, window, session_id),
        "You are a web agent.",
        session_id=session_id,
        event_sink=sink,
        agent="hostile",
    )
    for msg in hostile_messages():
        if msg.role == "assistant":
            session.prepare()
        session.append(msg)
    session.close()
    sink.close()


def build_home(home: Path) -> FixtureHome:
    """Replays and the hostile session, projected into ``home``'s store (closed after)."""
    home.mkdir(parents=True, exist_ok=True)
    report = run_replay([TRANSCRIPTS / p for p in REPLAYED], home, compactor_at(home))
    run_hostile(home)
    with EventStore.for_home(home) as store:
        Projector(store, home / "spool").ingest()
        refresh(store)
        ids = [str(s) for s in store.query("SELECT session_id FROM sessions").to_series()]
        stats = fleet_stats(store)
    outside = home / "secret.txt"
    outside.write_text("top secret\n", encoding="utf-8")
    folder = next((home / ".compactlens" / "tool_results").glob("hostile-*"))
    (folder / "escape.txt").symlink_to(outside)
    assert report.sessions >= 3, report
    return FixtureHome(home, sorted(ids), stats=stats)
