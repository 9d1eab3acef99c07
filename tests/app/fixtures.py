"""A fixture store for the app tests: real transcripts replayed at 16k, plus a hostile session.

``build_home`` replays two mini-swe-agent trajectories and a Claude Code session through the
compactor (offline extractive summariser, 16k window, offload files under the home) with the
same code the CLI runs, then runs one synthetic session whose content holds ``<script>`` and
HTML, with a symbolic link planted in its offload folder that points outside it, and one whose
summariser (``DecisionsSummarizer``, scripted) replaces a key decision at its second compaction:
a silent drop the retention page must show. Nothing is mocked; the store is a real DuckDB file
under the given folder, closed when this returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analytics.cli.commands import run_replay
from analytics.queries.materialize import refresh
from analytics.queries.stats import fleet_stats
from analytics.store import EventStore, open_store
from analytics.store.projector import Projector
from compactor import (
    CompactionOffloader,
    CompactionSession,
    ExtractiveSummarizer,
    Message,
    PreviousCompaction,
    ProgressiveCompactor,
    SpoolSink,
    SummaryResult,
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
DECISIONS_ID = "decisions-session"
DROPPED_DECISION = "Use SQLite for the cache layer"
SCRIPT = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


@dataclass
class FixtureHome:
    home: Path
    sessions: list[str] = field(default_factory=list)
    hostile: str = HOSTILE_ID
    decisions: str = DECISIONS_ID
    effective: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per session, its effective compactions in seq order (id, tier, tokens_before,
    tokens_after), read from the store with SQL: the truth the pickers are checked against."""
    stats: dict[str, Any] = field(default_factory=dict)
    """``fleet_stats`` of the built store (what ``compactlens stats --json`` prints)."""
    by_window: dict[str, Any] = field(default_factory=dict)
    """``fleet_stats(by=["window"])``: what ``compactlens stats --json --by window`` prints."""
    windows: dict[str, int] = field(default_factory=dict)
    """Each session's context window, read with SQL."""
    turn_costs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per session, from the costs job's table and ``usage`` with SQL: turns priced, cost
    (summed), profile, and the cache reads the provider reported (summed)."""


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


class DecisionsSummarizer:
    """A scripted summariser: the first summary keeps two decisions, every later one keeps one
    of them and a new one, so the SQLite decision vanishes with nothing like it after."""

    def __init__(self) -> None:
        self.calls = 0

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        self.calls += 1
        decisions = (
            [DROPPED_DECISION, "Keep the public API unchanged"]
            if self.calls == 1
            else ["Keep the public API unchanged", "Retry the network call three times"]
        )
        text = (
            "## Anchors\n\n### User Intent\nFix the flaky login test\n\n"
            "### Execution Progress\n- read the tests\n\n### Key Decisions\n"
            + "".join(f"- {d}\n" for d in decisions)
            + "\n### Tried Solutions\nN/A\n\n### Next Steps\n- run the tests\n\n"
            f"## Summary\nSummary number {self.calls} of the work so far.\n"
        )
        return SummaryResult(text=text, model="scripted")


def run_decisions(home: Path, window: int = 8_000) -> None:
    """A plain-text session summarised by ``DecisionsSummarizer`` into ``home/spool``."""
    sink = SpoolSink(home / "spool")
    compactor = ProgressiveCompactor(
        DecisionsSummarizer(), window, offloader=CompactionOffloader(home, DECISIONS_ID)
    )
    session = CompactionSession(
        compactor, "You are a coding agent.", session_id=DECISIONS_ID, event_sink=sink
    )
    session.append(Message(role="user", content="Fix the flaky login test in auth/tests.py."))
    for i in range(20):
        session.prepare()
        session.append(Message(role="assistant", content=f"Step {i}: " + "reading code. " * 150))
        session.append(Message(role="user", content=f"Result {i}: " + "looks fine. " * 150))
    session.close()
    sink.close()


def _effective(store: EventStore) -> dict[str, list[dict[str, Any]]]:
    rows = store.query(
        """SELECT session_id, id, tier, tokens_before, tokens_after FROM compactions
           WHERE coalesce(effective, true) ORDER BY session_id, seq"""
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows.iter_rows(named=True):
        out.setdefault(str(row.pop("session_id")), []).append(row)
    return out


def _turn_costs(store: EventStore) -> dict[str, dict[str, Any]]:
    rows = store.query(
        """SELECT c.session_id, count(*) AS turns, sum(c.cost) AS cost,
                  any_value(c.profile) AS profile, sum(c.cache_read_tokens) AS cache_read,
                  (SELECT sum(u.cache_read_tokens) FROM usage u
                   WHERE u.session_id = c.session_id) AS reported_cache_read
           FROM job_turn_costs c GROUP BY c.session_id"""
    )
    return {str(r.pop("session_id")): r for r in rows.iter_rows(named=True)}


def build_home(home: Path) -> FixtureHome:
    """Replays and the hostile session, projected into ``home``'s store (closed after)."""
    home.mkdir(parents=True, exist_ok=True)
    report = run_replay([TRANSCRIPTS / p for p in REPLAYED], home, compactor_at(home))
    run_hostile(home)
    run_decisions(home)
    with open_store(home) as store:
        Projector(store, home / "spool").ingest()
        refresh(store)
        ids = [str(s) for s in store.query("SELECT session_id FROM sessions").to_series()]
        stats = fleet_stats(store)
        by_window = fleet_stats(store, by=["window"])
        effective = _effective(store)
        windows = dict(store.query("SELECT session_id, context_window FROM sessions").iter_rows())
        costs = _turn_costs(store)
    outside = home / "secret.txt"
    outside.write_text("top secret\n", encoding="utf-8")
    folder = next((home / ".compactlens" / "tool_results").glob("hostile-*"))
    (folder / "escape.txt").symlink_to(outside)
    assert report.sessions >= 3, report
    return FixtureHome(
        home,
        sorted(ids),
        stats=stats,
        effective=effective,
        by_window=by_window,
        windows=windows,
        turn_costs=costs,
    )
