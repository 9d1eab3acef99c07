"""A session killed (SIGKILL) with events still buffered, resumed by a new process with the
history it persisted (``resume=``): every message reaches the spool exactly once, including the
ones whose events the kill lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from compactor import (
    CompactionSession,
    ExtractiveSummarizer,
    MemorySink,
    Message,
    ProgressiveCompactor,
    SpoolSink,
)
from compactor.events import MessageAppended, parse_event

pytestmark = pytest.mark.e2e  # processes the test signals

REPO = Path(__file__).resolve().parents[2]
SESSION = "crashy"

# The agent persists each message before it appends it (so the spool never holds a message
# the history lacks), prepares a view before each assistant message, and reports progress.
_AGENT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from compactor import CompactionSession, ExtractiveSummarizer, Message
    from compactor import ProgressiveCompactor, SpoolSink

    spool, history_file, session_id = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    lines = history_file.read_text().splitlines() if history_file.exists() else []
    persisted = [Message.model_validate_json(line) for line in lines]
    session = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 6_000), "sys", session_id=session_id,
        event_sink=SpoolSink(spool), resume=persisted,
    )
    with history_file.open("a") as out:
        i = len(persisted)
        while True:
            role = "user" if i % 2 == 0 else "assistant"
            msg = Message(role=role, content=f"message {i}: " + "words " * 40)
            out.write(msg.model_dump_json() + "\\n")
            out.flush()
            if role == "assistant":
                session.prepare()
            session.append(msg)
            print(i, flush=True)
            i += 1
    """
)


def _run_until_killed(spool: Path, history: Path, messages: int) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _AGENT, str(spool), str(history), SESSION],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    for _ in range(messages):
        assert child.stdout.readline(), "the agent stopped"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()


def _spooled_indices(spool: Path, session_id: str) -> list[int]:
    """The message indices of the session's whole ``message_appended`` lines in the spool."""
    found: list[int] = []
    for path in spool.glob("*.jsonl"):
        *whole, _torn_or_empty = path.read_text().split("\n")
        for line in whole:
            event = parse_event(line)
            if event.session_id == session_id and isinstance(event.payload, MessageAppended):
                found.append(event.payload.index)
    return found


def test_messages_buffered_at_a_kill_reach_the_spool_once_after_resume(tmp_path: Path) -> None:
    spool, history = tmp_path / "spool", tmp_path / "history.jsonl"
    _run_until_killed(spool, history, 300)
    lost = len(history.read_text().splitlines()) - len(_spooled_indices(spool, SESSION))
    assert lost > 0, "the kill lost no buffered event: nothing to check"
    _run_until_killed(spool, history, 150)  # a second process, killed in turn

    persisted = [Message.model_validate_json(s) for s in history.read_text().splitlines()]
    sink = SpoolSink(spool)
    resumed = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 6_000),
        "sys",
        session_id=SESSION,
        event_sink=sink,
        resume=persisted,
    )
    resumed.close()

    assert sorted(_spooled_indices(spool, SESSION)) == list(range(len(persisted)))


def test_a_resume_long_after_the_spool_was_written_still_finds_what_it_holds(
    tmp_path: Path,
) -> None:
    # A CI run under two CPU hogs wrote every message twice: the second process started more
    # than the index's 2 s slack after the first one's last write, wrote the session's index at
    # start, and was killed with all its events still buffered; the final resume then read only
    # files newer than that index, found none of the session's messages, and wrote them all
    # again. Here the first file is simply made a minute old before the second process runs.
    spool, history = tmp_path / "spool", tmp_path / "history.jsonl"
    _run_until_killed(spool, history, 300)
    old = time.time() - 60
    for path in spool.glob("*.jsonl"):
        os.utime(path, (old, old))
    _run_until_killed(spool, history, 150)  # fewer events than a flush: none of them written

    persisted = [Message.model_validate_json(s) for s in history.read_text().splitlines()]
    CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 6_000),
        "sys",
        session_id=SESSION,
        event_sink=SpoolSink(spool),
        resume=persisted,
    ).close()

    assert sorted(_spooled_indices(spool, SESSION)) == list(range(len(persisted)))


def test_a_resume_writes_again_only_the_messages_the_sink_lacks(tmp_path: Path) -> None:
    sink = MemorySink()
    first = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 6_000), "sys", session_id="s", event_sink=sink
    )
    first.extend([Message(role="user", content=f"m{i}") for i in range(5)])
    first.close()
    lost = Message(role="user", content="appended, its event lost")
    history = [*first.history, lost]

    CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 6_000),
        "sys",
        session_id="s",
        event_sink=sink,
        resume=history,
    ).close()

    appended = [e.payload for e in sink.of_type("message_appended")]
    assert [p.index for p in appended if isinstance(p, MessageAppended)] == list(range(6))
    assert json.loads(sink.events[-1].to_json_line())["payload"]["content"] == lost.content
