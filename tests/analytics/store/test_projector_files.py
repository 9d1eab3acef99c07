"""The projector's reading of many spool files into one chunk: offsets and line numbers stay with
their own file (SPEC 5; the ``_Next.at`` regression of 0d4a5d6 and its family).

Every figure is checked against the raw files, computed here: each file's committed offset is
(the byte after its last newline, its newline count), its events are exactly the (source, line,
session, seq) of its complete non-blank lines, nothing is quarantined, and the ingest's own
counts are the differences. The layouts put chunk budgets exactly at file ends, long lines after
nearly full chunks, empty, blank-only, torn-only, skipped and unreadable files between others,
and change files between the ingest's plan and its read (from the ``progress`` callback, which
runs after a commit and before the chunk after next is parsed; a rewrite in place must be
skipped and read again from the start). A hypothesis state machine appends, tears, blanks,
replaces and rewrites files between ingests of random chunk sizes and compares the store with
the raw files after each ingest and with one ingest of the final files.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from analytics.store import EventStore, open_store
from analytics.store.projector import (
    CHUNK_BYTES,
    FIRST_CHUNK_BYTES,
    IngestResult,
    Progress,
    Projector,
)
from analytics.store.spoolfiles import SpoolDir
from compactor.events import EventFactory, MessageAppended
from tests.analytics.spool_helpers import (
    NO_DAC,
    NOBODY,
    skip_unless_unreadable,
    usage_lines,
    write_lines,
)
from tests.fuzzing import examples

Row = tuple[str, int, str, int]
"""(source, line, session_id, seq) of one stored event."""
Offsets = dict[str, tuple[int, int]]
ROOT = Path(__file__).resolve().parents[3]
LEAD = "0-lead.jsonl"
"""Sorts first: the file the first two chunks of a hooked ingest read (see ``_lead``)."""
HOOK_CHUNK = 2048


# ---------------------------------------------------------------- the raw files


def _complete(path: Path) -> tuple[int, int]:
    """(the byte after the last newline, the newline count) of a file: where reading stops."""
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    return end, data[:end].count(b"\n")


def _rows(path: Path, upto: int | None = None) -> list[Row]:
    """The events the complete lines of ``path`` (before byte ``upto``) must be."""
    data = path.read_bytes()
    end = data.rfind(b"\n", 0, upto) + 1
    rows = []
    for number, raw in enumerate(data[:end].split(b"\n")[:-1], start=1):
        if raw.strip():
            event = json.loads(raw)
            rows.append((path.name, number, event["session_id"], event["seq"]))
    return rows


def _spool_files(spool: Path, but: Iterable[str] = ()) -> list[Path]:
    return sorted(p for p in spool.glob("*.jsonl") if p.name not in set(but))


def _stored_rows(store: EventStore) -> list[Row]:
    rows = store.query("SELECT source, line, session_id, seq FROM events ORDER BY ALL").rows()
    return [(str(s), int(n), str(sid), int(q)) for s, n, sid, q in rows]


def _assert_exact(
    store: EventStore,
    spool: Path,
    *,
    but: Iterable[str] = (),
    rows: Iterable[Row] = (),
    offsets: Offsets | None = None,
) -> None:
    """Every current file (but ``but``) read to its last newline, exactly; ``rows`` and
    ``offsets``: what the store also holds (files replaced, gone or not read)."""
    files = _spool_files(spool, but)
    expected = {p.name: _complete(p) for p in files if _complete(p)[1]} | (offsets or {})
    assert store.offsets() == expected
    assert _stored_rows(store) == sorted({*rows, *(r for p in files for r in _rows(p))})
    assert store.counts()["quarantine"] == 0, store.query("SELECT * FROM quarantine").rows()


def _assert_consistent(store: EventStore, spool: Path, *, but: Iterable[str] = ()) -> None:
    """What one transaction guarantees while files still change: each offset ends a line, its
    line count is the newlines before it, and the file's events are exactly those lines."""
    stored = _stored_rows(store)
    for source, (offset, lines) in store.offsets().items():
        if source in set(but):
            continue
        data = (spool / source).read_bytes()
        assert offset == 0 or data[offset - 1 : offset] == b"\n", (source, offset)
        assert data[:offset].count(b"\n") == lines, source
        assert [r for r in stored if r[0] == source] == _rows(spool / source, offset), source
    assert store.counts()["quarantine"] == 0


def _assert_counts(result: IngestResult, before: Offsets, after: Offsets, events: int) -> None:
    """The ingest's counts are the moves of the offsets (no file read again from its start)."""
    moved = [(after[s][0] - before.get(s, (0, 0))[0], after[s][1] - before.get(s, (0, 0))[1])
             for s in after]  # fmt: skip
    assert result.bytes_read == sum(b for b, _ in moved)
    assert result.lines == sum(n for _, n in moved)
    assert (result.new_events, result.duplicates, result.quarantined) == (events, 0, 0)


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


def _big_line(session: str, seq: int, content_bytes: int) -> str:
    content = "x" * content_bytes
    sha256 = hashlib.sha256(content.encode()).hexdigest()
    appended = MessageAppended(
        index=seq, role="tool", bytes=content_bytes, sha256=sha256, content=content
    )
    return EventFactory(session, start_seq=seq).make(appended).to_json_line()


def _ingest_checked(store: EventStore, projector: Projector, spool: Path) -> IngestResult:
    """One ingest whose counts must be the offsets' moves and the new rows."""
    before, rows = store.offsets(), len(_stored_rows(store))
    result = projector.ingest()
    _assert_counts(result, before, store.offsets(), len(_stored_rows(store)) - rows)
    return result


# ---------------------------------------------------------------- chunk budgets


def _three_files(spool: Path) -> list[Path]:
    files = [spool / f"{name}.jsonl" for name in "abc"]
    for path, n in zip(files, (3, 4, 2), strict=True):
        write_lines(path, usage_lines(path.stem, n))
    return files


@pytest.mark.parametrize("files_in_budget", [1, 2])
@pytest.mark.parametrize("slack", [-1, 0, 1])
def test_a_chunk_budget_ending_at_a_file_end_goes_on_in_the_next_file_from_its_own_offset(
    tmp_path: Path, files_in_budget: int, slack: int
) -> None:
    spool = tmp_path / "spool"
    files = _three_files(spool)
    with open_store(tmp_path) as store:
        first = Projector(store, spool).ingest()  # every file has a position before the test
        assert (first.lines, first.new_events) == (9, 9)
        for path, n in zip(files, (2, 3, 1), strict=True):
            write_lines(path, usage_lines(path.stem, n, start_seq=_complete(path)[1]))
        news = [p.stat().st_size - store.offsets()[p.name][0] for p in files]
        chunk = sum(news[:files_in_budget]) + slack
        _ingest_checked(store, Projector(store, spool, chunk_bytes=chunk), spool)
        _assert_exact(store, spool)


LAYOUTS = {
    # file: (complete lines before, what is new: "+k" lines, "torn" half a line, "blank")
    "torn-between": {"a": (2, "+1"), "b": (2, "torn"), "c": (2, "+2"), "d": (2, "torn"),
                     "e": (2, "+2")},
    "torn-last": {"a": (2, "+1"), "b": (3, "+1"), "c": (8, "torn"), "d": (10, "torn")},
    "blank-then-torn": {"a": (1, "blank"), "b": (4, "torn")},
    "lines-then-torn": {"a": (0, "+1"), "c": (2, "torn")},
}  # fmt: skip
"""The 0d4a5d6 family: a chunk ending in one file, files after it with only a torn line new (the
last two found by the state machine below against the code before that fix)."""


@pytest.mark.parametrize("exact", [True, False], ids=["budget-ends-in-a", "one-chunk"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_chunk_ending_in_one_file_before_torn_only_files_keeps_each_files_own_offset(
    tmp_path: Path, layout: str, exact: bool
) -> None:
    spool = tmp_path / "spool"
    files = {n: (spool / f"{n}.jsonl", usage_lines(n, 12)) for n in LAYOUTS[layout]}
    for n, (before, _new) in LAYOUTS[layout].items():
        path, lines = files[n]
        write_lines(path, lines[:before])
        path.touch()
    with open_store(tmp_path) as store:
        Projector(store, spool).ingest()
        torn: list[str] = []
        for n, (before, new) in LAYOUTS[layout].items():
            path, lines = files[n]
            if new == "torn":
                _append(path, lines[before].encode()[:50])
                torn.append(n)
            elif new == "blank":
                _append(path, b"\n")
            else:
                write_lines(path, lines[before : before + int(new)])
        first = files["a"][0]
        chunk = first.stat().st_size - store.offsets().get(first.name, (0, 0))[0]
        projector = Projector(store, spool, chunk_bytes=chunk if exact else CHUNK_BYTES)
        _ingest_checked(store, projector, spool)
        _assert_exact(store, spool)
        for n in torn:
            path, lines = files[n]
            before = LAYOUTS[layout][n][0]
            _append(path, lines[before].encode()[50:] + b"\n")
        _ingest_checked(store, projector, spool)
        _assert_exact(store, spool)


@pytest.mark.parametrize(
    "chunk_bytes", [300_000, 6 * 1024 * 1024, CHUNK_BYTES], ids=["small", "6MiB", "default"]
)
def test_chunks_start_at_the_first_size_and_double_to_the_limit_across_file_boundaries(
    tmp_path: Path, chunk_bytes: int
) -> None:
    spool = tmp_path / "spool"
    rng = random.Random(7)
    for k in range(5):  # about 14 MiB in lines of 50 to 150 KB, five files
        lines = [_big_line(f"s{k}", i, rng.randrange(50_000, 150_000)) for i in range(28)]
        write_lines(spool / f"f{k}.jsonl", lines)
    files = _spool_files(spool)
    ends, base = set[int](), 0
    for path in files:
        data = path.read_bytes()
        ends |= {base + m.end() for m in re.finditer(b"\n", data)}
        base += len(data)
    longest = max(len(raw) + 1 for p in files for raw in p.read_bytes().split(b"\n"))
    done: list[int] = []
    with open_store(tmp_path) as store:
        result = Projector(store, spool, chunk_bytes=chunk_bytes).ingest(
            lambda read, todo: done.append(read)
        )
        _assert_exact(store, spool)
    assert result.bytes_read == done[-1] == base
    assert result.commits == len(done)
    budget = min(FIRST_CHUNK_BYTES, chunk_bytes)
    for k, (start, end) in enumerate(zip([0, *done], done, strict=False)):
        assert end in ends  # each commit ends at a line end of the files read in name order
        # a file starting with a line longer than the budget left is read to that line's end
        assert end - start <= budget + longest
        if k < len(done) - 1:
            assert end - start > budget - longest, (k, end - start, budget)
        budget = min(budget * 2, chunk_bytes)


def test_lines_longer_than_the_chunk_among_other_files_are_read_whole(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    small = usage_lines("a", 3)
    write_lines(spool / "a.jsonl", [small[0], _big_line("a", 1, 5_000), small[2]])
    write_lines(spool / "b.jsonl", [_big_line("b", 0, 3_000), *usage_lines("b", 3)[1:]])
    write_lines(spool / "c.jsonl", usage_lines("c", 2))
    torn = _big_line("d", 0, 4_000)
    _append(spool / "d.jsonl", torn[:3_500].encode())
    write_lines(spool / "e.jsonl", [_big_line("e", 0, 2_500)])
    with open_store(tmp_path) as store:
        projector = Projector(store, spool, chunk_bytes=1_000)
        for _ in range(2):  # the torn long line holds back only itself, and asking again is a no-op
            _ingest_checked(store, projector, spool)
            _assert_exact(store, spool)
        _append(spool / "d.jsonl", torn[3_500:].encode() + b"\n")
        _ingest_checked(store, projector, spool)
        _assert_exact(store, spool)


def _read_syscalls() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("syscr:"):
            return int(line.split()[1])
    raise AssertionError("no syscr in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs /proc/self/io")
@pytest.mark.parametrize("torn", [False, True], ids=["complete", "torn"])
def test_a_long_line_after_a_nearly_full_chunk_is_read_in_a_few_reads(
    tmp_path: Path, torn: bool
) -> None:
    spool = tmp_path / "spool"
    write_lines(spool / "a.jsonl", usage_lines("a", 10))
    long = _big_line("b", 0, 8_000).encode() + (b"" if torn else b"\n")
    _append(spool / "b.jsonl", long)
    chunk = (spool / "a.jsonl").stat().st_size + 1  # one byte of budget left for b.jsonl
    with open_store(tmp_path) as store:
        projector = Projector(store, spool, chunk_bytes=chunk)
        before = _read_syscalls()
        _ingest_checked(store, projector, spool)
        reads = _read_syscalls() - before
        _assert_exact(store, spool)
    assert reads < 1_000, f"{reads} read calls for {len(long)} bytes"


# ---------------------------------------------------------------- empty, blank, skipped


@pytest.mark.parametrize("chunk_bytes", [16, 500, CHUNK_BYTES])
def test_empty_and_blank_only_files_between_others_get_exact_offsets(
    tmp_path: Path, chunk_bytes: int
) -> None:
    spool = tmp_path / "spool"
    write_lines(spool / "a.jsonl", usage_lines("a", 2))
    (spool / "b.jsonl").touch()
    _append(spool / "c.jsonl", b"\n\n \n\t\n")
    write_lines(spool / "d.jsonl", usage_lines("d", 2))
    with open_store(tmp_path) as store:
        projector = Projector(store, spool, chunk_bytes=chunk_bytes)
        result = _ingest_checked(store, projector, spool)
        assert "b.jsonl" not in store.offsets()  # nothing complete: no position
        assert result.lines == 2 + 4 + 2
        _assert_exact(store, spool)
        _append(spool / "a.jsonl", b"\n  \n")  # the only new bytes are blank lines
        write_lines(spool / "b.jsonl", usage_lines("b", 2))
        _append(spool / "d.jsonl", b"\n")
        result = _ingest_checked(store, projector, spool)
        assert (result.lines, result.new_events) == (2 + 2 + 1, 2)
        _assert_exact(store, spool)
        assert _ingest_checked(store, projector, spool).commits == 0


def _five_files(spool: Path) -> list[Path]:
    files = [spool / f"{k}-agent.jsonl" for k in range(1, 6)]
    for k, path in enumerate(files):
        write_lines(path, usage_lines(path.stem, 2 + k))
    return files


@pytest.mark.parametrize("chunk_bytes", [700, CHUNK_BYTES])
def test_a_hard_linked_file_between_others_is_skipped_once_and_read_whole_once_unlinked(
    tmp_path: Path, chunk_bytes: int
) -> None:
    spool = tmp_path / "spool"
    files = _five_files(spool)
    link = tmp_path / "second-name"
    os.link(files[2], link)
    with open_store(tmp_path) as store:
        projector = Projector(store, spool, chunk_bytes=chunk_bytes)
        result = _ingest_checked(store, projector, spool)
        assert result.skipped == [
            f"{files[2].name}: a file with 2 hard links (names elsewhere too; a spool file has "
            "one), not read"
        ]
        _assert_exact(store, spool, but=[files[2].name])
        write_lines(files[3], usage_lines(files[3].stem, 2, start_seq=_complete(files[3])[1]))
        assert _ingest_checked(store, projector, spool).skipped == []  # said once
        _assert_exact(store, spool, but=[files[2].name])
        link.unlink()
        _ingest_checked(store, projector, spool)
        _assert_exact(store, spool)


_INGESTS = """
import json, sys
from pathlib import Path
from analytics.store import open_store
from analytics.store.projector import Projector
for request in sys.stdin:
    home, chunk_bytes = request.rstrip("\\n").split("\\t")
    with open_store(Path(home)) as store:
        done = Projector(store, Path(home) / "spool", chunk_bytes=int(chunk_bytes)).ingest()
    print(json.dumps({"lines": done.lines, "events": done.new_events, "skipped": done.skipped}),
          flush=True)
"""
"""Ingests on request (a home and a chunk size a line), each with its own store and projector
as a process of its own would make them: one interpreter start for the module, not one an
ingest."""


class _Unprivileged:
    """A Python process without the capability to read other users' files that ingests a home
    when asked (``_INGESTS``), started on the first ask; its stderr goes to a file so that it
    never blocks on a pipe."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.proc: subprocess.Popen[str] | None = None

    def _started(self) -> subprocess.Popen[str]:
        if self.proc is None:
            argv = [*NO_DAC, sys.executable, "-c", _INGESTS]
            with self.log.open("wb") as stderr:
                self.proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                    text=True, cwd=ROOT,
                )  # fmt: skip
        return self.proc

    def ingest(self, home: Path, chunk_bytes: int) -> dict[str, object]:
        proc = self._started()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(f"{home}\t{chunk_bytes}\n")
        proc.stdin.flush()
        # the timeout guards against a hang; it is no speed limit
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline() if ready else ""
        assert line, self.log.read_text(errors="replace") or "no answer from the ingest"
        out: dict[str, object] = json.loads(line)
        return out

    def close(self) -> None:
        if self.proc is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:  # a clean exit, as each one-shot process had
            assert self.proc.wait(120) == 0, self.log.read_text(errors="replace")
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def unprivileged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Unprivileged]:
    """One unprivileged ingesting process for the module's tests."""
    worker = _Unprivileged(tmp_path_factory.mktemp("unprivileged") / "stderr.log")
    try:
        yield worker
    finally:
        worker.close()


@pytest.mark.parametrize("chunk_bytes", [700, CHUNK_BYTES])
def test_unreadable_files_among_many_are_skipped_and_read_from_their_offsets_once_readable(
    tmp_path: Path, chunk_bytes: int, unprivileged: _Unprivileged
) -> None:
    skip_unless_unreadable(tmp_path)
    spool = tmp_path / "spool"
    files = _five_files(spool)
    unprivileged.ingest(tmp_path, chunk_bytes)  # every file has a position
    for path in files:
        write_lines(path, usage_lines(path.stem, 2, start_seq=_complete(path)[1]))
    _append(files[4], b'{"torn')
    locked = [files[1], files[3]]
    with open_store(tmp_path) as store:
        before = store.offsets()
    for path in locked:
        os.chown(path, NOBODY, NOBODY)
        path.chmod(0o600)
    result = unprivileged.ingest(tmp_path, chunk_bytes)
    assert result["lines"] == result["events"] == 2 * 3
    assert result["skipped"] == [
        f"{p.name}: cannot be read (Permission denied); tried again next time" for p in locked
    ]
    with open_store(tmp_path) as store:
        _assert_exact(store, spool, but=[p.name for p in locked],
                      rows=[r for p in locked for r in _rows(p, before[p.name][0])],
                      offsets={p.name: before[p.name] for p in locked})  # fmt: skip
    for path in locked:
        os.chown(path, 0, 0)
    assert unprivileged.ingest(tmp_path, chunk_bytes)["lines"] == 2 * 2
    with open_store(tmp_path) as store:
        _assert_exact(store, spool)


# ---------------------------------------------------------------- changed between plan and read


def _lead(spool: Path) -> None:
    """A first file over two chunks long: with ``HOOK_CHUNK``, chunks 1 and 2 read only it, so a
    change made after commit 1 (from ``progress``) lands before any other file is read."""
    write_lines(spool / LEAD, usage_lines("lead", 12))
    assert (spool / LEAD).stat().st_size > 2 * HOOK_CHUNK + 600


def _once(change: Callable[[], object]) -> Progress:
    calls: list[int] = []

    def progress(done: int, todo: int) -> None:
        if not calls:
            change()
        calls.append(done)

    return progress


@pytest.fixture
def planned(tmp_path: Path) -> Iterator[tuple[EventStore, Path, list[Path]]]:
    """Five files read once, each with two lines more since, and a lead file before them."""
    spool = tmp_path / "spool"
    files = _five_files(spool)
    with open_store(tmp_path) as store:
        Projector(store, spool).ingest()
        for path in files:
            write_lines(path, usage_lines(path.stem, 2, start_seq=_complete(path)[1]))
        _lead(spool)
        yield store, spool, files


def test_files_that_grow_after_planning_are_read_to_a_line_end_and_the_rest_next_time(
    planned: tuple[EventStore, Path, list[Path]],
) -> None:
    store, spool, files = planned
    planned_ends = {p.name: _complete(p)[0] for p in files}
    tail = usage_lines(files[3].stem, 9, start_seq=_complete(files[3])[1])

    def grow() -> None:
        for path in files[:3]:
            write_lines(path, usage_lines(path.stem, 3, start_seq=_complete(path)[1]))
        _append(files[3], tail[0].encode()[:99])  # a torn line where a complete one was planned
        _append(files[4], b"\n\n")

    projector = Projector(store, spool, chunk_bytes=HOOK_CHUNK)
    result = projector.ingest(_once(grow))
    assert result.commits >= 3
    _assert_consistent(store, spool)
    for path in files:  # at least what was planned is read
        assert store.offsets()[path.name][0] >= planned_ends[path.name]
    _append(files[3], tail[0].encode()[99:] + b"\n")
    _ingest_checked(store, projector, spool)
    _assert_exact(store, spool)


def test_a_file_replaced_after_planning_is_skipped_and_the_others_of_its_chunk_commit(
    planned: tuple[EventStore, Path, list[Path]],
) -> None:
    store, spool, files = planned
    target = files[2]
    old, old_rows = store.offsets()[target.name], _rows(target, store.offsets()[target.name][0])
    replacement = spool / "new.tmp"

    def replace() -> None:
        write_lines(replacement, usage_lines("replacement", 3))
        replacement.rename(target)  # a new inode under the planned name

    projector = Projector(store, spool, chunk_bytes=HOOK_CHUNK)
    result = projector.ingest(_once(replace))
    assert result.skipped == [
        f"{target.name}: replaced while it was being read; read again next time"
    ]
    _assert_exact(store, spool, but=[target.name], rows=old_rows, offsets={target.name: old})
    again = projector.ingest()
    assert (again.lines, again.new_events, again.skipped) == (3, 3, [])
    _assert_exact(store, spool, rows=old_rows)


@pytest.mark.parametrize("change", ["delete", "hard-link"])
def test_a_file_deleted_or_linked_after_planning_is_skipped_and_the_others_of_its_chunk_commit(
    planned: tuple[EventStore, Path, list[Path]], change: str
) -> None:
    store, spool, files = planned
    target = files[1]
    old, old_rows = store.offsets()[target.name], _rows(target, store.offsets()[target.name][0])
    link = spool.parent / "second-name"
    act = target.unlink if change == "delete" else lambda: os.link(target, link)
    projector = Projector(store, spool, chunk_bytes=HOOK_CHUNK)
    result = projector.ingest(_once(act))
    why = {
        "delete": "gone before it could be read (deleted or renamed); tried again next time",
        "hard-link": "a file with 2 hard links (names elsewhere too; a spool file has one), "
        "not read",
    }[change]
    assert result.skipped == [f"{target.name}: {why}"]
    _assert_exact(store, spool, but=[target.name], rows=old_rows, offsets={target.name: old})
    if change == "hard-link":
        link.unlink()
        _ingest_checked(store, projector, spool)
        _assert_exact(store, spool)


REWRITTEN = "rewritten in place while it was being read; read again from its start next time"


def test_a_file_truncated_below_its_offset_after_planning_is_read_from_its_start_next_time(
    planned: tuple[EventStore, Path, list[Path]],
) -> None:
    store, spool, files = planned
    target = files[3]
    old_rows = _rows(target, store.offsets()[target.name][0])
    new = usage_lines("rewritten", 2)
    projector = Projector(store, spool, chunk_bytes=HOOK_CHUNK)
    result = projector.ingest(_once(lambda: target.write_text(new[0] + "\n")))  # shorter
    assert result.skipped == [f"{target.name}: {REWRITTEN}"]
    _assert_consistent(store, spool, but=[target.name])  # its offset is past its end now
    assert store.offsets()[target.name][0] > target.stat().st_size
    write_lines(target, new[1:])
    projector.ingest()
    _assert_exact(store, spool, rows=old_rows)


def test_a_file_rewritten_in_place_after_planning_is_read_again_from_its_start(
    planned: tuple[EventStore, Path, list[Path]],
) -> None:
    store, spool, files = planned
    target = files[2]
    old = store.offsets()[target.name]
    old_rows = _rows(target, old[0])
    new = "".join(line + "\n" for line in usage_lines("rewritten", 20))
    projector = Projector(store, spool, chunk_bytes=HOOK_CHUNK)
    result = projector.ingest(_once(lambda: target.write_text(new)))  # same inode, longer
    assert result.skipped == [f"{target.name}: {REWRITTEN}"]
    _assert_exact(store, spool, but=[target.name], rows=old_rows,
                  offsets={target.name: old})  # fmt: skip
    again = projector.ingest()
    assert (again.lines, again.new_events, again.skipped) == (20, 20, [])
    _assert_exact(store, spool, rows=old_rows)


def test_a_file_rewritten_in_place_between_two_of_its_chunks_is_read_again_from_its_start(
    tmp_path: Path,
) -> None:
    """Driven one chunk at a time (``_plan``, ``_parse_next``, ``_commit``): between two chunks
    of one file no callback runs while the second is not yet being parsed."""
    spool = tmp_path / "spool"
    target = spool / "a.jsonl"
    write_lines(target, usage_lines("a", 12))
    with open_store(tmp_path) as store:
        projector = Projector(store, spool, chunk_bytes=HOOK_CHUNK)
        with SpoolDir(spool).opened() as opened:
            jobs, _ = projector._plan(opened)
            first = projector._parse_next(opened, jobs, 0, 0, 0, HOOK_CHUNK)
            assert first.parsed is not None
            projector._commit(first.parsed)
            end = first.parsed.last
            old_rows = _rows(target, end.end)
            target.write_text("".join(line + "\n" for line in usage_lines("rewritten", 20)))
            second = projector._parse_next(
                opened, jobs, first.at, end.end, end.end_line, 4096, tail=end.tail_sha256
            )
            assert second.skipped == {target.name: REWRITTEN}
            if second.parsed is not None:
                projector._commit(second.parsed)
        projector.ingest()
        projector.ingest()
        _assert_exact(store, spool, rows=old_rows)


# ---------------------------------------------------------------- ingests in a row


@pytest.mark.parametrize("reuse", [True, False], ids=["same-projector", "new-projectors"])
@pytest.mark.parametrize("chunk_bytes", [333, 1_500, CHUNK_BYTES])
def test_ingests_in_a_row_with_torn_lines_in_several_files_at_once_read_each_line_once(
    tmp_path: Path, reuse: bool, chunk_bytes: int
) -> None:
    spool = tmp_path / "spool"
    names = [f"{c}.jsonl" for c in "abcdef"]
    lines = {n: usage_lines(n, 30) for n in names}
    written = dict.fromkeys(names, 0)
    torn: dict[str, int] = {}  # file -> bytes of its next line already written
    rng = random.Random(3)
    with open_store(tmp_path) as store:
        projector = Projector(store, spool, chunk_bytes=chunk_bytes)
        for _ in range(8):
            for name in rng.sample(names, 4):
                path = spool / name
                if name in torn:  # finish the torn line first
                    _append(path, lines[name][written[name]].encode()[torn.pop(name) :] + b"\n")
                    written[name] += 1
                k = rng.randrange(0, 3)
                write_lines(path, lines[name][written[name] : written[name] + k])
                written[name] += k
                if rng.random() < 0.6 and written[name] < len(lines[name]):
                    cut = rng.randrange(1, len(lines[name][written[name]]))
                    _append(path, lines[name][written[name]].encode()[:cut])
                    torn[name] = cut
            if not reuse:
                projector = Projector(store, spool, chunk_bytes=chunk_bytes)
            _ingest_checked(store, projector, spool)
            _assert_exact(store, spool)


# ---------------------------------------------------------------- a state machine


KINDS = ["none"] * 2 + ["lines"] * 5 + ["torn"] * 5 + ["blank", "replace", "rewrite"]
ACTION = st.tuples(st.sampled_from(KINDS), st.integers(1, 400))
"""What one step does to one file, and a number (lines, where a torn line is cut, which blank,
how many lines the new file holds); new files are rare, so that files grow apart."""


class SpoolFiles(RuleBasedStateMachine):
    """Three spool files appended to, torn, blanked (several in one step), replaced (the old
    one renamed away, as logrotate does) or rewritten in place (copytruncate) between ingests
    of random chunk sizes; after each ingest the store is exactly the raw files, and at the end
    it equals one ingest of the final files. Against the code before 0d4a5d6 it finds that bug
    in about one run of three (the layouts above always do)."""

    NAMES = ("a.jsonl", "b.jsonl", "c.jsonl")

    def size(self, name: str) -> int:
        return (self.spool / name).stat().st_size

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory(prefix="compactlens-files-")
        self.home = Path(self.tmp.name)
        self.spool = self.home / "spool"
        self.spool.mkdir()
        self.store = open_store(self.home)
        self.projector = Projector(self.store, self.spool)
        self.gen = dict.fromkeys(self.NAMES, 0)
        self.seq = dict.fromkeys(self.NAMES, 0)
        self.torn: dict[str, bytes] = {}  # file -> the rest of its torn line
        self.retired: set[Row] = set()
        """Rows of replaced files, as the store read them."""
        self.read: dict[str, list[Row]] = {}
        self.offsets: Offsets = {}
        self.rotations = 0
        self.rewritten: set[str] = set()
        """Files truncated and rewritten in place since they were last read."""

    def _next_line(self, name: str) -> str:
        line = usage_lines(f"{name}-{self.gen[name]}", 1, start_seq=self.seq[name])[0]
        self.seq[name] += 1
        return line

    def _finish_torn(self, name: str) -> None:
        if name in self.torn:
            _append(self.spool / name, self.torn.pop(name) + b"\n")

    @rule(actions=st.tuples(ACTION, ACTION, ACTION))
    def write(self, actions: tuple[tuple[str, int], ...]) -> None:
        """One action in each file: nothing, lines, a torn line (more of it if one is torn),
        or blank lines (a torn line is completed first), so that several files change at once."""
        for name, (kind, k) in zip(self.NAMES, actions, strict=True):
            rest = self.torn.get(name, b"")
            if kind in ("none", "replace", "rewrite"):
                if kind != "none":
                    self._replace(name, k % 3, in_place=kind == "rewrite")
                continue
            if kind == "torn" and len(rest) > 1:  # the writer is still writing that line
                _append(self.spool / name, rest[: min(k, len(rest) - 1)])
                self.torn[name] = rest[min(k, len(rest) - 1) :]
                continue
            self._finish_torn(name)
            path = self.spool / name
            if kind == "lines":
                write_lines(path, [self._next_line(name) for _ in range(k % 3 + 1)])
            elif kind == "torn":
                raw = self._next_line(name).encode()
                _append(path, raw[:k])
                self.torn[name] = raw[k:]
            else:
                _append(path, [b"\n", b" \n\n", b"\t\n"][k % 3])

    def _replace(self, name: str, n: int, *, in_place: bool) -> None:
        """A new file under ``name`` with ``n`` lines of a new session: the old one renamed
        away (its inode is kept, so never reused), or truncated and rewritten in place
        (copytruncate)."""
        path = self.spool / name
        if path.exists() and not in_place:
            path.rename(self.spool / f"{name}.{self.rotations}.old")
            self.rotations += 1
        self.torn.pop(name, None)
        self.retired |= set(self.read.pop(name, []))
        self.gen[name] += 1
        self.seq[name] = 0
        path.write_bytes(b"".join(self._next_line(name).encode() + b"\n" for _ in range(n)))
        if in_place:
            self.rewritten.add(name)

    @rule(
        fresh=st.booleans(),
        files=st.integers(1, 3),
        slack=st.integers(-1, 1),
        fixed=st.sampled_from([None, 200, 700, 2_000, CHUNK_BYTES]),
    )
    def ingest(self, fresh: bool, files: int, slack: int, fixed: int | None) -> None:
        if fresh:  # the budget ends exactly at (or a byte around) the end of the first files
            known = self.store.offsets()
            news = [
                _complete(p)[0] - min(known.get(p.name, (0, 0))[0], _complete(p)[0])
                for p in _spool_files(self.spool)
            ]
            chunk = fixed or max(1, sum(news[:files]) + slack)
            self.projector = Projector(self.store, self.spool, chunk_bytes=chunk)
        self._ingest()

    def _ingest(self) -> None:
        # a file rewritten in place to the very length of its offset is taken as unchanged
        # until it grows (said in Projector._plan: only a listing is read for unchanged files)
        stuck = [n for n in self.rewritten if self.offsets.get(n, (-1, 0))[0] == self.size(n)]
        result = self.projector.ingest(checkpoint=False)  # the log is as durable, and faster
        assert (result.quarantined, result.duplicates, result.skipped) == (0, 0, [])
        for path in _spool_files(self.spool, but=stuck):
            if _complete(path)[1]:  # read (from its start, if rewritten): a position now
                self.offsets[path.name] = _complete(path)
                self.read[path.name] = _rows(path)
                self.rewritten.discard(path.name)
        _assert_exact(self.store, self.spool, but=stuck, rows=self.retired, offsets=self.offsets)

    def teardown(self) -> None:
        try:
            for name in self.rewritten:  # make any stuck file grow, so that it is read
                self._finish_torn(name)
                _append(self.spool / name, b"\n")
            self._ingest()
            once = self.home / "once"
            (once / "spool").mkdir(parents=True)
            for path in _spool_files(self.spool):
                shutil.copyfile(path, once / "spool" / path.name)
            with open_store(once) as single:
                Projector(single, once / "spool").ingest()
                current = {
                    p.name: _complete(p) for p in _spool_files(self.spool) if _complete(p)[1]
                }
                assert single.offsets() == current
                assert {k: v for k, v in self.store.offsets().items() if k in current} == current
                rows = set(_stored_rows(self.store)) - self.retired
                assert sorted(rows) == _stored_rows(single)
                assert single.counts()["quarantine"] == 0
        finally:
            self.store.close()
            self.tmp.cleanup()


@pytest.mark.hypothesis  # a state machine: Hypothesis marks only @given tests itself
def test_random_appends_tears_blanks_and_replacements_match_the_raw_files_after_each_ingest() -> (
    None
):
    run_state_machine_as_test(
        SpoolFiles,
        settings=settings(
            max_examples=examples(12),
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
