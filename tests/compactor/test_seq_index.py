"""Resuming a session's ``seq`` costs in proportion to the session, not the spool; it survives a
crash without reusing a seq; a full disk costs O(1) per emit and one warning per episode."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compactor import (
    CompactionSession,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    SpoolSink,
)
from compactor.events import EventFactory, MessageAppended, SessionStarted
from tests.compactor.tmpfs import fill_disk

REPO = Path(__file__).resolve().parents[2]


def _session(spool: Path, session_id: str) -> CompactionSession:
    return CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
        "sys",
        session_id=session_id,
        event_sink=SpoolSink(spool),
    )


def _bytes_read() -> int:
    """Bytes this process has read through read(2) and friends (Linux ``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _spool_seqs(spool: Path, session_id: str) -> list[int]:
    """The seqs of the session's whole lines; a killed writer's torn last line is no event (the
    projector holds it back the same way), whatever moment the kill came."""
    seqs: list[int] = []
    for path in spool.glob("*.jsonl"):
        *whole, _torn_or_empty = path.read_bytes().split(b"\n")
        events = [json.loads(line) for line in whole if line]
        seqs += [e["seq"] for e in events if e["session_id"] == session_id]
    return seqs


def _big_spool_file(spool: Path, megabytes: int) -> Path:
    """Another session's spool file of about ``megabytes`` MB (one event line repeated)."""
    factory = EventFactory("someone-else")
    payload = MessageAppended(index=0, role="user", bytes=1000, sha256="0" * 64, content="z" * 1000)
    line = (factory.make(payload).to_json_line() + "\n").encode()
    path = spool / "other-host-1-00000000.jsonl"
    path.write_bytes(line * (megabytes * 1_000_000 // len(line)))
    return path


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux /proc/self/io")
def test_resuming_a_session_reads_its_index_not_the_other_sessions_spool_files(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    big = _big_spool_file(spool, 30)
    first = _session(spool, "mine")  # the first resume in this spool scans it, once
    first.extend([Message(role="user", content="one"), Message(role="assistant", content="two")])
    first.close()

    before = _bytes_read()
    resumed_at = SpoolSink(spool).next_seq("mine")  # a new process's sink
    read = _bytes_read() - before
    assert resumed_at == 3  # session_started and two messages
    assert read < 64 * 1024, f"{read} bytes read to resume; the spool holds {big.stat().st_size}"
    again = _session(spool, "mine")
    again.append(Message(role="user", content="three"))
    again.close()
    assert sorted(_spool_seqs(spool, "mine")) == list(range(5))


def test_the_seq_index_is_invisible_to_readers_of_the_spools_jsonl_files(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    session = _session(spool, "mine")
    session.append(Message(role="user", content="one"))
    session.close()
    sink = session.event_sink
    assert isinstance(sink, SpoolSink) and sink.path is not None
    index_files = list((spool / ".seq").iterdir())
    assert index_files, "the session has an index file"
    spool_files = [p for p in spool.iterdir() if p.suffix == ".jsonl" and p.is_file()]
    assert spool_files == [sink.path]  # what the projector reads (analytics.store.projector)
    assert sorted(spool.glob("*.jsonl")) == [sink.path]


def test_a_spool_without_an_index_is_scanned_and_indexed_once(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    factory = EventFactory("legacy")
    spool.mkdir()
    lines = [factory.make(SessionStarted(context_window=10)).to_json_line() for _ in range(7)]
    (spool / "old-1-aaaaaaaa.jsonl").write_text("\n".join(lines) + "\n")  # written before .seq
    assert SpoolSink(spool).next_seq("legacy") == 7
    assert SpoolSink(spool).next_seq("brand-new") == 0
    assert (spool / ".seq" / "legacy").is_file()  # the next process reads this instead


_CHILD = textwrap.dedent(
    """
    import sys
    from compactor import CompactionSession, ExtractiveSummarizer, Message
    from compactor import ProgressiveCompactor, SpoolSink

    sink = SpoolSink(sys.argv[1], buffer_events=8)
    session = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 10_000_000), "sys",
        session_id="crashy", event_sink=sink,
    )
    i = 0
    while True:
        written = sink.written
        session.append(Message(role="user", content=f"message {i}"))
        if sink.written != written:
            print(sink.written, flush=True)
        i += 1
    """
)


def test_a_session_killed_mid_run_resumes_above_every_seq_in_the_spool(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    for run in range(3):  # each run is killed mid-write, and the next one resumes
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(spool)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        for _ in range(20 + 7 * run):  # a different moment in each run
            assert child.stdout.readline(), "the child stopped writing"
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        seqs = _spool_seqs(spool, "crashy")
        assert len(seqs) == len(set(seqs)), "a seq was used twice"
        resumed_at = SpoolSink(spool).next_seq("crashy")
        assert max(seqs) < resumed_at <= max(seqs) + 1 + 8  # a gap of at most one flush


def test_a_full_disk_gives_one_warning_per_episode_and_bounded_retries(
    tiny_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = tiny_disk / "spool"
    sink = SpoolSink(spool, buffer_events=4)
    factory = EventFactory("s")
    caplog.set_level(logging.INFO, logger="compactor.writing.sinks")
    for episode in range(2):
        filler = fill_disk(tiny_disk, name=f"filler-{episode}")
        ids = []
        for i in range(100):
            payload = MessageAppended(
                index=i, role="user", bytes=100, sha256="0" * 64, content="c" * 100
            )
            event = factory.make(payload)
            ids.append(event.event_id)
            sink.emit(event)
        assert 0 < sink.errors <= (episode + 1) * (100 // 4 + 1), "a retry on every emit"
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == episode + 1, [r.getMessage() for r in warnings]
        errors = sink.errors
        filler.unlink()
        sink.flush()
        assert sink.errors == errors and sink.pending == 0
        assert sink.path is not None
        lines = sink.path.read_bytes().splitlines()
        assert [json.loads(line)["event_id"] for line in lines] == ids
        sink.path.unlink()  # room for the next episode
    assert sink.written == 200 and sink.dropped == 0


def test_a_seq_index_that_could_not_be_written_is_not_trusted_by_the_next_resume(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    first = _session(spool, "mine")
    first.append(Message(role="user", content="one"))
    first.close()
    index_file = spool / ".seq" / "mine"
    done = subprocess.run(["chattr", "+i", str(index_file)], capture_output=True, check=False)
    if done.returncode != 0:  # an immutable file refuses even root's writes
        pytest.skip(f"chattr +i not possible here: {done.stderr.decode().strip()}")
    try:
        again = _session(spool, "mine")  # its index lines are refused; its events are written
        again.extend([Message(role="user", content=str(i)) for i in range(5)])
        again.close()
        assert isinstance(again.event_sink, SpoolSink) and again.event_sink.index.errors > 0
        assert SpoolSink(spool).next_seq("mine") == max(_spool_seqs(spool, "mine")) + 1
    finally:
        subprocess.run(["chattr", "-i", str(index_file)], check=False)
