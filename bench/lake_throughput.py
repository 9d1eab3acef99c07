"""Lake throughput: N simulated agents x events/s into one DuckLake through M projectors.

Each of M homes (one per simulated host) gets the spool files of N/M agents; a writer process
per home appends every agent's ``usage_reported`` events at the given rate (in 100 ms steps, as
a live agent's ``SpoolSink`` would), and a projector process per home runs
``Projector.watch`` on the lake, timing each commit. After ``--seconds`` the writers stop, the
projectors drain what is left and stop. Printed: events offered and stored per second (stored
over the run including the drain), the lag at the end, commit latency p50/p99 over all
projectors, and the catalog's growth (PostgreSQL database size, snapshots, data files) with and
after DuckLake's maintenance (``CHECKPOINT``). PostgreSQL is started in a temporary folder
(``tests.analytics.store.postgres``) unless ``--store`` names a lake.

Run: ``.venv/bin/python bench/lake_throughput.py --agents 100 --rate 10 --projectors 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from analytics.store import (
    Lake,
    LakeStore,
    Selection,
    open_store,
    select,
    store_location,
)
from analytics.store.projector import Projector
from compactor.events import EventFactory, UsageReported

ROOT = Path(__file__).resolve().parents[1]
STEP_S = 0.1


def write_agents(home: Path, agents: list[int], rate: float, seconds: float) -> None:
    """Append each agent's events at ``rate`` per second for ``seconds`` (one file each)."""
    spool = home / "spool"
    spool.mkdir(parents=True, exist_ok=True)
    factories = {a: EventFactory(f"agent-{a}") for a in agents}
    files = {a: (spool / f"agent-{a}.jsonl").open("a", encoding="utf-8") for a in agents}
    owed = dict.fromkeys(agents, 0.0)
    started = time.monotonic()
    turn = 0
    while (now := time.monotonic()) - started < seconds:
        for agent in agents:
            owed[agent] += rate * STEP_S
            lines = []
            while owed[agent] >= 1:
                owed[agent] -= 1
                turn += 1
                event = UsageReported(estimated_input_tokens=1000, input_tokens=990, turn=turn)
                lines.append(factories[agent].make(event).to_json_line() + "\n")
            files[agent].write("".join(lines))
            files[agent].flush()
        time.sleep(max(0.0, STEP_S - (time.monotonic() - now)))
    for fh in files.values():
        fh.close()


def run_projector(
    home: Path, url: str, data: Path, stop_file: Path, interval_s: float = 0.5
) -> None:
    """Project ``home``'s spool into the lake every ``interval_s`` until ``stop_file`` exists;
    print commit times."""
    select(Selection(url, data))
    latencies: list[float] = []
    with open_store(home) as store:
        assert isinstance(store, LakeStore)
        commit = store.commit_batch

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return commit(*args, **kwargs)
            finally:
                latencies.append(time.perf_counter() - started)

        store.commit_batch = timed  # type: ignore[method-assign]
        projector = Projector(store, home / "spool")
        stored = 0
        while not stop_file.exists():
            stored += projector.ingest(checkpoint=False).new_events
            time.sleep(interval_s)
        stored += projector.ingest(checkpoint=False).new_events
    print(json.dumps({"stored": stored, "latencies": latencies}))


def catalog_figures(url: str, data: Path) -> dict[str, int]:
    """PostgreSQL database size, DuckLake snapshots and data files of the lake."""
    with LakeStore(store_lake(url, data)) as store:
        con = store.con
        snapshots = con.execute("SELECT count(*) FROM ducklake_snapshots('lake')").fetchone()
        conninfo = url.split("ducklake:postgres:", 1)[1]
        con.execute(f"ATTACH '{conninfo}' AS pg (TYPE postgres, READ_ONLY)")
        size = con.execute(
            "SELECT * FROM postgres_query('pg', 'SELECT pg_database_size(current_database())')"
        ).fetchone()
    files = sum(1 for p in data.rglob("*.parquet"))
    return {
        "catalog_bytes": int(size[0]) if size else 0,
        "snapshots": int(snapshots[0]) if snapshots else 0,
        "files": files,
    }


def store_lake(url: str, data: Path) -> Lake:
    where = store_location(data.parent, Selection(url, data))
    assert isinstance(where, Lake)
    return where


def maintain(url: str, data: Path) -> float:
    started = time.perf_counter()
    with LakeStore(store_lake(url, data)) as store:
        store.checkpoint()
    return time.perf_counter() - started


def bench(args: argparse.Namespace, url: str, tmp: Path) -> dict[str, Any]:
    data = tmp / "lake"
    with LakeStore(store_lake(url, data)):
        pass  # the tables exist before the projectors start
    before = catalog_figures(url, data)
    homes = [tmp / f"host-{m}" for m in range(args.projectors)]
    stop = tmp / "stop"
    me = [sys.executable, str(Path(__file__).resolve())]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers, projectors = [], []
    for m, home in enumerate(homes):
        agents = list(range(m, args.agents, args.projectors))
        (home / "spool").mkdir(parents=True)
        writers.append(
            subprocess.Popen(
                [*me, "--write", str(home), json.dumps(agents), str(args.rate), str(args.seconds)],
                env=env,
            )
        )
        projectors.append(
            subprocess.Popen(
                [*me, "--project", str(home), url, str(data), str(stop), str(args.interval)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    started = time.perf_counter()
    for proc in writers:
        proc.wait()
    offered_s = time.perf_counter() - started
    stop.touch()
    results = [json.loads(p.communicate()[0].splitlines()[-1]) for p in projectors]
    total_s = time.perf_counter() - started
    grown = catalog_figures(url, data)
    maintenance_s = maintain(url, data)
    after = catalog_figures(url, data)
    offered = sum(
        p.read_bytes().count(b"\n") for home in homes for p in (home / "spool").glob("*.jsonl")
    )
    latencies = np.array([x for r in results for x in r["latencies"]] or [0.0])
    return {
        "offered": offered,
        "offered_s": offered_s,
        "stored": sum(r["stored"] for r in results),
        "total_s": total_s,
        "commits": int(latencies.size),
        "p50_ms": float(np.percentile(latencies, 50) * 1000),
        "p99_ms": float(np.percentile(latencies, 99) * 1000),
        "before": before,
        "grown": grown,
        "after": after,
        "maintenance_s": maintenance_s,
    }


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    minutes = r["offered_s"] / 60
    print(
        f"{args.agents} agents x {args.rate:g} events/s through {args.projectors} projectors "
        f"(an ingest every {args.interval:g}s) "
        f"for {r['offered_s']:.0f}s: offered {r['offered'] / r['offered_s']:,.0f} events/s, "
        f"stored {r['stored']:,} of {r['offered']:,} "
        f"({r['stored'] / r['total_s']:,.0f} events/s sustained incl. the drain, "
        f"drained {r['total_s'] - r['offered_s']:.1f}s after the writers stopped)"
    )
    print(f"commits: {r['commits']:,}, latency p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms")
    b, g, a = r["before"], r["grown"], r["after"]
    print(
        f"catalog: {b['catalog_bytes'] / 2**20:.1f} -> {g['catalog_bytes'] / 2**20:.1f} MiB "
        f"({(g['catalog_bytes'] - b['catalog_bytes']) / 2**20 / minutes:.2f} MiB/min), "
        f"snapshots {b['snapshots']} -> {g['snapshots']}, data files {b['files']} -> {g['files']}"
    )
    print(
        f"after maintenance (CHECKPOINT, {r['maintenance_s']:.1f}s): catalog "
        f"{a['catalog_bytes'] / 2**20:.1f} MiB, snapshots {a['snapshots']}, files {a['files']}"
    )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--write":
        write_agents(Path(sys.argv[2]), json.loads(sys.argv[3]), *map(float, sys.argv[4:6]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--project":
        run_projector(
            Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]), float(sys.argv[6])
        )
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--rate", type=float, default=10.0, help="events/s per agent")
    parser.add_argument("--projectors", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--interval", type=float, default=0.5, help="seconds between a projector's ingests"
    )
    parser.add_argument("--store", help="ducklake:postgres:<conninfo> (default: a server of ours)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"duckdb {duckdb.__version__}; load average {load:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="compactlens-lake-bench-") as tmp_dir:
        if args.store:
            report(args, bench(args, args.store, Path(tmp_dir)))
            return 0
        sys.path.insert(0, str(ROOT))
        from tests.analytics.store.postgres import PostgresServer

        server = PostgresServer.start()
        try:
            url = "ducklake:postgres:" + server.database("bench")
            report(args, bench(args, url, Path(tmp_dir)))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
