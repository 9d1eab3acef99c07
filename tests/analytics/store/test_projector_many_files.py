"""Many agents' spool files, each with a little new: one commit for all of them, not one each.

On a lake commits are serialised, so a projector that committed once per file could not keep up
with a hundred agents (each its own spool file) at ten events a second. These tests build real
spools of many small files and check, on both backends, that the new tails of many files land
in few commits, every event exactly once, each file's position at its last complete line; a
torn last line in one file holds back that line only, a file too big for one chunk is read in
several, and another file's tail after it still arrives.
"""

from __future__ import annotations

import math
from pathlib import Path

from analytics.store.projector import Projector
from compactor.events import EventFactory, UsageReported
from tests.analytics.store.conftest import Backend

FILES = 40


def _append(spool: Path, agent: int, factory: EventFactory, n: int, start: int = 0) -> int:
    """``n`` complete lines to agent ``agent``'s file; returns the bytes written."""
    lines = [
        factory.make(
            UsageReported(estimated_input_tokens=1000, input_tokens=990, turn=start + k)
        ).to_json_line()
        + "\n"
        for k in range(n)
    ]
    with (spool / f"agent-{agent}.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("".join(lines))
    return len("".join(lines).encode())


def _counted(backend: Backend) -> int:
    with backend.open() as store:
        row = store.query("SELECT count(*) AS n FROM events").row(0)
    return int(row[0])


def test_new_tails_of_many_files_land_in_one_commit_each_exactly_once(backend: Backend) -> None:
    spool = backend.home / "spool"
    spool.mkdir()
    factories = [EventFactory(f"agent-{a}") for a in range(FILES)]
    for a, factory in enumerate(factories):
        _append(spool, a, factory, 5)

    with backend.open() as store:
        first = Projector(store, spool).ingest()
    assert (first.files, first.commits, first.new_events) == (FILES, 1, FILES * 5)

    # a line more in half the files, and half a line in one more: one commit again
    for a in range(0, FILES, 2):
        _append(spool, a, factories[a], 1, start=5)
    torn = spool / "agent-1.jsonl"
    whole = (
        factories[1]
        .make(UsageReported(estimated_input_tokens=1, input_tokens=1, turn=9))
        .to_json_line()
    )
    with torn.open("a", encoding="utf-8") as fh:
        fh.write(whole[:40])
    with backend.open() as store:
        second = Projector(store, spool).ingest()
        positions = store.positions(spool)
    assert (second.commits, second.new_events) == (1, FILES // 2)
    for path in spool.iterdir():
        size = path.stat().st_size
        expected = size - 40 if path == torn else size
        assert positions[path.name].byte_offset == expected, path.name

    with torn.open("a", encoding="utf-8") as fh:
        fh.write(whole[40:] + "\n")
    with backend.open() as store:
        third = Projector(store, spool).ingest()
        again = Projector(store, spool).ingest()
    assert (third.new_events, again.new_events, again.commits) == (1, 0, 0)
    assert _counted(backend) == FILES * 5 + FILES // 2 + 1


def test_a_chunk_limit_splits_files_across_commits_and_a_big_file_across_several(
    backend: Backend,
) -> None:
    spool = backend.home / "spool"
    spool.mkdir()
    sizes = [_append(spool, a, EventFactory(f"agent-{a}"), 3) for a in range(FILES)]
    big = _append(spool, FILES, EventFactory("big"), 200)
    sizes.append(big)
    chunk = 4 * max(sizes[:-1])

    with backend.open() as store:
        done = Projector(store, spool, chunk_bytes=chunk).ingest()

    assert done.new_events == FILES * 3 + 200
    assert done.bytes_read == sum(sizes)
    # every commit but the last holds about a chunk: no commit per file, none much over a chunk
    assert math.ceil(sum(sizes) / chunk) <= done.commits < FILES
    assert done.commits >= math.ceil(big / chunk)
    assert _counted(backend) == FILES * 3 + 200
