"""``compactlens timeline --json`` (the decisions not taken) against the raw spool: the demo's
``view_prepared`` events are read here, and every turn that changed nothing while a tier was
due or within the margin below Warn must be listed, and no other."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from compactor import CompactorConfig, SpoolSink
from tests.analytics.cli_helpers import run
from tests.compactor.cached_sessions import Clock, cached_session, first_warn_turn, grow

DEFAULTS = CompactorConfig()


def _expected(home: Path, margin: float) -> set[tuple[str, int]]:
    found = set()
    for path in (home / "spool").glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event["type"] != "view_prepared":
                continue
            p = event["payload"]
            if p["tokens"] < p["tokens_before"]:
                continue  # it compacted
            ratio = (p["tokens_before"] + p["reserve_tokens"]) / p["context_window"]
            thresholds = [DEFAULTS.warn, DEFAULTS.soft, DEFAULTS.full, DEFAULTS.emergency]
            above = [t for t in thresholds if ratio < t]
            if p["tier"] > 0 or (above and min(above) - ratio <= margin):
                found.add((event["session_id"], p["turn"]))
    return found


def test_timeline_lists_exactly_the_quiet_turns_of_the_raw_spool(tmp_path: Path) -> None:
    assert run("demo", "--no-serve", "--sessions", "2", "--home", tmp_path).exit_code == 0
    done = run("timeline", "--json", "--home", tmp_path)
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    listed = {(t["session_id"], t["turn"]) for t in found["turns"]}
    assert listed, "the demo comes near Warn: the test would prove nothing"
    assert listed == _expected(tmp_path, found["margin"])
    assert sum(found["by_reason"].values()) == len(listed)
    for turn in found["turns"]:
        assert (turn["tier"] > 0) == (turn["reason"] != "below_threshold"), turn
        assert turn["ratio"] is None or f"{turn['ratio']:.1%}"[:-3] in turn["words"], turn


def test_timeline_of_an_unknown_session_names_it(tmp_path: Path) -> None:
    run("demo", "--no-serve", "--sessions", "1", "--home", tmp_path)
    done = run("timeline", "no-such-session", "--home", tmp_path)
    assert done.exit_code != 0
    assert "no-such-session" in done.output


def test_timeline_says_which_warn_offloads_the_cache_held_and_why(tmp_path: Path) -> None:
    """A session with ``cache_priced_offload`` that holds its Warn offload until Soft: each
    held turn (a Warn ``view_prepared`` of the raw spool that changed nothing) is listed as
    ``offload_held``, with the bill in its words."""
    clock, sink = Clock(), SpoolSink(tmp_path / "spool")
    session = cached_session(tmp_path / "work", True, clock, sink, results=1, lines=58)
    first_warn_turn(session, clock, 900)
    while not session.records:
        grow(session, 900)
        clock.now += timedelta(seconds=10)
        session.prepare()
    session.close()
    sink.close()
    warn_quiet = set()
    for path in (tmp_path / "spool").glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            p = event["payload"]
            if (
                event["type"] == "view_prepared"
                and p["tier"] == 1
                and p["tokens"] >= p["tokens_before"]
            ):
                warn_quiet.add(p["turn"])
    assert len(warn_quiet) == session.offloads_held >= 2

    assert run("ingest", "--home", tmp_path).exit_code == 0
    done = run("timeline", "--json", "--home", tmp_path)
    assert done.exit_code == 0, done.output
    found = json.loads(done.stdout)
    held = [t for t in found["turns"] if t["reason"] == "offload_held"]
    assert {t["turn"] for t in held} == warn_quiet
    assert found["by_reason"]["offload_held"] == len(warn_quiet)
    assert all("turns until Soft" in t["words"] for t in held)
