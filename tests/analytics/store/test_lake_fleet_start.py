"""A fleet that starts together on a fresh lake (issue 28, items 3 and 6.6).

Every host's ``compactlens ingest`` opens the same lake, not created yet, at the same instant:
each process imports everything first, then waits for one barrier file, so their first
statements reach PostgreSQL together. DuckLake creates its catalog tables on the first ATTACH,
and two creations at once collide in PostgreSQL's own catalog (``pg_type_typname_nsp_index``);
the store's maintenance at the end of each ingest (``CHECKPOINT``) races the others' commits
("could not serialize access"). All must exit 0, the lake must equal one local ingest of the
same files, and a reader's ``stats`` started at the same instant, and again while they write,
never fails. Real processes, a real PostgreSQL, a real lake; no sleeps decide anything.

CI starts one fleet of ingests and a rebuild on one fresh lake (``STRESS_ROUNDS`` = 1) with
``EVENTS`` = 50 usage events each, and the hosts' bulk files of ``BULK_LINES`` = 800 lines.
``bench/lake_stress.py`` raises ``COMPACTLENS_STRESS_ROUNDS`` (fleets started on fresh lakes one
after another: each is one more chance for the catalog creations to collide) and
``COMPACTLENS_STRESS_SCALE`` (more events per host, so the writes last longer under the reader).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from compactor import SpoolSink
from tests.analytics.spool_helpers import (
    assert_same_tables,
    run_session,
    spool_line_count,
    usage_lines,
    write_lines,
)
from tests.analytics.store.conftest import Backend, lake_backend
from tests.analytics.store.postgres import PostgresServer
from tests.analytics.store.test_lake_writers import (
    STRESS_ROUNDS,
    STRESS_SCALE,
    _without_inodes,
    local_union,
)
from tests.analytics.store.test_store_contract import comparable

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 600
HOSTS = 3
EVENTS = 50 * STRESS_SCALE
BULK_LINES = 800 * STRESS_SCALE
"""Kept at the size it had before CI was cut (not ``test_lake_writers``' 200): each ingest here
commits once, and its length is what the looping ``stats`` reader overlaps."""

AT_THE_BARRIER = """
import os, sys, time
from analytics.cli.main import main  # everything imported before the start
barrier, argv = sys.argv[1], sys.argv[2:]
while not os.path.exists(barrier):
    time.sleep(0.001)
sys.argv = ["compactlens", *argv]
main()
"""
"""A ``compactlens`` command that starts when the barrier file appears."""


@dataclass
class Fleet:
    """Commands of several hosts, started together at a barrier file."""

    lake: Backend
    barrier: Path
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def command(self, home: Path, *args: str) -> list[str]:
        assert self.lake.selection.store and self.lake.selection.lake_data
        store = ["--store", self.lake.selection.store]
        data = ["--lake-data", str(self.lake.selection.lake_data)]
        return [*args, "--home", str(home), *store, *data]

    def start(self, home: Path, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", AT_THE_BARRIER, str(self.barrier), *self.command(home, *args)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.procs.append(proc)
        return proc

    def go(self) -> None:
        self.barrier.write_text("go\n")

    def finish(self) -> list[tuple[int, str]]:
        """Each process's exit code and standard error."""
        out = []
        for proc in self.procs:
            _stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
            out.append((proc.returncode, stderr))
        return out


def build_home(home: Path, n: int) -> None:
    """Two synthetic sessions (one metadata) and a bulk file of usage events: nothing to
    quarantine, so that every ingest exits 0."""
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 100 + n)
    run_session(home, sink, 200 + n, capture="metadata")
    sink.close()
    write_lines(home / "spool" / f"bulk-{n}.jsonl", usage_lines(f"bulk-{n}", BULK_LINES))


class StatsReader:
    """``stats --json`` on the lake again and again from the barrier until the writers are
    done (at least twice): every run must exit 0."""

    def __init__(self, fleet: Fleet, home: Path) -> None:
        self.fleet = fleet
        self.home = home
        self.first = fleet.start(home, "stats", "--json")
        self.failures: list[str] = []
        self.runs = 0
        self.writers_done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="stats-reader")

    def _run(self) -> None:
        self._check(self.first.communicate(timeout=TIMEOUT_S), self.first.returncode)
        while not self.writers_done.is_set() or self.runs < 2:
            done = subprocess.run(
                [sys.executable, "-m", "analytics.cli", *self.fleet.command(self.home, "stats")],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
            )
            self._check((done.stdout, done.stderr), done.returncode)

    def _check(self, out: tuple[str, str], code: int | None) -> None:
        self.runs += 1
        if code != 0:
            self.failures.append(f"exit {code}: {out[1][-2000:]}")


def test_three_hosts_starting_together_on_a_fresh_lake_all_succeed_and_equal_one_local_ingest(
    lake: Backend, tmp_path: Path
) -> None:
    homes = [tmp_path / f"host-{n}" for n in range(HOSTS)]
    for n, home in enumerate(homes):
        build_home(home, n)
    fleet = Fleet(lake, tmp_path / "barrier")
    writers = [fleet.start(home, "ingest") for home in homes]
    reader = StatsReader(fleet, tmp_path / "reader")
    fleet.go()
    reader.thread.start()
    try:
        ended = [w.communicate(timeout=TIMEOUT_S) for w in writers]
    finally:
        reader.writers_done.set()
        reader.thread.join(TIMEOUT_S)
    failed = [
        f"exit {w.returncode}: {err[-2000:]}"
        for w, (_out, err) in zip(writers, ended, strict=True)
        if w.returncode != 0
    ]
    assert failed == []
    assert reader.failures == [], reader.failures
    assert reader.runs >= 2

    expected = local_union(tmp_path, homes)
    with expected.open() as store:
        want = _without_inodes(comparable(store))
    with lake.open() as store:
        got = _without_inodes(comparable(store))
    assert got["events"].height == sum(spool_line_count(h) for h in homes)
    assert_same_tables(got, want)


def test_ingests_and_a_rebuild_opening_fresh_lakes_at_once_all_exit_0(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    """Three ingests and a rebuild (which ingests its own spool, then recomputes every
    projection) start together on a fresh lake, ``STRESS_ROUNDS`` times (once in CI): four
    processes a round, none fails."""
    rounds, commands = STRESS_ROUNDS, ("ingest", "ingest", "ingest", "rebuild")
    failed = []
    for r in range(rounds):
        lake = lake_backend(postgres, tmp_path / f"round-{r}")
        lake.home.mkdir()
        fleet = Fleet(lake, tmp_path / f"barrier-{r}")
        for n, command in enumerate(commands):
            home = tmp_path / f"round-{r}-host-{n}"
            write_lines(home / "spool" / "agent.jsonl", usage_lines(f"r{r}-h{n}", EVENTS))
            fleet.start(home, command)
        fleet.go()
        failed += [stderr[-2000:] for code, stderr in fleet.finish() if code != 0]
        with lake.open() as store:
            assert store.counts()["events"] == EVENTS * len(commands), failed
            assert store.counts()["usage"] == EVENTS * len(commands), failed
    assert failed == []
