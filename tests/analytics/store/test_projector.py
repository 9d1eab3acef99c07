"""The projector against real spools and real DuckDB files: idempotence, torn lines, crashes,
rebuild, concurrent producers and quarantine (SPEC sections 4 and 5).

Spools come from synthetic sessions run through ``CompactionSession`` with a ``SpoolSink``, or
from envelopes built with ``EventFactory`` when volume matters. Crashes are real SIGKILLs of a
projector subprocess; concurrency is real producer processes beside a watching projector. The
store's own guarantees (schema, content addressing, bad database files) are in test_store.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from subprocess import Popen

import polars as pl
import pytest

from analytics.store import DB_NAME, EventStore, open_store
from analytics.store.projector import _SWITCH_INTERVAL, GIL_SWITCH_S, Projector
from analytics.store.rebuilding import rebuild
from compactor import CompactionTier, SpoolSink
from compactor.events import SCHEMA_VERSIONS, EventFactory, MessageAppended, UsageReported
from tests.analytics.spool_helpers import (
    assert_same_table,
    assert_same_tables,
    ingest,
    run_session,
    snapshot,
    snapshot_home,
    spool_line_count,
    usage_lines,
    write_lines,
)

ROOT = Path(__file__).resolve().parents[3]
SUBPROCESS_TIMEOUT_S = 60
NEWER = SCHEMA_VERSIONS["usage_reported"] + 1
"""A schema version of usage_reported that no compactlens has written yet."""


def _realistic_home(home: Path) -> None:
    """Two spool files: three synthetic sessions (one deleted), every tier, plus one bad line."""
    first, second = SpoolSink(home / "spool"), SpoolSink(home / "spool")
    runs = [run_session(home, first, 1), run_session(home, second, 2, delete=True)]
    runs.append(run_session(home, first, 3, capture="metadata"))
    assert set().union(*(r.tiers for r in runs)) == set(CompactionTier) - {CompactionTier.NONE}
    write_lines(home / "spool" / "zz-bad.jsonl", ["this is not an event"])


def _events_by_session(store: EventStore) -> pl.DataFrame:
    return store.query(
        "SELECT session_id, count(*) AS n, count(DISTINCT seq) AS distinct_seq, "
        "min(seq) AS min_seq, max(seq) AS max_seq, count(DISTINCT event_id) AS distinct_ids "
        "FROM events GROUP BY session_id ORDER BY session_id"
    )


def _assert_seq_gap_free(store: EventStore) -> None:
    for row in _events_by_session(store).iter_rows(named=True):
        assert row["n"] == row["distinct_seq"] == row["distinct_ids"], row
        assert (row["min_seq"], row["max_seq"]) == (0, row["n"] - 1), row


def _assert_offsets_match_events(store: EventStore, spool: Path) -> None:
    """What one transaction guarantees: each committed offset ends a line, and the events of a
    source are exactly its lines 1..lines (every line of these spools is valid)."""
    for source, (byte_offset, lines) in store.offsets().items():
        data = (spool / source).read_bytes()[:byte_offset]
        assert data.endswith(b"\n"), f"{source}: offset {byte_offset} is not at a line end"
        assert data.count(b"\n") == lines, source
        got = store.query(
            "SELECT count(*) AS n, count(DISTINCT line) AS d, min(line) AS lo, max(line) AS hi "
            "FROM events WHERE source = ?",
            [source],
        ).row(0)
        expected = (lines, lines, 1, lines) if lines else (0, 0, None, None)
        assert got == expected, (source, got)


# ---------------------------------------------------------------- idempotence


def test_ingesting_twice_gives_identical_tables(tmp_path: Path) -> None:
    _realistic_home(tmp_path)
    with open_store(tmp_path) as store:
        first = Projector(store, tmp_path / "spool").ingest()
        once = snapshot(store)
        second = Projector(store, tmp_path / "spool").ingest()
        twice = snapshot(store)
    assert first.new_events == spool_line_count(tmp_path) - 1
    assert first.quarantined == 1
    assert (second.new_events, second.lines, second.quarantined) == (0, 0, 0)
    assert once["events"].height == first.new_events
    assert_same_tables(once, twice)


def test_replaying_a_copied_spool_file_adds_no_events_or_projection_rows(tmp_path: Path) -> None:
    sink = SpoolSink(tmp_path / "spool")
    run_session(tmp_path, sink, 4)
    assert sink.path is not None
    ingest(tmp_path)
    before = snapshot_home(tmp_path)
    shutil.copy(sink.path, sink.path.with_name("copy-of-" + sink.path.name))
    with open_store(tmp_path) as store:
        again = Projector(store, tmp_path / "spool").ingest()
        after = snapshot(store)
    assert again.new_events == 0
    assert again.duplicates == before["events"].height
    assert after.pop("spool_offsets").height == before.pop("spool_offsets").height + 1
    # each event keeps the first line holding it by (source, line), whichever file was read
    # first, so that a rebuild (which reads the copy first) gives the same table
    events = after.pop("events")
    assert events["source"].unique().to_list() == ["copy-of-" + sink.path.name]
    assert_same_table("events", before.pop("events").drop("source"), events.drop("source"))
    for name, frame in before.items():
        assert_same_table(name, frame, after[name])
    rebuild(tmp_path)
    assert_same_table("events", events, snapshot_home(tmp_path)["events"])


def test_ids_stored_or_repeated_within_one_batch_are_skipped_and_the_first_line_wins(
    tmp_path: Path,
) -> None:
    factory = EventFactory("dup")
    a, b, c = (
        factory.make(UsageReported(turn=t, estimated_input_tokens=t, input_tokens=t))
        for t in (1, 2, 3)
    )
    spool = tmp_path / "spool"
    write_lines(spool / "a.jsonl", [a.to_json_line(), b.to_json_line()])
    ingest(tmp_path)
    # one batch: a stored id (b), an id repeated within it (c twice) and a stored one again (a)
    write_lines(
        spool / "b.jsonl",
        [b.to_json_line(), c.to_json_line(), a.to_json_line(), c.to_json_line()],
    )
    before = sys.getswitchinterval()
    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
        rows = store.query("SELECT seq, source, line FROM events ORDER BY seq").rows()
        usage = store.query("SELECT turn FROM usage ORDER BY turn")["turn"].to_list()
    assert (result.new_events, result.duplicates) == (1, 3)
    assert rows == [(0, "a.jsonl", 1), (1, "a.jsonl", 2), (2, "b.jsonl", 2)]
    assert usage == [1, 2, 3]
    assert sys.getswitchinterval() == before  # the ingest's GIL setting does not outlive it


# ---------------------------------------------------------------- torn lines


def _newlines_before(path: Path, offset: int) -> int:
    return path.read_bytes()[:offset].count(b"\n")


@pytest.mark.parametrize("torn_files", [["b.jsonl"], ["b.jsonl", "c.jsonl"]])
def test_files_after_the_last_new_line_holding_only_a_torn_line_keep_their_own_offsets(
    tmp_path: Path, torn_files: list[str]
) -> None:
    """A chunk that ends in one file, followed only by files whose new bytes are a torn line,
    must not make the next read go on in those files from the first file's offset (found by
    hypothesis in test_projection_order: line numbers two too high, and lines read again)."""
    spool = tmp_path / "spool"
    first = usage_lines("a", 3)
    write_lines(spool / "a.jsonl", first[:2])
    torn = {name: usage_lines(name, 12) for name in torn_files}
    for name, lines in torn.items():
        write_lines(spool / name, lines[:10])
    with open_store(tmp_path) as store:
        projector = Projector(store, spool)
        projector.ingest()
        write_lines(spool / "a.jsonl", first[2:])  # a.jsonl ends well before the others do
        for name, lines in torn.items():
            with (spool / name).open("a", encoding="utf-8") as fh:
                fh.write(lines[10][:30])
        result = projector.ingest()
        assert (result.lines, result.new_events, result.quarantined) == (1, 1, 0)
        for name, lines in torn.items():
            with (spool / name).open("a", encoding="utf-8") as fh:
                fh.write(lines[10][30:] + "\n")
            write_lines(spool / name, lines[11:])
        projector.ingest()
        offsets = store.offsets()
        events = store.query("SELECT source, line, seq FROM events ORDER BY source, line")
        assert store.counts()["quarantine"] == 0
    for name in ["a.jsonl", *torn_files]:
        path = spool / name
        assert offsets[name] == (path.stat().st_size, _newlines_before(path, 10**9))
    expected = [("a.jsonl", i + 1, i) for i in range(3)]
    expected += [(name, i + 1, i) for name in torn_files for i in range(12)]
    assert events.rows() == expected


@pytest.mark.parametrize("chunk_bytes", [16 * 1024 * 1024, 64], ids=["one-chunk", "tiny-chunks"])
@pytest.mark.parametrize("complete_before", [0, 3])
def test_torn_last_line_waits_unquarantined_and_is_ingested_once_completed(
    tmp_path: Path, chunk_bytes: int, complete_before: int
) -> None:
    factory = EventFactory("torn")
    lines = [
        factory.make(
            MessageAppended(
                index=i, role="user", bytes=12, sha256=f"{i:064x}", content="café ✓ 日本"
            )
        ).to_json_line()
        for i in range(complete_before + 1)
    ]
    last_sha = f"{complete_before:064x}"
    spool = tmp_path / "spool" / "torn.jsonl"
    write_lines(spool, lines[:-1])
    last = lines[-1].encode("utf-8")
    cut = last.index("日".encode()) + 1  # inside a multi-byte character
    with spool.open("ab") as fh:
        fh.write(last[:cut])
    complete = spool.stat().st_size - cut

    with open_store(tmp_path) as store:
        projector = Projector(store, tmp_path / "spool", chunk_bytes=chunk_bytes)
        for _ in range(2):  # asking again changes nothing while the line is torn
            result = projector.ingest()
            assert store.counts()["events"] == complete_before
            assert store.counts()["quarantine"] == 0
            assert store.offsets().get("torn.jsonl", (0, 0)) == (complete, complete_before)
        assert result.quarantined == 0

        with spool.open("ab") as fh:
            fh.write(last[cut:] + b"\n")
        result = projector.ingest()
        assert (result.new_events, result.quarantined) == (1, 0)
        again = projector.ingest()
        assert (again.new_events, again.lines) == (0, 0)
        events = store.query("SELECT seq, line FROM events ORDER BY seq")
        assert events.rows() == [(i, i + 1) for i in range(complete_before + 1)]
        blob = store.query("SELECT content FROM message_blobs WHERE sha256 = ?", [last_sha])
        assert blob.rows() == [("café ✓ 日本",)]
        assert store.offsets()["torn.jsonl"] == (spool.stat().st_size, complete_before + 1)
        assert store.counts()["quarantine"] == 0


# ---------------------------------------------------------------- crashes

_KILLABLE_INGEST = """
import sys
from pathlib import Path
from analytics.store.projector import Projector
from analytics.store import open_store

home = Path(sys.argv[1])
with open_store(home) as store:
    projector = Projector(store, home / "spool", chunk_bytes=int(sys.argv[2]))
    projector.ingest(lambda done, todo: print(done, flush=True))
print("done", flush=True)
"""


def _ingest_then_sigkill(home: Path, *, commits: int, delay_s: float) -> None:
    """Start a projector, let it commit ``commits`` batches, SIGKILL it ``delay_s`` later
    (somewhere in reading, validating or committing the next batch)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLABLE_INGEST, str(home), str(256 * 1024)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        for _ in range(commits):
            line = proc.stdout.readline()
            assert line, "the projector exited before committing a batch"
            assert line.strip() != "done", "the spool is too small to kill mid-ingest"
        time.sleep(delay_s)
        proc.send_signal(signal.SIGKILL)
        proc.wait(SUBPROCESS_TIMEOUT_S)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_projector_killed_mid_batch_loses_and_duplicates_nothing_after_restart(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    for k in range(4):
        write_lines(spool / f"producer-{k}.jsonl", usage_lines(f"bulk-{k}", 10_000))
    total = 40_000

    seen = 0
    for delay_s in (0.0, 0.03, 0.06):  # the kill lands in different phases of a batch
        _ingest_then_sigkill(tmp_path, commits=2, delay_s=delay_s)
        with open_store(tmp_path) as store:
            count = store.counts()["events"]
            assert seen < count < total, (seen, count, total)
            _assert_offsets_match_events(store, spool)
            _assert_seq_gap_free(store)  # each session holds a prefix of its file
        seen = count

    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
        assert result.new_events == total - seen
        assert result.duplicates == 0
        assert store.counts()["events"] == total
        assert store.counts()["usage"] == total
        assert store.counts()["quarantine"] == 0
        _assert_seq_gap_free(store)
        assert _events_by_session(store)["n"].to_list() == [10_000] * 4
        _assert_offsets_match_events(store, spool)


# ---------------------------------------------------------------- rebuild


def test_rebuild_equals_incremental_ingestion_table_for_table(tmp_path: Path) -> None:
    first, second = SpoolSink(tmp_path / "spool"), SpoolSink(tmp_path / "spool")
    incremental: list[int] = []
    with open_store(tmp_path) as store:
        projector = Projector(store, tmp_path / "spool")

        def ingest_now(turn: int) -> None:
            if turn % 11 == 0:  # batch boundaries fall mid-session, between a compaction's events
                first.flush()
                second.flush()
                incremental.append(projector.ingest().new_events)

        run_session(tmp_path, first, 5, between_turns=ingest_now)
        write_lines(tmp_path / "spool" / "zz-bad.jsonl", ['{"type": "session_started"}', "{"])
        run_session(tmp_path, second, 6, between_turns=ingest_now, delete=True)
        run_session(tmp_path, first, 7, capture="metadata", between_turns=ingest_now)
        projector.ingest()
    assert len([n for n in incremental if n]) >= 6

    with open_store(tmp_path) as store:
        incremental_tables = snapshot(store)
        store.rebuild_projections()
        assert_same_tables(incremental_tables, snapshot(store))
    assert incremental_tables["events"].height == spool_line_count(tmp_path) - 2
    assert incremental_tables["quarantine"].height == 2

    result = rebuild(tmp_path)
    assert result.ingest.new_events == incremental_tables["events"].height
    assert_same_tables(incremental_tables, snapshot_home(tmp_path))
    backups = sorted(tmp_path.glob(f"{DB_NAME}.bak-*"))
    assert len(backups) == 1
    with EventStore(backups[0], read_only=True) as old:
        assert_same_tables(incremental_tables, snapshot(old))

    with open_store(tmp_path) as store:
        store.rebuild_projections()
        assert_same_tables(incremental_tables, snapshot(store))


# ---------------------------------------------------------------- concurrency

_PRODUCER = """
import random, sys, time
from compactor import SpoolSink
from compactor.events import EventFactory, UsageReported

spool, session_id, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if seed != "-":
    random.seed(int(seed))  # what a reproducible agent or eval harness does at start-up
sink = SpoolSink(spool, buffer_events=64)
factory = EventFactory(session_id)
for i in range(n):
    sink.emit(factory.make(UsageReported(estimated_input_tokens=i, input_tokens=i, turn=i)))
    if i % 100 == 99:
        time.sleep(0.05)  # an agent's pace, so the watcher sees the spool grow
sink.close()
assert (sink.written, sink.errors, sink.dropped) == (n, 0, 0), vars(sink)
"""


def _producer(spool: Path, session_id: str, n: int, *, seed: int | None = None) -> Popen[str]:
    argv = [_PRODUCER, str(spool), session_id, str(n), "-" if seed is None else str(seed)]
    return subprocess.Popen([sys.executable, "-c", *argv], text=True, cwd=ROOT)


class _Watcher:
    """``compactlens ingest --watch`` as a subprocess; its stderr is drained by a thread so a
    chatty watcher never blocks on a full pipe, and its first line means it is running."""

    def __init__(self, home: Path, interval_s: float) -> None:
        argv = ["-m", "analytics.cli", "ingest", "--home", str(home), "--watch"]
        self.proc = subprocess.Popen(
            [sys.executable, *argv, "--interval", str(interval_s)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.lines: list[str] = []
        self.started = threading.Event()
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip())
            self.started.set()
        self.started.set()

    def stop(self) -> int:
        """SIGTERM: the watcher makes a final ingest and exits; returns its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(SUBPROCESS_TIMEOUT_S)
        self._drain.join(SUBPROCESS_TIMEOUT_S)
        return code


def test_watcher_beside_eight_producers_ingests_every_event_once_in_order(
    tmp_path: Path,
) -> None:
    producers, per_producer = 8, 2_000
    spool = tmp_path / "spool"
    watcher = _Watcher(tmp_path, 0.2)
    procs: list[Popen[str]] = []
    try:
        assert watcher.started.wait(SUBPROCESS_TIMEOUT_S)
        assert watcher.proc.poll() is None, watcher.lines
        procs = [_producer(spool, f"producer-{k}", per_producer) for k in range(producers)]
        for proc in procs:
            assert proc.wait(SUBPROCESS_TIMEOUT_S) == 0
        assert watcher.stop() == 0, watcher.lines
    finally:
        for proc in [*procs, watcher.proc]:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    assert len(list(spool.glob("*.jsonl"))) == producers
    with open_store(tmp_path) as store:
        assert store.counts()["events"] == producers * per_producer
        assert store.counts()["quarantine"] == 0
        by_session = _events_by_session(store)
        assert by_session["session_id"].to_list() == [f"producer-{k}" for k in range(producers)]
        assert by_session["n"].to_list() == [per_producer] * producers
        _assert_seq_gap_free(store)
        ordered = store.query(
            "SELECT session_id, seq, line, occurred_at FROM events ORDER BY session_id, seq"
        )
        for k in range(producers):
            rows = ordered.filter(pl.col("session_id") == f"producer-{k}")
            assert rows["seq"].to_list() == list(range(per_producer))
            assert rows["line"].to_list() == list(range(1, per_producer + 1))
            assert rows["occurred_at"].is_sorted(), f"producer-{k}: seq order != time order"
        for source, (byte_offset, _lines) in store.offsets().items():
            assert byte_offset == os.path.getsize(spool / source), source


def test_producers_that_seed_the_global_prng_still_get_every_event_stored(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    procs = [_producer(spool, f"seeded-{k}", 300, seed=1234) for k in range(2)]
    try:
        assert [proc.wait(SUBPROCESS_TIMEOUT_S) for proc in procs] == [0, 0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
        assert result.duplicates == 0
        assert _events_by_session(store)["n"].to_list() == [300, 300]


# ---------------------------------------------------------------- quarantine


def _valid(factory: EventFactory, i: int) -> str:
    return factory.make(UsageReported(estimated_input_tokens=i, input_tokens=i)).to_json_line()


def _with(line: str, **changes: object) -> str:
    raw = json.loads(line)
    raw.update(changes)
    return json.dumps(raw)


def test_invalid_lines_are_quarantined_with_reason_and_line_while_neighbours_land(
    tmp_path: Path,
) -> None:
    factory = EventFactory("q")
    good = [_valid(factory, i) for i in range(6)]
    shape_wrong = _with(
        _valid(factory, 92),
        type="message_appended",
        schema_version=SCHEMA_VERSIONS["message_appended"],
    )
    lines: list[bytes] = [
        good[0].encode(),  # 1
        b"this is { not json",  # 2
        good[1].encode(),  # 3
        b"[1, 2, 3]",  # 4
        b'{"hello": "world"}',  # 5
        good[2].encode(),  # 6
        b"",  # 7: blank lines are skipped but counted
        _with(_valid(factory, 90), seq="five").encode(),  # 8
        _with(_valid(factory, 91), schema_version=NEWER).encode(),  # 9
        good[3].encode(),  # 10
        b'\xff\xfe{"event_id": "x"}',  # 11
        shape_wrong.encode(),  # 12
        good[4].encode(),  # 13
        good[5].encode(),  # 14
    ]
    spool = tmp_path / "spool" / "mixed.jsonl"
    spool.parent.mkdir()
    spool.write_bytes(b"\n".join(lines) + b"\n")

    with open_store(tmp_path) as store:
        result = Projector(store, tmp_path / "spool").ingest()
        assert (result.lines, result.new_events, result.quarantined) == (14, 6, 7)
        events = store.query("SELECT seq, line FROM events ORDER BY line")
        assert events.rows() == [(0, 1), (1, 3), (2, 6), (3, 10), (4, 13), (5, 14)]
        q = store.query("SELECT source, line, reason, raw FROM quarantine ORDER BY line")
        assert q["source"].unique().to_list() == ["mixed.jsonl"]
        assert q["line"].to_list() == [2, 4, 5, 8, 9, 11, 12]
        reasons = dict(zip(q["line"].to_list(), q["reason"].to_list(), strict=True))
        expected = {
            2: ("not JSON",),
            4: ("JSON object", "list"),
            5: ("unknown event type None", "known: session_started"),
            8: ("seq", "integer"),
            9: (f"schema_version {NEWER}", "newer", "upgrade compactlens"),
            11: ("not UTF-8", "byte 0"),
            12: ("envelope type 'message_appended'", "'usage_reported'"),
        }
        for line, fragments in expected.items():
            for fragment in fragments:
                assert fragment in reasons[line], (line, reasons[line])
        raws = dict(zip(q["line"].to_list(), q["raw"].to_list(), strict=True))
        assert raws[2] == "this is { not json"
        assert raws[4] == "[1, 2, 3]"
        assert '"seq": "five"' in raws[8]
        assert raws[11].endswith('{"event_id": "x"}')

        before = snapshot(store)
        assert Projector(store, tmp_path / "spool").ingest().quarantined == 0
        assert_same_tables(before, snapshot(store))


def test_a_lone_surrogate_is_quarantined_with_where_it_is_while_neighbours_land(
    tmp_path: Path,
) -> None:
    """JSON may escape a lone surrogate (a foreign writer; our sink scrubs them). Such a line is
    not Unicode text: it is quarantined with its raw text, and the reason says which field."""
    factory = EventFactory("sur")
    in_id = json.loads(_valid(factory, 1))
    in_id["session_id"] = "a\ud800b"
    appended = MessageAppended(index=0, role="user", bytes=1, sha256="0" * 64, content="x")
    in_text = json.loads(factory.make(appended).to_json_line())
    in_text["payload"]["content"] = "ok \udfff"
    lines = [
        _valid(factory, 2),
        json.dumps(in_id),  # the escapes stay escapes: "\\ud800" in the file
        json.dumps(in_text),
        _valid(factory, 3),
    ]
    spool = tmp_path / "spool" / "sur.jsonl"
    spool.parent.mkdir()
    spool.write_text("\n".join(lines) + "\n", encoding="utf-8")

    with open_store(tmp_path) as store:
        result = Projector(store, tmp_path / "spool").ingest()
        q = store.query("SELECT line, reason, raw FROM quarantine ORDER BY line")

    assert (result.new_events, result.quarantined) == (2, 2)
    assert q["line"].to_list() == [2, 3]
    assert q["reason"].to_list() == [
        "invalid event: session_id holds a lone surrogate (\\ud800), which is not Unicode text",
        "invalid event: payload.content holds a lone surrogate (\\udfff), which is not "
        "Unicode text",
    ]
    assert q["raw"].to_list() == lines[1:3]


def test_a_line_nested_too_deeply_is_quarantined_and_the_ingest_goes_on(tmp_path: Path) -> None:
    """json.loads gives up past ~1,000 levels with a RecursionError: that line is bad input,
    not a crash that would stop every later ingest at the same offset."""
    factory = EventFactory("deep")
    deep = '{"event_id": "x", "payload": ' + "[" * 100_000 + "]" * 100_000 + "}"
    spool = tmp_path / "spool" / "deep.jsonl"
    spool.parent.mkdir()
    spool.write_text("\n".join([_valid(factory, 1), deep, _valid(factory, 2)]) + "\n")

    with open_store(tmp_path) as store:
        result = Projector(store, tmp_path / "spool").ingest()
        q = store.query("SELECT line, reason FROM quarantine")
        again = Projector(store, tmp_path / "spool").ingest()

    assert (result.new_events, result.quarantined) == (2, 1)
    assert q.rows() == [
        (2, "invalid event: JSON nested too deeply to parse (over about 1,000 levels)")
    ]
    assert (again.lines, again.quarantined) == (0, 0)


def test_a_spool_file_whose_name_is_not_utf8_loads_under_an_escaped_name(tmp_path: Path) -> None:
    factory = EventFactory("odd-name")
    spool = tmp_path / "spool"
    spool.mkdir()
    odd = os.fsdecode(b"run-\xff.jsonl")  # a byte no UTF-8 name holds
    (spool / odd).write_text(_valid(factory, 1) + "\n")
    (spool / "z-after.jsonl").write_text(_valid(factory, 2) + "\n")  # sorts after it

    with open_store(tmp_path) as store:
        first = Projector(store, spool).ingest()
        again = Projector(store, spool).ingest()
        sources = store.query("SELECT source FROM events ORDER BY seq")["source"].to_list()

    assert first.new_events == 2
    assert sources == ["run-\\xff.jsonl", "z-after.jsonl"]
    assert again.lines == 0  # its offset is found again under the same name


def _poison(kind: str) -> str:
    line = _valid(EventFactory("poison", start_seq=1), 1)
    raw = json.loads(line)
    if kind == "schema_version_null":
        raw["schema_version"] = None
    elif kind == "schema_version_list":
        raw["schema_version"] = [1]
    elif kind == "schema_version_0":
        raw["schema_version"] = 0
    elif kind == "seq_over_int64":
        raw["seq"] = 2**70
    else:
        raw["payload"]["input_tokens"] = 2**70
    return json.dumps(raw)


@pytest.mark.parametrize(
    "kind",
    [
        "schema_version_null",
        "schema_version_list",
        "schema_version_0",
        "seq_over_int64",
        "payload_int_over_int64",
    ],
)
def test_line_that_breaks_conversion_is_quarantined_not_fatal(tmp_path: Path, kind: str) -> None:
    factory = EventFactory("poison")
    lines = [_valid(factory, 0), _poison(kind), _valid(EventFactory("poison", start_seq=2), 2)]
    write_lines(tmp_path / "spool" / "poison.jsonl", lines)
    with open_store(tmp_path) as store:
        result = Projector(store, tmp_path / "spool").ingest()
        assert (result.new_events, result.quarantined) == (2, 1)
        row = store.query("SELECT line, reason FROM quarantine").row(0)
        assert row[0] == 2
        assert row[1]


def test_overlapping_ingests_restore_the_switch_interval_when_the_last_one_ends() -> None:
    before = sys.getswitchinterval()
    first, second = (_SWITCH_INTERVAL.lowered(GIL_SWITCH_S) for _ in range(2))
    try:
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)  # the first one out must not restore it yet
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_S)
        second.__exit__(None, None, None)
        assert sys.getswitchinterval() == before
    finally:
        sys.setswitchinterval(before)  # a failure above must not slow the rest of the run


def test_an_ingest_with_nothing_new_leaves_the_switch_interval_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app polls the spool every 1.5 s: a poll that finds nothing touches no process-wide
    setting (and starts no thread)."""
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "a.jsonl").write_text(_valid(EventFactory("idle"), 1) + "\n")
    with open_store(tmp_path) as store:
        assert Projector(store, spool).ingest().new_events == 1
        changes: list[float] = []
        monkeypatch.setattr(sys, "setswitchinterval", changes.append)
        idle = Projector(store, spool).ingest()

    assert (idle.files, idle.lines) == (0, 0)
    assert changes == []
