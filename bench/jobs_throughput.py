"""Every analytics job over 1,000,000 synthetic compactions, and one incremental refresh.

Part 1 builds, with vectorised Polars, the input frames of 10,000 sessions × 100 compactions:
one turn per compaction, five anchor items per compaction (most kept from the compaction
before, some reworded, some new), four view rows per compaction, an emergency in 1% of the
compactions with its messages, offloads and usage. It then times each job on those frames
(pure functions: no I/O) and prints each job's time and the total against the 5 s target.

Part 2 builds a real store (spool -> projector) of synthetic sessions, refreshes every
materialised job, adds ONE new session, and times the incremental refresh (target 0.5 s).

Part 3 stores the same 1M compactions in a local file and in a DuckLake on a PostgreSQL started
in a temporary folder, and times reading them as the refresh does plus the compression jobs on
each (no target; ``--no-lake`` skips it).

With ``--session-texts`` no anchor text is shared between sessions (the run prints how many
distinct texts that makes): more texts to normalise and more distinct pairs to score.

Run: ``.venv/bin/python bench/jobs_throughput.py [--sessions N] [--session-texts]``; exits 1 on
a missed target.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from analytics.jobs.artifacts import artifact_detail, artifact_retention
from analytics.jobs.calibration import estimator_calibration
from analytics.jobs.compression import compression_by_tier, compression_by_tier_and_trigger
from analytics.jobs.offloads import offload_read_backs
from analytics.jobs.postmortem import postmortem_frames
from analytics.jobs.retention import anchor_survival, retention_detail, silent_drops
from analytics.jobs.tiers import emergency_summary, tier_frequency, tier_transitions
from analytics.jobs.timeline import billing_totals, session_timeline
from analytics.queries.frames import compactions_frame
from analytics.queries.materialize import refresh
from analytics.replay.synthetic import generate_session
from analytics.store import EventStore, Lake, LakeStore, open_store
from analytics.store.projector import Projector
from compactor import (
    CompactionOffloader,
    CompactionSession,
    ExtractiveSummarizer,
    ProgressiveCompactor,
    SpoolSink,
)

TARGET_ALL_S = 5.0
TARGET_INCREMENTAL_S = 0.5
PER_SESSION = 100
WORDS = ["cache", "parser", "retry", "auth", "billing", "index", "schema", "router", "queue"]


def _sessions(n: int) -> pl.DataFrame:
    ids = [f"s{i:06d}" for i in range(n)]
    return pl.DataFrame(
        {
            "session_id": ids,
            "context_window": [32_000] * n,
            "model": ["model-a" if i % 2 else "model-b" for i in range(n)],
            "capture": ["full"] * n,
            "warn": [0.6] * n,
            "soft": [0.7] * n,
            "full": [0.8] * n,
            "emergency": [0.95] * n,
            "emergency_target": [0.5] * n,
            "reserve_tokens": [0] * n,
            "deleted_at": pl.Series([None] * n, dtype=pl.Datetime("us", "UTC")),
        }
    )


def _compactions(n_sessions: int, rng: np.random.Generator) -> pl.DataFrame:
    n = n_sessions * PER_SESSION
    session = np.repeat(np.arange(n_sessions), PER_SESSION)
    k = np.tile(np.arange(PER_SESSION), n_sessions)
    tier = rng.choice([1, 2, 3, 4], size=n, p=[0.3, 0.5, 0.19, 0.01])
    before = rng.integers(18_000, 31_000, size=n)
    ratio = np.where(tier == 1, 0.9, np.where(tier == 2, 0.7, 0.5)) * rng.uniform(0.8, 1.1, n)
    after = (before * ratio).astype(np.int64)
    emergency = np.where(tier == 4, np.where(rng.random(n) < 0.7, "truncation", "offload"), "")
    return pl.DataFrame(
        {
            "id": [f"c{i:08d}" for i in range(n)],
            "session_id": [f"s{s:06d}" for s in session],
            "seq": (k * 10 + 5).astype(np.int64),
            "tier": tier.astype(np.int64),
            "trigger": np.where(rng.random(n) < 0.02, "manual", "auto"),
            "effective": rng.random(n) > 0.05,
            "tokens_before": before,
            "tokens_after": after,
            "compression_ratio": after / before,
            "context_window": np.full(n, 32_000),
            "fallback": pl.Series(np.where(tier == 4, "emergency", "")).replace("", None),
            "n_offloaded": rng.integers(0, 3, size=n),
            "n_dropped": np.where(emergency == "truncation", 12, 0),
            "dropped_bytes": np.where(emergency == "truncation", 40_000, 0),
            "cut": np.zeros(n, dtype=np.int64),
            "emergency": pl.Series(emergency).replace("", None),
            "summarizer_input_tokens": rng.integers(0, 9_000, size=n),
            "summarizer_output_tokens": rng.integers(0, 900, size=n),
            "summarizer_latency_ms": rng.uniform(1, 50, size=n),
            "estimator": ["bytes/4"] * n,
            "summarized": np.where(tier >= 2, 20, 0),
            "capture": ["full"] * n,
        }
    )


def _turns(compactions: pl.DataFrame) -> pl.DataFrame:
    return compactions.select(
        "session_id",
        (pl.col("seq") + 1).alias("seq"),
        (pl.int_range(pl.len()).over("session_id") + 1).alias("turn"),
        pl.col("tokens_after").alias("tokens"),
        "tokens_before",
        "tier",
        pl.lit(40).alias("messages"),
        (pl.int_range(pl.len()).over("session_id") * 4 + 8).alias("history_messages"),
        (pl.col("tokens_before") * 3).alias("history_tokens"),
        "context_window",
        pl.lit(0).alias("reserve_tokens"),
    )


def _anchor_items(compactions: pl.DataFrame, rng: np.random.Generator) -> pl.DataFrame:
    base = compactions.select("id", "session_id", "seq").rename({"id": "compaction_id"})
    n = base.height
    kinds = ["user_intent", "execution_progress", "key_decision", "tried_solution", "next_step"]
    frames = []
    for position, kind in enumerate(kinds):
        k = np.tile(np.arange(PER_SESSION), n // PER_SESSION)
        # most items stay the same for a while (a new one every ~8 compactions), some reworded
        era = k // rng.integers(6, 10)
        word = np.array(WORDS)[(era + position) % len(WORDS)]
        reworded = np.where(rng.random(n) < 0.1, " (updated)", "")
        text = np.char.add(np.char.add(f"{kind} about the ", word), reworded)
        frames.append(
            base.with_columns(
                anchor_type=pl.lit(kind), position=pl.lit(0, dtype=pl.Int64), item=pl.Series(text)
            )
        )
    # in the order queries.anchor_items_frame reads them from the store
    return pl.concat(frames).sort("session_id", "seq", "anchor_type", "position")


def _views(compactions: pl.DataFrame) -> pl.DataFrame:
    base = compactions.select(pl.col("id").alias("compaction_id"), "session_id")
    rows = []
    for side, position, status in [
        ("before", 0, "summarized"),
        ("before", 1, "kept"),
        ("after", 0, "synthetic"),
        ("after", 1, "kept"),
    ]:
        rows.append(
            base.with_columns(
                side=pl.lit(side),
                position=pl.lit(position, dtype=pl.Int64),
                history_index=pl.lit(position, dtype=pl.Int64),
                sha256=pl.lit("x"),
                role=pl.lit("user"),
                bytes=pl.lit(400, dtype=pl.Int64),
                status=pl.lit(status),
            )
        )
    return pl.concat(rows)


def _messages(compactions: pl.DataFrame) -> pl.DataFrame:
    """Messages of the sessions with an emergency (what post-mortems and offloads read), shaped
    like ``queries.messages_frame``: call ids and names as lists beside the calls' JSON."""
    hot = compactions.filter(pl.col("tier") == 4).select("session_id").unique().head(2_000)
    idx = pl.DataFrame({"idx": np.arange(400, dtype=np.int64)})
    msgs = hot.join(idx, how="cross")
    return msgs.with_columns(
        role=pl.when(pl.col("idx") % 2 == 0).then(pl.lit("assistant")).otherwise(pl.lit("tool")),
        bytes=(pl.col("idx") * 37 % 9_000).cast(pl.Int64),
        tool_call_id=pl.format("t{}", pl.col("idx") // 2),
        tool_calls=pl.format(
            '[{{"id":"t{}","name":"bash","arguments":"{{}}"}}]', pl.col("idx") // 2
        ),
        tool_call_ids=pl.concat_list(pl.format("t{}", pl.col("idx") // 2)),
        tool_names=pl.concat_list(pl.lit("bash")),
        name=pl.lit(None, dtype=pl.String),
        content=pl.format(
            "output {} of .compactlens/tool_results/x/t{}.txt", pl.col("idx"), pl.col("idx")
        ),
        is_error=pl.lit(False),
    )


def _time(label: str, fn: Callable[[], Any], times: dict[str, float]) -> Any:
    started = time.perf_counter()
    out = fn()
    times[label] = time.perf_counter() - started
    return out


def part_one(n_sessions: int, *, session_texts: bool = False) -> float:
    rng = np.random.default_rng(7)
    t0 = time.perf_counter()
    sessions = _sessions(n_sessions)
    compactions = _compactions(n_sessions, rng)
    turns = _turns(compactions)
    items = _anchor_items(compactions, rng)
    if session_texts:  # no text shared across sessions
        items = items.with_columns(item=pl.concat_str("item", pl.lit(" in "), "session_id"))
    views = _views(compactions)
    messages = _messages(compactions)
    offloads = (
        messages.filter(pl.col("role") == "tool")
        .head(20_000)
        .select(
            "session_id",
            pl.lit("r").alias("record_id"),
            "tool_call_id",
            pl.lit("bash").alias("tool_name"),
            pl.format(".compactlens/tool_results/x/{}.txt", pl.col("tool_call_id")).alias(
                "file_path"
            ),
            "bytes",
            pl.lit(10).alias("lines"),
        )
    )
    usage = turns.select(
        "session_id",
        "seq",
        "turn",
        pl.col("tokens").alias("estimated_input_tokens"),
        pl.col("tokens").alias("raw_estimated_tokens"),
        pl.lit("view").alias("prompt"),
        (pl.col("tokens") * 1.1).cast(pl.Int64).alias("input_tokens"),
        pl.lit("model-a").alias("model"),
    )
    print(
        f"frames: {compactions.height:,} compactions, {turns.height:,} turns, "
        f"{items.height:,} anchor items ({items['item'].n_unique():,} distinct texts), "
        f"{views.height:,} view rows, {messages.height:,} "
        f"messages ({time.perf_counter() - t0:.1f}s to build)"
    )
    times: dict[str, float] = {}
    _time("timeline", lambda: session_timeline(turns, sessions), times)
    _time("billing", lambda: billing_totals(turns, sessions), times)
    _time("compression", lambda: compression_by_tier(compactions, sessions), times)
    _time(
        "compression x trigger",
        lambda: compression_by_tier_and_trigger(compactions, sessions),
        times,
    )
    _time("tier frequency", lambda: tier_frequency(compactions, turns, sessions), times)
    _time("tier transitions", lambda: tier_transitions(compactions, sessions), times)
    _time("emergencies", lambda: emergency_summary(compactions, turns, sessions), times)
    detail = _time(
        "retention detail", lambda: retention_detail(items, compactions, sessions), times
    )
    _time("anchor survival", lambda: anchor_survival(detail), times)
    _time("silent drops", lambda: silent_drops(detail), times)
    _time(
        "post-mortems",
        lambda: postmortem_frames(compactions, turns, messages, views, sessions),
        times,
    )
    _time("offload read-backs", lambda: offload_read_backs(offloads, messages, sessions), times)
    synthetic = compactions.select(
        pl.col("id").alias("compaction_id"),
        "session_id",
        pl.lit("x").alias("sha256"),
        pl.lit("user").alias("role"),
        pl.lit(900, dtype=pl.Int64).alias("bytes"),
        pl.lit(None, dtype=pl.Int64).alias("source_index"),
        pl.lit(None, dtype=pl.String).alias("tool_call_id"),
        pl.lit("[Context Compaction] Files touched: src/app/main.py, tests/test_x.py").alias(
            "content"
        ),
    )
    artifacts = _time(
        "artifact detail",
        lambda: artifact_detail(compactions, views, messages, synthetic, sessions),
        times,
    )
    _time("artifact retention", lambda: artifact_retention(compactions, sessions, artifacts), times)
    _time("calibration", lambda: estimator_calibration(usage, sessions), times)
    for label, seconds in times.items():
        print(f"  {label:<24}{seconds:8.3f} s")
    total = sum(times.values())
    print(
        f"all jobs over {compactions.height:,} compactions: {total:.2f} s "
        f"(target <= {TARGET_ALL_S} s)"
    )
    return total


def _spool_session(home: Path, sink: SpoolSink, seed: int) -> None:
    msgs = generate_session(seed)
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(), 16_000, offloader=CompactionOffloader(home, "bench")
    )
    session = CompactionSession(
        compactor, msgs[0].content, session_id=f"bench-{seed}", event_sink=sink
    )
    for m in msgs[1:]:
        if m.role == "assistant":
            session.prepare()
        session.append(m)
    session.close()


def part_two(n_sessions: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        sink = SpoolSink(home / "spool")
        for seed in range(n_sessions):
            _spool_session(home, sink, seed)
        sink.close()
        with open_store(home) as store:
            Projector(store, home / "spool").ingest()
            n = store.query("SELECT count(*) FROM compactions").item()
            t0 = time.perf_counter()
            refresh(store)
            full = time.perf_counter() - t0
        sink = SpoolSink(home / "spool")
        _spool_session(home, sink, 10_000)
        sink.close()
        with open_store(home) as store:
            Projector(store, home / "spool").ingest()
            t0 = time.perf_counter()
            report = refresh(store)
            incremental = time.perf_counter() - t0
    print(
        f"\nstore of {n_sessions} sessions ({n:,} compactions): full refresh {full:.2f} s; "
        f"after one new session, incremental refresh {incremental:.3f} s "
        f"(recomputed {report.recomputed}) (target <= {TARGET_INCREMENTAL_S} s)"
    )
    return incremental


def part_three(n_sessions: int) -> tuple[float, float] | None:
    """The same 1M compactions stored in a local file and in a lake (on a PostgreSQL started
    here): the seconds to read them as the job refresh does (``compactions_frame``) and run the
    compression jobs on what was read, for each backend; None where PostgreSQL cannot start."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.analytics.store.postgres import PostgresServer, PostgresUnavailableError

    rows = _compactions(n_sessions, np.random.default_rng(3)).drop("capture")
    sessions = _sessions(n_sessions)
    try:
        server = PostgresServer.start()
    except PostgresUnavailableError as exc:
        print(f"\nlake: no figure ({exc})")
        return None
    timings = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stores: list[EventStore] = [
                EventStore(Path(tmp) / "compactlens.duckdb"),
                LakeStore(Lake(server.database("jobs"), Path(tmp) / "lake")),
            ]
            for store in stores:
                with store:
                    store.con.register("bench_rows", rows)
                    store.con.execute(
                        "INSERT INTO compactions BY NAME SELECT * FROM bench_rows;"
                        "INSERT INTO sessions (session_id, capture) "
                        "SELECT DISTINCT session_id, 'full' FROM bench_rows"
                    )
                    store.checkpoint()
                    t0 = time.perf_counter()
                    frame = compactions_frame(store)
                    compression_by_tier(frame, sessions)
                    compression_by_tier_and_trigger(frame, sessions)
                    timings.append(time.perf_counter() - t0)
                    assert frame.height == rows.height, f"{store.location()}: {frame.height} rows"
    finally:
        server.stop()
    local, lake = timings
    print(
        f"\n{rows.height:,} compactions read as the job refresh reads them, plus the "
        f"compression jobs: local file {local:.2f} s, lake {lake:.2f} s ({lake / local:.1f}x)"
    )
    return local, lake


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--store-sessions", type=int, default=200)
    parser.add_argument(
        "--session-texts",
        action="store_true",
        help="every session's anchor items its own text (the harder case for retention)",
    )
    parser.add_argument("--no-lake", action="store_true", help="skip the lake's figures")
    args = parser.parse_args()
    total = part_one(args.sessions, session_texts=args.session_texts)
    incremental = part_two(args.store_sessions)
    if not args.no_lake:
        part_three(args.sessions)
    ok = total <= TARGET_ALL_S and incremental <= TARGET_INCREMENTAL_S
    verdict = "MET" if ok else "NOT MET"
    print(
        f"\ntargets: all jobs <= {TARGET_ALL_S} s, incremental <= {TARGET_INCREMENTAL_S} s "
        f"-> {verdict}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
