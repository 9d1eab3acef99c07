"""A store of live agent loops whose compaction costs more than it saves, and two that do not.

``build_loops`` runs three 40-turn sessions of the same agent (a Claude model: Anthropic
prices, whose prompt cache reads a repeated prefix at a tenth of the input price and writes
a new one at 1.25 times) through ``CompactionSession`` into ``home/spool``, with the offline
extractive summariser (billed as the tokens an LLM would have read and written), then projects
them and runs the jobs:

- ``EAGER``: a 100k window with thresholds near 2% of it, so it compacts every few turns; the
  uncompacted history (about 10k tokens at the end) always fits, and every compaction turns
  the cached prefix into a cache write: compacting costs more than not compacting;
- ``NEVER``: the same window with the default thresholds: nothing compacts, the same cost;
- ``TIGHT``: an 8k window with the default thresholds: it compacts because it must (the
  uncompacted history outgrows the window), so there is no uncompacted cost to compare with.

Nothing is mocked: real sessions, a real spool, a real DuckDB file (closed when this returns).
"""

from __future__ import annotations

import json
from pathlib import Path

from analytics.queries.materialize import refresh
from analytics.store import open_store
from analytics.store.projector import Projector
from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    SpoolSink,
    ToolCall,
)

EAGER, NEVER, TIGHT = "eager-loop", "never-loop", "tight-loop"
MODEL = "claude-sonnet-4-20250514"
TURNS = 40
EAGER_CONFIG = CompactorConfig(
    warn=0.018,
    soft=0.02,
    full=0.024,
    emergency=0.95,
    fallback_target=0.01,
    emergency_target=0.01,
    min_tail_messages=2,
)


def run_loop(home: Path, session_id: str, window: int, config: CompactorConfig) -> None:
    """One 40-turn session: each turn reads a file (an assistant call and a 25-line result)."""
    sink = SpoolSink(home / "spool")
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(),
        window,
        config=config,
        offloader=CompactionOffloader(home, session_id),
    )
    session = CompactionSession(
        compactor,
        "You are a coding agent. " * 40,
        session_id=session_id,
        event_sink=sink,
        model=MODEL,
        agent="loop",
    )
    session.append(Message(role="user", content="Fix the failing test in src/app/models.py."))
    for i in range(TURNS):
        session.prepare()
        call = ToolCall(id=f"c{i}", name="read_file", arguments=json.dumps({"path": f"m{i}.py"}))
        text = f"Step {i}: reading src/app/m{i}.py. " * 8
        session.append(Message(role="assistant", content=text, tool_calls=(call,)))
        body = f"def f{i}(x):\n    return x + {i}\n" * 25
        session.append(Message(role="tool", content=body, tool_call_id=f"c{i}", name="read_file"))
    session.close()
    sink.close()


def build_loops(home: Path) -> Path:
    """The three sessions, projected into ``home``'s store with every job run."""
    home.mkdir(parents=True, exist_ok=True)
    run_loop(home, EAGER, 100_000, EAGER_CONFIG)
    run_loop(home, NEVER, 100_000, CompactorConfig())
    run_loop(home, TIGHT, 8_000, CompactorConfig())
    with open_store(home) as store:
        Projector(store, home / "spool").ingest()
        refresh(store)
    return home
