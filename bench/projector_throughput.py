"""Projector throughput: 1,000,000 spooled events into a fresh DuckDB event store.

The spool is written first, quickly but with valid events only: four producer files of realistic
sessions (``analytics.replay.synthetic`` shapes with short message content and unique tool-call ids,
``usage_reported`` before each assistant message, and three real ``compaction_recorded`` events
per session with their ``tool_result_offloaded`` events, taken from replays at a 32k window).
Payloads come from the library's builders and ``model_dump_json``; only the envelope is
formatted here. ``Projector.ingest`` then loads it all (validation, batches, all projections).

The baseline, in the same run, is the naive writer: per line, the same validation, then one
``con.execute("INSERT INTO events VALUES (?, ...)")`` into a table of the same shape, measured on
the first 20,000 events inside one transaction and the first 5,000 with autocommit (a
commit per row is slow enough that a larger sample only lengthens the run). It fills the events
table only, no projections, so it does less work than the projector. The ratio is taken against
the faster of the two.

Targets (issue: projector throughput): at least 50,000 events/s and at least 20x the row-by-row
rate, judged on the median of ``--runs`` ingests (default 3), each into a fresh store, because
one run on a shared two-core machine varies by a quarter from one minute to the next. Beside
it, with no target, the same spool into a DuckLake on a PostgreSQL started in a temporary
folder (``--no-lake`` skips it). Run: ``.venv/bin/python bench/projector_throughput.py``
(``--events N`` for a quick run).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb

from analytics.replay.synthetic import generate_session
from analytics.store import EventStore, Lake, LakeStore
from analytics.store.projector import CHUNK_BYTES, IngestResult, Projector, parse_line
from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactorConfig,
    ExtractiveSummarizer,
    MemorySink,
    Message,
    ProgressiveCompactor,
)
from compactor.events import (
    SCHEMA_VERSIONS,
    CompactionRecorded,
    SessionStarted,
    ToolResultOffloaded,
    UsageReported,
    current_producer,
    message_appended,
    new_event_id,
    parse_event,
)
from compactor.tokens import message_bytes

EVENTS = 1_000_000
BASELINE_EVENTS = 20_000
AUTOCOMMIT_EVENTS = 5_000
TARGET_RATE = 50_000
RUNS = 3
TARGET_RATIO = 20.0
FILES = 4
POOL_SESSIONS = 4
STEPS = 300
SHORT_CHARS = 200
COMPACTIONS_PER_SESSION = 3
BASE_TIME = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
EVENTS_DDL = """CREATE TABLE events (
    event_id VARCHAR PRIMARY KEY, type VARCHAR NOT NULL, schema_version INTEGER NOT NULL,
    session_id VARCHAR NOT NULL, seq BIGINT NOT NULL, occurred_at TIMESTAMPTZ NOT NULL,
    payload JSON NOT NULL, source VARCHAR, line BIGINT)"""
"""The store's events table; ``main`` checks the shapes are equal."""
SHAPE_SQL = """SELECT column_name, data_type, is_nullable FROM information_schema.columns
    WHERE table_name = 'events' ORDER BY ordinal_position"""
Shape = list[tuple[object, ...]]


@dataclass(frozen=True)
class Compaction:
    """A real compaction event payload and the offload events that followed it."""

    recorded: CompactionRecorded
    offloaded: list[ToolResultOffloaded]


def real_material(tmp: Path) -> tuple[list[list[Message]], list[Compaction]]:
    """Synthetic sessions (content shortened) and the compactions of their replays at 32k."""
    sessions: list[list[Message]] = []
    compactions: list[Compaction] = []
    for seed in range(POOL_SESSIONS):
        msgs = generate_session(seed, steps=STEPS)
        sink = MemorySink(strict=False)
        compactor = ProgressiveCompactor(
            ExtractiveSummarizer(), 32_000, offloader=CompactionOffloader(tmp, "pool")
        )
        session = CompactionSession(compactor, msgs[0], session_id=f"pool-{seed}", event_sink=sink)
        for msg in msgs[1:]:
            if msg.role == "assistant":
                session.prepare()  # each model call, as a live agent
            session.append(msg)
        for event in sink.events:
            if isinstance(event.payload, CompactionRecorded):
                compactions.append(Compaction(event.payload, []))
            elif isinstance(event.payload, ToolResultOffloaded):
                compactions[-1].offloaded.append(event.payload)
        short = [m.model_copy(update={"content": m.content[:SHORT_CHARS]}) for m in msgs[1:]]
        sessions.append(short)
    return sessions, compactions


class Envelopes:
    """Formats envelopes around payload JSON (the same fields ``Event`` serialises)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.producer = current_producer().model_dump_json()

    def new_id(self) -> str:
        """A random record id (records carry version 4 ids)."""
        h = f"{self.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"

    def line(self, type_: str, session_id: str, seq: int, at: dt.datetime, payload: str) -> str:
        """The envelope the library writes, with its event id (time-ordered, like a live agent's
        ``EventFactory``)."""
        return (
            f'{{"event_id":"{new_event_id(at)}","type":"{type_}",'
            f'"schema_version":{SCHEMA_VERSIONS[type_]},'
            f'"session_id":"{session_id}","seq":{seq},"occurred_at":"{at.isoformat()}",'
            f'"producer":{self.producer},"payload":{payload}}}'
        )


def renamed(msg: Message, prefix: str) -> Message:
    """``msg`` with tool-call ids unique to one session (real ids never repeat)."""
    if not msg.tool_calls and msg.tool_call_id is None:
        return msg
    calls = tuple(tc.model_copy(update={"id": prefix + tc.id}) for tc in msg.tool_calls)
    call_id = prefix + msg.tool_call_id if msg.tool_call_id is not None else None
    return msg.model_copy(update={"tool_calls": calls, "tool_call_id": call_id})


def session_lines(
    env: Envelopes, number: int, msgs: list[Message], compactions: list[Compaction]
) -> Iterator[tuple[str, str]]:
    """(type, JSON line) for one live-like session."""
    sid = f"bench-{number:06d}"
    at = BASE_TIME + dt.timedelta(minutes=number)
    seq = 0
    started = SessionStarted(
        context_window=32_000,
        config=CompactorConfig().model_dump(),
        model="claude-sonnet-4",
        agent="bench",
    )
    yield "session_started", env.line("session_started", sid, seq, at, started.model_dump_json())
    every = len(msgs) // (COMPACTIONS_PER_SESSION + 1)
    view_bytes = 0
    for i, m in enumerate(msgs):
        if i and i % every == 0 and i // every <= COMPACTIONS_PER_SESSION:
            comp = compactions[(number * COMPACTIONS_PER_SESSION + i // every) % len(compactions)]
            record = comp.recorded.record.model_copy(update={"id": env.new_id(), "session_id": sid})
            payloads: list[CompactionRecorded | ToolResultOffloaded] = [
                comp.recorded.model_copy(update={"record": record})
            ]
            payloads += [o.model_copy(update={"record_id": record.id}) for o in comp.offloaded]
            for p in payloads:
                seq += 1
                yield p.type, env.line(p.type, sid, seq, at, p.model_dump_json())
        if m.role == "assistant":
            usage = UsageReported(
                estimated_input_tokens=view_bytes // 4,
                input_tokens=view_bytes // 4 + 900,
                output_tokens=120 + i % 400,
                cache_read_tokens=view_bytes // 5,
                model="claude-sonnet-4",
                turn=i,
            )
            seq += 1
            yield (
                "usage_reported",
                env.line("usage_reported", sid, seq, at, usage.model_dump_json()),
            )
        msg = renamed(m, f"s{number}_")
        view_bytes += message_bytes(msg)
        seq += 1
        at += dt.timedelta(milliseconds=750)
        payload = message_appended(i, msg, "full").model_dump_json()
        yield "message_appended", env.line("message_appended", sid, seq, at, payload)


def write_spool(
    spool: Path, total: int, sessions: list[list[Message]], compactions: list[Compaction]
) -> Counter[str]:
    """``total`` events in ``FILES`` producer files; returns the count per type."""
    spool.mkdir(parents=True)
    env = Envelopes(seed=1)
    counts: Counter[str] = Counter()
    files = [(spool / f"bench-host-{k}.jsonl").open("w", encoding="utf-8") for k in range(FILES)]
    try:
        number = 0
        while counts.total() < total:
            lines: list[str] = []
            for type_, line in session_lines(
                env, number, sessions[number % len(sessions)], compactions
            ):
                if counts.total() >= total:
                    break
                counts[type_] += 1
                lines.append(line)
            files[number % FILES].write("\n".join(lines) + "\n")
            number += 1
    finally:
        for fh in files:
            fh.close()
    first = (spool / "bench-host-0.jsonl").open(encoding="utf-8")
    with first:
        for _, line in zip(range(2_000), first, strict=False):
            parse_event(line)  # fail fast here rather than as quarantined lines later
    return counts


def row_by_row(lines: list[str], db: Path, *, one_transaction: bool) -> tuple[float, Shape]:
    """Events/s of the naive writer (validate, then one INSERT per event), and its table."""
    con = duckdb.connect(str(db))
    try:
        con.execute(EVENTS_DDL)
        started = time.perf_counter()
        if one_transaction:
            con.execute("BEGIN TRANSACTION")
        for n, text in enumerate(lines, start=1):
            event, _ = parse_line(text)
            con.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    event.event_id,
                    event.type,
                    event.schema_version,
                    event.session_id,
                    event.seq,
                    event.occurred_at,
                    event.payload.model_dump_json(),
                    "bench-host-0.jsonl",
                    n,
                ],
            )
        if one_transaction:
            con.execute("COMMIT")
        seconds = time.perf_counter() - started
        count = con.execute("SELECT count(*) FROM events").fetchone()
        assert count is not None and count[0] == len(lines)
        shape: Shape = con.execute(SHAPE_SQL).fetchall()
    finally:
        con.close()
    return len(lines) / seconds, shape


def first_lines(path: Path, n: int) -> list[str]:
    with path.open(encoding="utf-8") as fh:
        return [line.rstrip("\n") for _, line in zip(range(n), fh, strict=False)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=EVENTS)
    parser.add_argument("--no-lake", action="store_true", help="skip the lake's figure")
    parser.add_argument(
        "--runs",
        type=int,
        default=RUNS,
        help="local ingests, each into a fresh store; the target is judged on their median",
    )
    parser.add_argument(
        "--chunk-mib", type=int, default=CHUNK_BYTES // 2**20, help="the projector's chunk size"
    )
    args = parser.parse_args()
    total: int = args.events
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        t0 = time.perf_counter()
        sessions, compactions = real_material(tmp / "offload")
        counts = write_spool(tmp / "spool", total, sessions, compactions)
        size = sum(p.stat().st_size for p in (tmp / "spool").iterdir())
        print(
            f"spool: {counts.total():,} events, {size / 2**20:,.0f} MiB in {FILES} files, written "
            f"in {time.perf_counter() - t0:.1f}s ({len(compactions)} real compactions as material)"
        )
        for type_, n in counts.most_common():
            print(f"  {type_:<24}{n:>10,}")

        runs = [local_run(tmp, i, args.chunk_mib) for i in range(args.runs)]
        result, store_shape = sorted(runs, key=lambda run: run[0].seconds)[len(runs) // 2]
        rate = result.new_events / result.seconds
        if len(runs) > 1:
            rates = sorted(run.new_events / run.seconds for run, _ in runs)
            print(
                f"\nmedian of {len(runs)} runs on fresh stores: {rate:,.0f} events/s (runs: "
                + ", ".join(f"{r:,.0f}" for r in rates)
                + ")"
            )
            cold = runs[0][0]
            print(
                f"first ingest in this process (what one `compactlens ingest` does): "
                f"{cold.new_events / cold.seconds:,.0f} events/s; no target is judged on it"
            )

        lake_rate = lake_figure(tmp, counts.total()) if not args.no_lake else None
        sample = first_lines(tmp / "spool" / "bench-host-0.jsonl", BASELINE_EVENTS)
        auto, shape = row_by_row(
            sample[:AUTOCOMMIT_EVENTS], tmp / "auto.duckdb", one_transaction=False
        )
        txn, _ = row_by_row(sample, tmp / "txn.duckdb", one_transaction=True)
    baseline = max(auto, txn)
    print(
        f"\nrow-by-row INSERT: autocommit {auto:,.0f} events/s (first {AUTOCOMMIT_EVENTS:,} "
        f"events), one transaction {txn:,.0f} events/s (first {len(sample):,})"
    )
    ratio = rate / baseline
    complete = all(
        run.new_events == counts.total() and run.quarantined == 0 for run, _ in runs
    ) and all(shape_ == store_shape for _, shape_ in runs)
    if shape != store_shape:
        print(f"baseline table {shape} differs from the store's events table {store_shape}")
    ok = complete and shape == store_shape and rate >= TARGET_RATE and ratio >= TARGET_RATIO
    print(
        f"\ntargets: >= {TARGET_RATE:,} events/s and >= {TARGET_RATIO:.0f}x row-by-row -> "
        f"{'MET' if ok else 'NOT MET'} ({rate:,.0f} events/s, {ratio:.1f}x the faster baseline"
        f"{'' if complete else '; NOT every event was stored'})"
    )
    if lake_rate is not None:
        print(
            f"beside it, the same spool into a DuckLake on PostgreSQL: {lake_rate:,.0f} events/s "
            f"({lake_rate / rate:.2f}x the local file; no target)"
        )
    return 0 if ok else 1


def local_run(tmp: Path, index: int, chunk_mib: int) -> tuple[IngestResult, Shape]:
    """One ingest of the whole spool into a fresh local store, with its figures printed."""
    cpu_before = os.times()
    with EventStore(tmp / f"store-{index}" / "compactlens.duckdb") as store:
        result = Projector(store, tmp / "spool", chunk_bytes=chunk_mib * 2**20).ingest()
        cpu_after = os.times()
        stored = store.counts()
        shape: Shape = store.query(SHAPE_SQL).rows()
    print(
        f"\nprojector: {result.new_events:,} new events, {result.quarantined} quarantined, "
        f"{result.seconds:.1f}s -> {result.new_events / result.seconds:,.0f} events/s"
    )
    cpu = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
    print(
        f"  CPU {cpu:.1f}s in this process ({result.new_events / cpu:,.0f} events per CPU "
        f"second) over {result.seconds:.1f}s wall; load average now {os.getloadavg()[0]:.2f}"
    )
    print("  rows: " + ", ".join(f"{t} {n:,}" for t, n in stored.items() if n))
    shutil.rmtree(tmp / f"store-{index}")
    return result, shape


def lake_figure(tmp: Path, total: int) -> float | None:
    """Events/s of the same spool projected into a lake on a PostgreSQL started here; None
    (said why) where PostgreSQL cannot be started."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.analytics.store.postgres import PostgresServer, PostgresUnavailableError

    try:
        server = PostgresServer.start()
    except PostgresUnavailableError as exc:
        print(f"\nlake: no figure ({exc})")
        return None
    try:
        lake = Lake(server.database("bench"), tmp / "lake")
        with LakeStore(lake) as store:
            result = Projector(store, tmp / "spool").ingest()
        complete = result.new_events == total and result.quarantined == 0
        lake_rate = result.new_events / result.seconds
        print(
            f"\nlake projector: {result.new_events:,} new events in {result.seconds:.1f}s -> "
            f"{lake_rate:,.0f} events/s{'' if complete else ' (NOT every event was stored)'}"
        )
        return lake_rate
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
