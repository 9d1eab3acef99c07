"""A store of real Claude Code sessions in which Claude Code compacted its own context.

``build_native_home`` imports two files of ``../shared/data/transcripts/native/claude-code``
(one compaction, and two) with the code ``compactlens import`` runs, and keeps what the harness
page is compared with: ``audit --json`` of the built store, and each file's own
``compact_boundary`` lines (trigger and ``preTokens``) read from the raw JSONL, not from the
importer. The store is a real DuckDB file under the given folder, closed when this returns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analytics.cli.commands import run_import
from analytics.queries.audit import audit_json
from analytics.queries.materialize import refresh
from analytics.store import open_store
from tests.app.fixtures import TRANSCRIPTS

NATIVE = TRANSCRIPTS / "native" / "claude-code"
FILES = ("a6/e4c2a0fbd1/0/full.jsonl", "44/785715c3f5/2/full.jsonl")


@dataclass
class NativeHome:
    home: Path
    audit: dict[str, Any] = field(default_factory=dict)
    """``audit --json`` of the whole store."""
    boundaries: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per file (relative to ``NATIVE``), its ``compact_boundary`` lines' compactMetadata."""

    def entries(self, session_id: str) -> list[dict[str, Any]]:
        return [c for c in self.audit["compactions"] if c["session_id"] == session_id]

    def session_of(self, file: str) -> str:
        """The session holding as many native compactions as ``file`` has boundaries, each
        with the harness's own ``preTokens``."""
        tokens = [b["preTokens"] for b in self.boundaries[file]]
        sessions = {c["session_id"] for c in self.audit["compactions"]}
        found = [s for s in sessions if [c["tokens_before"] for c in self.entries(s)] == tokens]
        return str(found[0])


def raw_boundaries(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else {}
        if record.get("subtype") == "compact_boundary":
            out.append(record["compactMetadata"])
    return out


def build_native_home(home: Path) -> NativeHome:
    home.mkdir(parents=True, exist_ok=True)
    report = run_import([NATIVE / f for f in FILES], home)
    assert not report.issues, report.issues
    with open_store(home) as store:
        refresh(store)
        audit = audit_json(store)
    return NativeHome(home, audit, {f: raw_boundaries(NATIVE / f) for f in FILES})
