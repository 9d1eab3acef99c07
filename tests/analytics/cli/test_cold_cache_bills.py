"""Replays and the tuning lab bill a turn whose cache had expired as cold (issue 31 item 6, the
measuring half).

A replay used to date its events with the time it ran, so every turn came milliseconds after
the one before and its cached prefix was always read: a Claude Code session with human pauses
(five minutes and more between two calls: the Anthropic cache's TTL) was billed as if its cache
never expired. Now a replay's events carry the transcript's times (``ImportedSession.call_times``),
the costs job sees the real gaps, and the tuning lab's cache costs take the same gaps, so that
``tune`` and ``replay`` still bill alike. Every expected gap is read here from the raw JSONL
(the first line of each distinct assistant message), never from the importer.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from analytics.cli.commands import run_replay
from analytics.jobs.prices import profile_for_model
from analytics.queries.app import turn_cost_rows
from analytics.queries.materialize import refresh
from analytics.store import open_store
from compactor import ExtractiveSummarizer, ProgressiveCompactor
from tests.cli import invoke_ok
from tests.transcripts import NATIVE, TRANSCRIPTS

PAUSED = NATIVE / "claude-code" / "a6" / "e4c2a0fbd1" / "0" / "full.jsonl"
"""A real Claude Code session (13 calls) with pauses of more than five minutes between calls."""
STEADY = TRANSCRIPTS / "claude-reliability" / "snapshot-tests" / "tests" / "python-to-rust-port"
WINDOW = 32_000
WIDE = 250_000
TOLERANCE = 0.01

pytestmark = pytest.mark.skipif(not PAUSED.is_file(), reason=f"no transcript at {PAUSED}")


def _raw_calls(path: Path) -> tuple[str, list[datetime]]:
    """The model, and the time of each call: the first line of each assistant message id."""
    seen: set[str] = set()
    times, model = [], ""
    for line in path.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line) if line.strip() else {}
        message = obj.get("message") or {}
        if obj.get("type") != "assistant" or message.get("id") in seen:
            continue
        seen.add(message["id"])
        if str(message.get("model", "")).startswith("claude"):  # not "<synthetic>" lines
            model = model or str(message["model"])
        times.append(datetime.fromisoformat(obj["timestamp"].replace("Z", "+00:00")))
    return model, times


def test_a_replayed_turn_after_the_cache_ttl_reads_nothing_from_the_cache(tmp_path: Path) -> None:
    model, times = _raw_calls(PAUSED)
    ttl = profile_for_model(model).ttl_seconds
    assert ttl is not None
    gaps = [None] + [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    cold = [k for k, gap in enumerate(gaps) if gap is not None and gap > ttl]
    assert len(cold) >= 2, "the session pauses longer than the cache keeps a prefix"

    home = tmp_path / "home"
    report = run_replay([PAUSED], home, ProgressiveCompactor(ExtractiveSummarizer(), WINDOW))
    assert not report.issues
    with open_store(home) as store:
        refresh(store)
        sid = store.query("SELECT session_id FROM sessions").item()
        rows = turn_cost_rows(store, str(sid)).sort("turn").to_dicts()
        stored_gaps = (
            store.query(
                "SELECT epoch(occurred_at) FROM events WHERE type = 'view_prepared' ORDER BY seq"
            )
            .to_series()
            .to_list()
        )

    assert len(rows) == len(times) == len(stored_gaps)
    assert [round(b - a, 3) for a, b in itertools.pairwise(stored_gaps)] == [
        round(g, 3) for g in gaps[1:] if g is not None
    ]
    for k, row in enumerate(rows):
        if k in cold:
            assert row["cache_read_tokens"] == 0, (k, gaps[k], row)
    warm = [rows[k]["cache_read_tokens"] for k in range(1, len(rows)) if k not in cold]
    assert warm and all(read > 0 for read in warm)
    reported = [rows[k]["reported_cache_read_tokens"] for k in cold]
    assert all(
        r is not None and r < 0.5 * rows[k]["cache_write_tokens"]
        for k, r in zip(cold, reported, strict=True)
    ), reported


@pytest.mark.skipif(not STEADY.is_dir(), reason=f"no transcripts at {STEADY}")
@pytest.mark.parametrize(
    ("window", "grid"),
    [
        (WINDOW, {"warn": 0.6, "full": 0.85}),
        # wide enough that the session stays below Soft: only the knob compacts, at its pauses
        (WIDE, {"warn": 0.6, "soft": 0.8, "full": 0.9, "cold_cache_compact": 0.5}),
    ],
    ids=["cold turns billed", "cold_cache_compact"],
)
def test_tune_and_replay_bill_the_paused_session_alike(
    tmp_path: Path, window: int, grid: dict[str, float]
) -> None:
    grid_file = tmp_path / "grid.toml"
    grid_file.write_text(tomli_w.dumps({k: [v] for k, v in grid.items()}), encoding="utf-8")
    files = [str(PAUSED), str(STEADY / "transcript.jsonl")]
    out = invoke_ok(
        *("tune", *files, "--window", str(window), "--workers", "0", "--json"),
        *("--strategies", "progressive", "--grid", str(grid_file)),
        *("--home", str(tmp_path / "tune"), "--hold-back", str(PAUSED)),
    )
    tuned: dict[str, Any] = json.loads(out)
    assert tuned["recommended"]["held_back_sessions"] == [str(PAUSED)]
    (row,) = [
        r for r in tuned["strategies"] if all(r["config"].get(k) == v for k, v in grid.items())
    ]
    config = tmp_path / "row.toml"
    config.write_text(
        tomli_w.dumps({k: v for k, v in row["config"].items() if v is not None}), encoding="utf-8"
    )

    home = tmp_path / "replay"
    invoke_ok(
        *("replay", str(PAUSED), "--window", str(window), "--config", str(config)),
        *("--home", str(home)),
    )
    stats = json.loads(invoke_ok("stats", "--json", "--home", str(home)))

    assert stats["cost"]["total"] == pytest.approx(row["cost"], rel=TOLERANCE)
    if "cold_cache_compact" in grid:  # below Soft's 80% all along: only the knob compacts
        assert stats["compactions"]["by_tier"]["SOFT"] >= 1, stats["compactions"]
