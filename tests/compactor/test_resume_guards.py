"""Resuming a session can no longer corrupt what was recorded (issue 28, item 6.4, last parts).

A review found three silent faults of ``resume=``: a shorter resumed history gave new messages
indices the store already held for other content; a different ``hash_secret`` on resume broke
the session's hashes without a word; and two writers resuming one session at once reused each
other's seqs. Now the first is refused before anything is written (``ResumeMismatchError``),
the second is logged and counted, and the third is refused (``SessionInUseError``) while the
other writer holds the session, in this process or another (an ``flock`` the kernel drops when
that process dies). Every check here reads the spool's raw lines.
"""

from __future__ import annotations

import gc
import json
import logging
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compactor import (
    CompactionSession,
    ExtractiveSummarizer,
    MemorySink,
    Message,
    ProgressiveCompactor,
    ResumeMismatchError,
    SessionInUseError,
    SpoolSink,
)

MESSAGES = [
    Message(role="user" if i % 2 == 0 else "assistant", content=f"message {i} " + "w " * 20)
    for i in range(10)
]


def _compactor(secret: bytes | None = None) -> ProgressiveCompactor:
    return ProgressiveCompactor(ExtractiveSummarizer(), 6_000, hash_secret=secret)


def _lines(spool: Path, session_id: str) -> list[dict[str, Any]]:
    rows = [
        json.loads(x) for p in sorted(spool.glob("*.jsonl")) for x in p.read_text().split("\n") if x
    ]
    return [r for r in rows if r["session_id"] == session_id]


def _recorded(spool: Path, session_id: str = "s") -> None:
    sink = SpoolSink(spool)
    session = CompactionSession(_compactor(), "sys", session_id=session_id, event_sink=sink)
    session.extend(MESSAGES)
    session.close()
    sink.close()


def test_a_resumed_history_shorter_than_the_recorded_one_is_refused_before_any_write(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    _recorded(spool)
    before = _lines(spool, "s")
    compactor = _compactor()

    with pytest.raises(ResumeMismatchError, match=r"holds 5 messages .* already recorded 10"):
        CompactionSession(
            compactor, "sys", session_id="s", event_sink=SpoolSink(spool), resume=MESSAGES[:5]
        )

    assert _lines(spool, "s") == before
    again = CompactionSession(  # the refused session holds neither its compactor nor its id
        compactor, "sys", session_id="s", event_sink=SpoolSink(spool), resume=MESSAGES
    )
    again.append(Message(role="user", content="one more"))
    again.close()
    appended = [r for r in _lines(spool, "s") if r["type"] == "message_appended"]
    indices = [r["payload"]["index"] for r in appended]
    assert sorted(indices) == list(range(11))


def test_a_memory_sink_refuses_a_shorter_resume_too() -> None:
    sink = MemorySink()
    first = CompactionSession(_compactor(), "sys", session_id="m", event_sink=sink)
    first.extend(MESSAGES)
    first.close()

    with pytest.raises(ResumeMismatchError):
        CompactionSession(_compactor(), "sys", session_id="m", event_sink=sink, resume=MESSAGES[:9])


@pytest.mark.parametrize("secret", [b"a" * 32, b"b" * 32])
def test_a_resume_with_another_hash_secret_is_said_and_counted(
    secret: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    sink = MemorySink()
    first = CompactionSession(
        _compactor(b"a" * 32), "sys", session_id="h", event_sink=sink, capture="metadata"
    )
    first.extend(MESSAGES[:4])
    first.close()
    caplog.set_level(logging.WARNING, logger="compactor.session")

    resumed = CompactionSession(
        _compactor(secret),
        "sys",
        session_id="h",
        event_sink=sink,
        capture="metadata",
        resume=MESSAGES[:4],
    )

    changed = secret != b"a" * 32
    assert resumed.resume_mismatches == int(changed)
    said = [r.getMessage() for r in caplog.records if "does not hash" in r.getMessage()]
    assert len(said) == int(changed)
    if changed:
        assert "'h'" in said[0] and "hash_secret" in said[0]


HOLDER = textwrap.dedent(
    """
    import sys
    from compactor import CompactionSession, ExtractiveSummarizer, ProgressiveCompactor, SpoolSink
    compactor = ProgressiveCompactor(ExtractiveSummarizer(), 6_000)
    session = CompactionSession(compactor, "sys", session_id="s", event_sink=SpoolSink(sys.argv[1]))
    print("holding", flush=True)
    sys.stdin.read()
    """
)


def test_a_session_another_process_holds_open_is_refused_until_that_process_dies(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    _recorded(spool)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(spool)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(SessionInUseError, match=f"process {holder.pid}"):
            CompactionSession(
                _compactor(), "sys", session_id="s", event_sink=SpoolSink(spool), resume=MESSAGES
            )
    finally:
        holder.kill()  # killed: the kernel drops its lock
        holder.wait()

    session = CompactionSession(
        _compactor(), "sys", session_id="s", event_sink=SpoolSink(spool), resume=MESSAGES
    )
    session.append(Message(role="user", content="after the other writer died"))
    session.close()
    seqs = Counter(r["seq"] for r in _lines(spool, "s"))
    assert [s for s, n in seqs.items() if n > 1] == []


def test_a_session_dropped_without_close_lets_its_id_go(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    sink = SpoolSink(spool)
    session = CompactionSession(_compactor(), "sys", session_id="g", event_sink=sink)
    with pytest.raises(SessionInUseError, match="this process"):
        CompactionSession(_compactor(), "sys", session_id="g", event_sink=SpoolSink(spool))

    del session
    gc.collect()

    CompactionSession(_compactor(), "sys", session_id="g", event_sink=sink).close()
