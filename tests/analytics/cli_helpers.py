"""Paths and small helpers shared by the command-line tests (test_cli*.py).

``run`` invokes the typer app in-process and fails on any traceback in the output; ``count``
reads one figure straight from the store; ``subprocess_env`` lets a child process import the
project from the source tree, unbuffered.
"""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner, Result

from analytics.cli.main import app
from analytics.store import open_store

TUNE_FIGURES = (
    "tokens_billed",
    "saved_share",
    "summarizer_tokens",
    "turns_over_window",
    "emergencies",
    "artifact_retention",
    "anchor_retention",
    "violations",
    "cost",
    "cache_read_tokens",
    "cache_write_tokens",
)
"""What a ``tune --json`` strategy row reports besides its name, kind and config (SPEC 6),
written here as the contract, not read from the code under test."""
ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = ROOT.parent / "shared" / "data" / "transcripts"
SWE_FILE = TRANSCRIPTS / "swe-agent/trajectories/demonstrations/function_calling_simple.traj"
MINI_FILE = (
    TRANSCRIPTS / "mini-swe-agent/output/deepseek_chat_test_1-100/django__django-13660"
    "/django__django-13660.traj.json"
)


def run(*args: str | Path) -> Result:
    """``compactlens ARGS`` in this process; no traceback may reach the output."""
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert "Traceback" not in result.output, result.output
    return result


def count(home: Path, sql: str) -> int:
    with open_store(home, read_only=True) as store:
        return int(store.query(sql).item())


def spool_bytes(home: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((home / "spool").glob("*.jsonl"))}


def subprocess_env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
