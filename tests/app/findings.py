"""A store whose post-mortems have every outcome the emergencies page must say, from real data.

``build_findings_home`` replays two real transcripts at 16k through the same code the CLI runs:
the Claude Code session ``fe5e1c67`` (a main chain and five sub-agent chains: fixed prompts,
bursts and growth, verified fixes, an Emergency estimated far above any view it sent, and
every summary falling back to trimming) and the mini-swe-agent run ``marshmallow-1359`` (whose
baseline did not reproduce its emergency when the issue was filed). It projects them, runs the
jobs and the counterfactuals, and keeps what the tests compare the pages with, read here with
SQL and from the transcripts themselves, not from the pages' own queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analytics.cli.commands import run_replay
from analytics.importers import ImportedSession, import_path
from analytics.queries.counterfactual_job import COUNTERFACTUAL_JOB
from analytics.queries.findings import postmortem_json
from analytics.queries.materialize import refresh
from analytics.store import open_store
from analytics.store.projector import Projector
from tests.app.fixtures import TRANSCRIPTS, compactor_at

CLAUDE = (
    "claude-code-viewer/mock-global-claude-dir/projects/sample-project/"
    "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
)
MARSHMALLOW = (
    "mini-swe-agent/output/deepseek_reasoner_dev/marshmallow-code__marshmallow-1359/"
    "marshmallow-code__marshmallow-1359.traj.json"
)
WINDOW = 16_000


@dataclass
class FindingsHome:
    home: Path
    effective: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per session, its effective compactions in seq order (id, tier, tokens_before,
    tokens_after)."""
    view_peak: dict[str, int] = field(default_factory=dict)
    """Per session, the largest view it sent (tokens)."""
    postmortems: list[dict[str, Any]] = field(default_factory=list)
    """``postmortem --json``'s post-mortems, counterfactuals included."""
    transcripts: dict[str, ImportedSession] = field(default_factory=dict)
    """The transcripts as imported, by their session id (before ``@window``)."""

    def session(self, prefix: str) -> str:
        return next(s for s in self.effective if s.startswith(prefix))

    def transcript(self, session_id: str) -> ImportedSession:
        return self.transcripts[session_id.rsplit("@", 1)[0]]


def build_findings_home(home: Path) -> FindingsHome:
    """The two replays, projected, with every job and the counterfactuals run (store closed)."""
    home.mkdir(parents=True, exist_ok=True)
    paths = [TRANSCRIPTS / CLAUDE, TRANSCRIPTS / MARSHMALLOW]
    run_replay(paths, home, compactor_at(home, WINDOW))
    with open_store(home) as store:
        Projector(store, home / "spool").ingest()
        refresh(store)
        refresh(store, (COUNTERFACTUAL_JOB,))
        found = FindingsHome(home, postmortems=postmortem_json(store)["postmortems"])
        rows = store.query(
            """SELECT session_id, id, tier, tokens_before, tokens_after FROM compactions
               WHERE coalesce(effective, true) ORDER BY session_id, seq"""
        )
        for row in rows.iter_rows(named=True):
            found.effective.setdefault(str(row.pop("session_id")), []).append(row)
        peaks = store.query("SELECT session_id, max(tokens) AS peak FROM turns GROUP BY 1")
        found.view_peak = {str(s): int(p) for s, p in peaks.iter_rows()}
    for path in paths:
        sessions, _issues = import_path(path)
        found.transcripts.update({s.session_id: s for s in sessions})
    return found
