"""Cost, in the agent process, of recording one message to the spool.

Two measurements on the same realistic messages (``analytics.synthetic.generate_session``, 80
seeded sessions, about 18,000 messages with tool results from a few bytes to ~40 kB):

* ``CompactionSession.append(msg)`` with a ``SpoolSink``: size bookkeeping, the
  ``message_appended`` payload (sha256 of the content), the envelope (id, clock, producer),
  serialisation to JSON and the buffered write, including the flush every 256 events.
* ``SpoolSink.emit(event)`` alone, for events built beforehand (serialisation and buffering).

Each call is timed on its own; the median is the typical call, the mean is the amortised cost
including the calls that flushed a buffer to disk. The spool is read back and checked afterwards.

Two figures for issue 16 beside it: what resuming a named session costs in a spool that holds
another session's ~200 MB file (time and bytes read by ``SpoolSink.next_seq``, which reads the
session's ``.seq`` index instead of the spool), and 12,000 emits to a spool whose writes all
fail (time per emit and warnings logged: O(1) per emit, one warning per failure episode).

Target (issue: spool overhead): the median ``append`` costs at most 20 µs per event.
Run: ``.venv/bin/python bench/spool_append.py``.
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from analytics.replay.synthetic import generate_session
from compactor import (
    CompactionSession,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    SpoolSink,
)
from compactor.events import Event, EventFactory, message_appended, parse_event

TARGET_US = 20.0
SESSIONS = 80
STEPS = 100
WARMUP = 1_000

T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    """Per-call nanoseconds and which calls flushed a buffer."""

    ns: list[int]
    flushed: list[bool]

    def median_us(self) -> float:
        return statistics.median(self.ns) / 1e3

    def mean_us(self) -> float:
        return statistics.fmean(self.ns) / 1e3

    def quantile_us(self, q: int) -> float:
        return statistics.quantiles(self.ns, n=100)[q - 1] / 1e3

    def flush_calls_us(self) -> float:
        flushing = [t for t, f in zip(self.ns, self.flushed, strict=True) if f]
        return statistics.fmean(flushing) / 1e3 if flushing else 0.0

    def mean_without_flushes_us(self) -> float:
        return (
            statistics.fmean(t for t, f in zip(self.ns, self.flushed, strict=True) if not f) / 1e3
        )


def messages() -> list[Message]:
    """Every non-system message of the synthetic sessions, in order."""
    out: list[Message] = []
    for seed in range(SESSIONS):
        out.extend(m for m in generate_session(seed, steps=STEPS) if m.role != "system")
    return out


def time_calls(items: Sequence[T], call: Callable[[T], None], sink: SpoolSink) -> Timing:
    ns: list[int] = []
    flushed: list[bool] = []
    clock = time.perf_counter_ns
    for item in items:
        before = sink.written
        t0 = clock()
        call(item)
        ns.append(clock() - t0)
        flushed.append(sink.written != before)
    return Timing(ns, flushed)


def new_session(sink: SpoolSink, session_id: str) -> CompactionSession:
    compactor = ProgressiveCompactor(ExtractiveSummarizer(), 1_000_000)
    return CompactionSession(
        compactor, "You are a coding agent.", session_id=session_id, event_sink=sink
    )


def bench_append(msgs: list[Message], spool: Path) -> tuple[Timing, SpoolSink]:
    warm = SpoolSink(spool / "warmup")
    warm_session = new_session(warm, "warmup")
    for m in msgs[:WARMUP]:
        warm_session.append(m)
    warm_session.close()
    sink = SpoolSink(spool / "append")
    session = new_session(sink, "bench-append")
    timing = time_calls(msgs, session.append, sink)
    session.close()
    return timing, sink


def bench_emit(msgs: list[Message], spool: Path) -> tuple[Timing, SpoolSink]:
    factory = EventFactory("bench-emit")
    events = [factory.make(message_appended(i, m, "full")) for i, m in enumerate(msgs)]
    warm = SpoolSink(spool / "warmup-emit")
    for e in events[:WARMUP]:
        warm.emit(e)
    warm.close()
    sink = SpoolSink(spool / "emit")
    timing = time_calls(events, sink.emit, sink)
    sink.close()
    return timing, sink


def check_spool(sink: SpoolSink, expected: int) -> str:
    """'' if the spool holds ``expected`` valid events, else what is wrong."""
    if sink.path is None:
        return "nothing was written"
    lines = sink.path.read_bytes().splitlines()
    if sink.errors or sink.dropped:
        return f"{sink.errors} failed flushes, {sink.dropped} dropped events"
    if len(lines) != expected:
        return f"{len(lines)} lines in {sink.path.name}, {expected} expected"
    for line in lines[:: max(1, len(lines) // 500)]:
        if not isinstance(parse_event(line), Event):
            return "an invalid line"
    return ""


def report(name: str, timing: Timing, sink: SpoolSink, expected: int) -> str:
    assert sink.path is not None
    size = sink.path.stat().st_size
    print(f"\n{name}: {len(timing.ns):,} events, {size / len(timing.ns):,.0f} bytes/event")
    print(
        f"  median {timing.median_us():7.2f} µs   p90 {timing.quantile_us(90):7.2f} µs   "
        f"p99 {timing.quantile_us(99):7.2f} µs"
    )
    flushes = sum(timing.flushed)
    print(
        f"  mean including flushes {timing.mean_us():7.2f} µs   "
        f"({flushes} flushes, {timing.flush_calls_us():,.0f} µs per flushing call)"
    )
    print(f"  mean of the calls that did not flush {timing.mean_without_flushes_us():7.2f} µs")
    problem = check_spool(sink, expected)
    print(f"  spool check: {problem or 'every event present and valid'}")
    return problem


def _bytes_read() -> int:
    """Bytes this process read so far (Linux ``/proc/self/io``; 0 elsewhere)."""
    try:
        lines = Path("/proc/self/io").read_text().splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in lines if line.startswith("rchar:")), 0)


def bench_resume(root: Path, megabytes: int = 200) -> None:
    """A named session resumed in a spool that holds another session's big file."""
    spool = root / "resume"
    spool.mkdir()
    factory = EventFactory("someone-else")
    line = factory.make(message_appended(0, Message(role="user", content="z" * 1000), "full"))
    data = (line.to_json_line() + "\n").encode()
    (spool / "other-1-00000000.jsonl").write_bytes(data * (megabytes * 1_000_000 // len(data)))
    first = new_session(SpoolSink(spool), "mine")  # the first resume scans once, then indexes
    first.append(Message(role="user", content="one"))
    first.close()
    read, t0 = _bytes_read(), time.perf_counter_ns()
    seq = SpoolSink(spool).next_seq("mine")
    ms, read = (time.perf_counter_ns() - t0) / 1e6, _bytes_read() - read
    print(
        f"\nresume a named session beside a {megabytes} MB spool file: next_seq={seq} in "
        f"{ms:.2f} ms, {read:,} bytes read"
    )


class _Collect(logging.Handler):
    """Keeps the records it is given."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def bench_failing_disk(root: Path, emits: int = 12_000) -> None:
    """Emits to a spool whose every write fails (its folder cannot be created)."""
    blocker = root / "not-a-folder"
    blocker.write_text("a file where the spool folder should be")
    sink = SpoolSink(blocker / "spool")
    factory = EventFactory("failing")
    events = [
        factory.make(message_appended(i, Message(role="user", content="x" * 300), "full"))
        for i in range(emits)
    ]
    handler = _Collect(logging.WARNING)
    warnings = handler.records
    logging.getLogger("compactor.writing.sinks").addHandler(handler)
    try:
        t0 = time.perf_counter_ns()
        for event in events:
            sink.emit(event)
        seconds = (time.perf_counter_ns() - t0) / 1e9
    finally:
        logging.getLogger("compactor.writing.sinks").removeHandler(handler)
    print(
        f"\n{emits:,} emits while every write fails: {seconds:.2f} s "
        f"({seconds / emits * 1e6:.1f} µs per emit), {sink.errors} failed flushes, "
        f"{len(warnings)} warning(s), {sink.pending:,} events kept"
    )


def main() -> int:
    msgs = messages()
    sizes = sorted(len(m.content) for m in msgs)
    print(
        f"{len(msgs):,} synthetic messages; content chars median {statistics.median(sizes):,.0f}, "
        f"mean {statistics.fmean(sizes):,.0f}, max {sizes[-1]:,}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        spool = Path(tmp)
        append, append_sink = bench_append(msgs, spool)
        # +1: the session_started event.
        bad = report("CompactionSession.append(msg)", append, append_sink, len(msgs) + 1)
        emit, emit_sink = bench_emit(msgs, spool)
        bad = report("SpoolSink.emit(event), events pre-built", emit, emit_sink, len(msgs)) or bad
        bench_resume(spool)
        bench_failing_disk(spool)
    median = append.median_us()
    ok = median <= TARGET_US and not bad
    mean = append.mean_us()
    print(
        f"\ntarget: median append() <= {TARGET_US:.0f} µs per event -> "
        f"{'MET' if ok else 'NOT MET'} (median {median:.2f} µs; amortised mean including "
        f"flushes {mean:.2f} µs, {'within' if mean <= TARGET_US else 'over'} {TARGET_US:.0f} µs)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
