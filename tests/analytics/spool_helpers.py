"""Spool builders and table comparisons shared by the store and projector tests.

Realistic spools come from synthetic sessions run through ``CompactionSession`` with the offline
``ExtractiveSummarizer`` and a real ``SpoolSink``; bulk spools are envelopes built directly with
``EventFactory`` (fast enough for 10^5 events). Snapshots are Polars frames of every table in
``analytics.store.TABLES``, minus wall-clock columns, sorted by all columns. Plain functions, no
fixtures, nothing mocked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analytics.replay.synthetic import generate_session
from analytics.store import EventStore, open_store
from analytics.store.projector import Projector
from analytics.store.sql import TABLES
from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    SpoolSink,
)
from compactor.events import Capture, EventFactory, UsageReported

WINDOW = 16_000
"""Small enough that a 60-step synthetic session reaches every tier, Emergency included."""

WALL_CLOCK_COLUMNS = {
    "spool_offsets": ("updated_at",),
    "quarantine": ("quarantined_at",),
}
"""Columns that record when a row was written, not what the spool says."""

WALL_CLOCK_META_KEYS = ("created_at",)


@dataclass
class SessionRun:
    """What the live session returned, to compare with what the store rebuilt."""

    session_id: str
    messages: list[Message]
    views: dict[str, tuple[list[Message], list[Message]]] = field(default_factory=dict)
    """Compaction id -> (the view before, the view ``prepare()`` returned), effective only."""
    tiers: set[CompactionTier] = field(default_factory=set)


def compactor_for(home: Path, *, window: int = WINDOW) -> ProgressiveCompactor:
    return ProgressiveCompactor(
        ExtractiveSummarizer(), window, offloader=CompactionOffloader(home / "offload", "tests")
    )


def run_session(
    home: Path,
    sink: SpoolSink,
    seed: int,
    *,
    capture: Capture = "full",
    messages: Sequence[Message] | None = None,
    between_turns: Callable[[int], None] | None = None,
    delete: bool = False,
) -> SessionRun:
    """Run one synthetic session turn by turn: prepare before each assistant message, report
    usage after it. ``between_turns(turn)`` runs after each turn (e.g. flush and ingest)."""
    msgs = list(messages) if messages is not None else generate_session(seed)
    session = CompactionSession(
        compactor_for(home),
        msgs[0].content,
        session_id=f"{capture}-{seed}",
        event_sink=sink,
        capture=capture,
        model="synthetic-model",
        agent="synthetic",
    )
    run = SessionRun(session.session_id, msgs)
    turn = 0
    for m in msgs[1:]:
        if m.role == "assistant":
            before = session.view()
            view, record = session.prepare()
            if record.tier != CompactionTier.NONE and record.effective:
                run.views[record.id] = (before, view)
                run.tiers.add(record.tier)
            session.observe_usage(
                input_tokens=record.tokens_after + 17, output_tokens=40, model="synthetic-model"
            )
            turn += 1
            if between_turns is not None:
                between_turns(turn)
        session.append(m)
    if delete:
        session.delete()
    session.close()
    return run


def ingest(home: Path) -> None:
    """One ingest of ``home/spool`` into ``home``'s store, opened and closed around it."""
    with open_store(home) as store:
        Projector(store, home / "spool").ingest()


def snapshot(store: EventStore) -> dict[str, pl.DataFrame]:
    """Every table, without wall-clock columns, sorted by all its columns."""
    out: dict[str, pl.DataFrame] = {}
    for name in TABLES:
        frame = store.table(name).drop(WALL_CLOCK_COLUMNS.get(name, ()))
        if name == "meta":
            frame = frame.filter(~pl.col("key").is_in(WALL_CLOCK_META_KEYS))
        out[name] = frame.sort(frame.columns, nulls_last=True)
    return out


def snapshot_home(home: Path) -> dict[str, pl.DataFrame]:
    with open_store(home) as store:
        return snapshot(store)


def assert_same_tables(left: dict[str, pl.DataFrame], right: dict[str, pl.DataFrame]) -> None:
    assert sorted(left) == sorted(right) == sorted(TABLES)
    for name in TABLES:
        assert_same_table(name, left[name], right[name])


def assert_same_table(name: str, left: pl.DataFrame, right: pl.DataFrame) -> None:
    assert left.height == right.height, f"table {name}: {left.height} != {right.height} rows"
    try:
        assert_frame_equal(left, right)
    except AssertionError as exc:
        raise AssertionError(f"table {name}: {exc}") from exc


def usage_lines(session_id: str, n: int, *, start_seq: int = 0) -> list[str]:
    """``n`` small ``usage_reported`` events of one session as spool lines, seq gap-free."""
    factory = EventFactory(session_id, start_seq=start_seq)
    return [
        factory.make(
            UsageReported(estimated_input_tokens=1000 + i, input_tokens=990 + i, turn=i)
        ).to_json_line()
        for i in range(n)
    ]


def write_lines(path: Path, lines: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))


def spool_line_count(home: Path) -> int:
    return sum(
        p.read_bytes().count(b"\n") for p in (home / "spool").iterdir() if p.suffix == ".jsonl"
    )


NOBODY = 65534
"""The uid and gid that own the files a test makes unreadable."""
NO_DAC = ("setpriv", "--inh-caps=-dac_override,-dac_read_search",
          "--bounding-set=-dac_override,-dac_read_search")  # fmt: skip
"""Run a command as root without the capability to read other users' files."""


def skip_unless_unreadable(tmp_path: Path) -> None:
    """Skip unless a file of another user, mode 0600, is really unreadable under ``NO_DAC``."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to make a file this process cannot read")
    probe = tmp_path / "probe"
    probe.write_text("x")
    os.chown(probe, NOBODY, NOBODY)
    probe.chmod(0o600)
    done = subprocess.run([*NO_DAC, "cat", str(probe)], capture_output=True, check=False)
    probe.unlink()
    if done.returncode == 0:
        pytest.skip("dropping the DAC override capability does not deny reads here")
