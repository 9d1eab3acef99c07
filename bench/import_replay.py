"""Import, replay and projection of every transcript in ../shared/data/transcripts.

Three stages, timed separately: ``import_path`` over the whole folder; ``replay_session`` of every
imported session with the offline ``ExtractiveSummarizer`` at a 32k-token window, emitting to one
``SpoolSink`` (one producer process, as ``compactlens replay`` runs); then ``Projector.ingest``
of that spool into a fresh ``EventStore``. Prints the wall time of each stage, messages per
second overall and per stage, and the compactions per tier that landed in the store.

There is no speed target. The run fails (exit 1) when the store does not hold what was emitted:
every spooled event stored, no quarantined line, one ``compactions`` row per
``compaction_recorded`` event, and as many effective compactions per tier as the replays reported.
Run: ``.venv/bin/python bench/import_replay.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from analytics.importers import ImportedSession, import_path
from analytics.replay.driver import ReplayResult, replay_session
from analytics.store import EventStore
from analytics.store.projector import IngestResult, Projector
from compactor import (
    CompactionOffloader,
    CompactionTier,
    ExtractiveSummarizer,
    ProgressiveCompactor,
    SpoolSink,
)
from compactor.events import Event

TRANSCRIPTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "transcripts"
WINDOW = 32_000
TIERS = [CompactionTier.WARN, CompactionTier.SOFT, CompactionTier.FULL, CompactionTier.EMERGENCY]


class CountingSink:
    """Counts events by type on their way to the spool (what the store must end up holding)."""

    def __init__(self, inner: SpoolSink) -> None:
        self.inner = inner
        self.counts: Counter[str] = Counter()

    def emit(self, event: Event) -> None:
        self.counts[event.type] += 1
        self.inner.emit(event)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()


def replay_all(
    sessions: list[ImportedSession], tmp: Path, sink: CountingSink
) -> list[ReplayResult]:
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(), WINDOW, offloader=CompactionOffloader(tmp / "offload", "bench")
    )
    results = [replay_session(s, compactor, event_sink=sink) for s in sessions]
    sink.close()
    return results


def stored_tiers(store: EventStore) -> dict[str, tuple[int, int]]:
    """tier name -> (compactions rows, effective ones)."""
    rows = store.query(
        "SELECT tier_name, count(*) AS n, count(*) FILTER (WHERE effective) AS eff "
        "FROM compactions GROUP BY tier_name"
    ).rows()
    return {str(name): (int(n), int(eff)) for name, n, eff in rows}


def check(
    sink: CountingSink, ingest: IngestResult, stored: dict[str, int], tiers: dict[str, str]
) -> list[str]:
    """What is wrong with the store compared with what was emitted (empty when nothing is)."""
    problems = []
    emitted = sink.counts.total()
    if sink.inner.errors or sink.inner.dropped:
        problems.append(f"spool: {sink.inner.errors} failed flushes, {sink.inner.dropped} dropped")
    if ingest.quarantined:
        problems.append(f"{ingest.quarantined} spool lines quarantined")
    if stored["events"] != emitted:
        problems.append(f"{stored['events']:,} events stored, {emitted:,} emitted")
    if stored["compactions"] != sink.counts["compaction_recorded"]:
        problems.append(
            f"{stored['compactions']:,} compactions rows, "
            f"{sink.counts['compaction_recorded']:,} compaction_recorded events"
        )
    if stored["messages"] != sink.counts["message_appended"]:
        problems.append(
            f"{stored['messages']:,} messages rows, "
            f"{sink.counts['message_appended']:,} message_appended events"
        )
    problems += [f"tier {name}: {why}" for name, why in tiers.items() if why]
    return problems


def main() -> int:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    t0 = time.perf_counter()
    sessions, issues = import_path(TRANSCRIPTS)
    t_import = time.perf_counter() - t0
    n_msgs = sum(len(s.messages) for s in sessions)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        sink = CountingSink(SpoolSink(tmp / "spool"))
        t1 = time.perf_counter()
        results = replay_all(sessions, tmp, sink)
        t_replay = time.perf_counter() - t1
        spool_bytes = sum(p.stat().st_size for p in (tmp / "spool").iterdir())
        with EventStore(tmp / "store" / "compactlens.duckdb") as store:
            t2 = time.perf_counter()
            ingest = Projector(store, tmp / "spool").ingest()
            t_project = time.perf_counter() - t2
            in_store = stored_tiers(store)
            stored = store.counts()
    total = t_import + t_replay + t_project
    turns = sum(r.turns for r in results)
    print(
        f"{len(sessions):,} sessions, {n_msgs:,} messages, {turns:,} turns from {TRANSCRIPTS} "
        f"({len(issues)} import issues)"
    )
    for issue in issues[:5]:
        print(f"  issue: {issue}")
    print(f"\n{'stage':<12}{'seconds':>9}{'messages/s':>12}")
    for name, seconds in (("import", t_import), ("replay", t_replay), ("projection", t_project)):
        print(f"{name:<12}{seconds:>9.2f}{n_msgs / seconds:>12,.0f}")
    print(f"{'overall':<12}{total:>9.2f}{n_msgs / total:>12,.0f}")
    print(
        f"\nspool: {sink.counts.total():,} events, {spool_bytes / 2**20:,.1f} MiB; projected "
        f"{ingest.new_events:,} events ({ingest.quarantined} quarantined)"
    )
    print("  " + ", ".join(f"{t} {n:,}" for t, n in sink.counts.most_common()))

    replayed = Counter(r.tier.label for res in results for r in res.effective)
    print(f"\ncompactions in the store at a {WINDOW:,}-token window")
    print(f"{'tier':<11}{'rows':>7}{'effective':>11}{'replays said':>14}")
    tiers: dict[str, str] = {}
    for tier in TIERS:
        rows, effective = in_store.get(tier.label, (0, 0))
        print(f"{tier.label:<11}{rows:>7,}{effective:>11,}{replayed[tier.label]:>14,}")
        if effective != replayed[tier.label]:
            tiers[tier.label] = f"{effective} effective stored, {replayed[tier.label]} replayed"
    rows_all = sum(n for n, _ in in_store.values())
    print(
        f"{'all':<11}{rows_all:>7,}{sum(e for _, e in in_store.values()):>11,}"
        f"{replayed.total():>14,}"
    )

    problems = check(sink, ingest, stored, tiers)
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print(
        f"\nstore holds exactly what was emitted -> {'yes' if not problems else 'NO'}; "
        f"overall {n_msgs / total:,.0f} messages/s in {total:.1f}s"
    )
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
