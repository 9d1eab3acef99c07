"""Each compaction's ledger (issue 31): did it pay for itself, did it grow the context.

Checked against what the test computes itself: the effective compactions counted from the spool's
raw lines, the break-even turn recomputed from the stored turn costs with a loop of its own, and
a native compaction's growth from the Claude Code file's own ``preTokens`` and the provider's
next usage line. A crafted copy of a real transcript, whose boundary claims fewer tokens than the
next prompt holds, must be flagged; none of the real ones that shrank may be.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from analytics.jobs.ledger import compaction_ledger
from tests.cli import invoke_ok
from tests.transcripts import CTF, NATIVE

CLAUDE = NATIVE / "claude-code"


def _ledger(home: Path, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(invoke_ok("ledger", "--json", "--home", str(home), *args))
    return found


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CTF.is_dir():
        pytest.skip(f"no transcripts at {CTF}")
    home = tmp_path_factory.mktemp("ledger")
    invoke_ok("replay", str(CTF), "--window", "4000", "--home", str(home))
    return home


TIER_NAMES = {1: "WARN", 2: "SOFT", 3: "FULL", 4: "EMERGENCY"}


def _spooled_records(home: Path) -> list[dict[str, Any]]:
    """The effective, non-none compaction records of the spool's raw lines."""
    records = []
    for path in (home / "spool").rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event.get("type") != "compaction_recorded":
                continue
            record = event["payload"]["record"]
            if record.get("effective", True) and record["tier"] > 0:
                records.append(record)
    return records


@pytest.mark.integration
def test_every_effective_compaction_of_a_replay_has_a_ledger(replayed: Path) -> None:
    found = _ledger(replayed)
    records = _spooled_records(replayed)
    spooled = {record["id"] for record in records}
    assert spooled, "the replay compacted nothing: the window is too large for the test"
    assert {row["compaction_id"] for row in found["compactions"]} == spooled
    assert found["priced"] == len(spooled)  # every one of them has a turn after it, priced
    paid = sum(1 for row in found["compactions"] if row["paid"])
    assert found["paid_share"] == pytest.approx(paid / len(spooled))
    stats = json.loads(invoke_ok("stats", "--json", "--home", str(replayed)))
    assert stats["ledger"]["paid_share"] == pytest.approx(found["paid_share"])
    assert stats["ledger"]["compactions"] == len(spooled)
    # by tier and trigger: the groups and their sizes are the raw lines'; each group's share
    # is that of its rows that paid (their break-even turns are checked below)
    kinds = Counter((TIER_NAMES[r["tier"]], r.get("trigger", "auto")) for r in records)
    by_kind = {(k["tier"], k["trigger"]): k for k in stats["ledger"]["by_kind"]}
    assert {key: k["compactions"] for key, k in by_kind.items()} == kinds
    for (tier, trigger), kind in by_kind.items():
        rows = [
            r
            for r in found["compactions"]
            if (TIER_NAMES[r["tier"]], r["trigger"]) == (tier, trigger)
        ]
        assert kind["paid_share"] == pytest.approx(sum(bool(r["paid"]) for r in rows) / len(rows))
    assert found["by_kind"] == stats["ledger"]["by_kind"]


def _reigns(home: Path) -> dict[str, list[tuple[int, float]]]:
    """Per compaction id: (turn, net saving) of each turn of its reign, from the stored turn
    costs and compactions, read with SQL here and walked with the test's own loop."""
    with duckdb.connect(str(home / "compactlens.duckdb"), read_only=True) as con:
        costs = con.sql(
            "SELECT session_id, seq, turn, coalesce(uncompacted_cost, 0) - coalesce(cost, 0) "
            "- coalesce(summarizer_cost, 0) FROM job_turn_costs ORDER BY session_id, seq"
        ).fetchall()
        marks = con.sql(
            "SELECT session_id, seq, id FROM compactions WHERE coalesce(effective, true) "
            "AND tier > 0 ORDER BY session_id, seq"
        ).fetchall()
    out: dict[str, list[tuple[int, float]]] = {}
    for sid, seq, cid in marks:
        nxt = [s for (x, s, _c) in marks if x == sid and s > seq]
        stop = nxt[0] if nxt else float("inf")
        out[cid] = [(t, net) for (x, s, t, net) in costs if x == sid and seq < s and s < stop]
    return out


@pytest.mark.integration
def test_break_even_turns_agree_with_the_turn_costs(replayed: Path) -> None:
    found = {row["compaction_id"]: row for row in _ledger(replayed)["compactions"]}
    reigns = _reigns(replayed)
    assert set(reigns) == set(found)
    for cid, reign in reigns.items():
        running, expected = 0.0, None
        for turn, net in reign:
            running += net
            if running >= 0:
                expected = turn
                break
        row = found[cid]
        assert row["break_even_turn"] == expected, (cid, reign)
        assert row["rewrite_cost"] == pytest.approx(-reign[0][1])
        assert row["saved_after"] == pytest.approx(sum(net for _t, net in reign[1:]))
        assert row["reign_turns"] == len(reign)


def _boundaries(path: Path) -> list[tuple[int, int | None]]:
    """(preTokens, the provider's next prompt) of each compact boundary in a Claude Code file."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    out: list[tuple[int, int | None]] = []
    for i, line in enumerate(lines):
        if line.get("subtype") != "compact_boundary":
            continue
        nxt = None
        for later in lines[i + 1 :]:
            message = later.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            if usage and usage.get("input_tokens") is not None:
                nxt = sum(
                    int(usage.get(k) or 0)
                    for k in (
                        "input_tokens",
                        "cache_read_input_tokens",
                        "cache_creation_input_tokens",
                    )
                )
                break
        out.append((int(line["compactMetadata"]["preTokens"]), nxt))
    return out


def _claude_files() -> list[Path]:
    return sorted(p for p in CLAUDE.rglob("*.jsonl") if _boundaries(p)) if CLAUDE.is_dir() else []


@pytest.mark.integration
@pytest.mark.parametrize("path", _claude_files(), ids=lambda p: str(p.relative_to(CLAUDE)))
def test_native_growth_is_the_files_next_prompt_against_pre_tokens(
    path: Path, tmp_path: Path
) -> None:
    raw = _boundaries(path)
    invoke_ok("import", str(path), "--home", str(tmp_path))
    native = [r for r in _ledger(tmp_path)["compactions"] if r["origin"] == "native"]
    assert sorted(r["tokens_before"] for r in native) == sorted(pre for pre, _n in raw)
    grew = sorted((pre, nxt - pre) for pre, nxt in raw if nxt is not None and nxt > pre)
    assert sorted((r["tokens_before"], r["growth_tokens"]) for r in native if r["grew"]) == grew


@pytest.mark.integration
def test_a_boundary_that_claims_less_than_the_next_prompt_is_flagged(tmp_path: Path) -> None:
    files = _claude_files()
    if not files:
        pytest.skip(f"no Claude Code compactions under {CLAUDE}")
    path = files[0]
    pre, nxt = _boundaries(path)[0]
    assert nxt is not None and nxt < pre  # the real one shrank...
    crafted = tmp_path / "crafted.jsonl"
    small = nxt // 2  # ...this copy says the context was half the next prompt before it
    with crafted.open("w", encoding="utf-8") as out:
        done = False
        for line in path.read_text(encoding="utf-8").splitlines():
            event = json.loads(line) if line else None
            if event and event.get("subtype") == "compact_boundary" and not done:
                event["compactMetadata"]["preTokens"] = small
                line, done = json.dumps(event), True
            out.write(line + "\n")
    home = tmp_path / "home"
    invoke_ok("import", str(crafted), "--home", str(home))
    flagged = [r for r in _ledger(home)["compactions"] if r["grew"]]
    assert [(r["tokens_before"], r["growth_tokens"]) for r in flagged] == [(small, nxt - small)]
    assert "next prompt" in flagged[0]["growth_reason"]


def test_a_summary_longer_than_what_it_replaced_grew_and_a_rebound_is_counted() -> None:
    compactions = pl.DataFrame(
        {
            "id": ["a", "b", "c"],
            "session_id": ["s"] * 3,
            "seq": [10, 20, 60],
            "tier": [2, 2, 3],
            "trigger": ["auto"] * 3,
            "origin": [None] * 3,
            "effective": [True] * 3,
            "tokens_before": [7_000, 7_100, 8_000],
            "tokens_after": [7_400, 3_000, 2_000],
        }
    )
    turns = pl.DataFrame(
        {
            "session_id": ["s"] * 8,
            "seq": [5, 11, 15, 21, 30, 40, 61, 70],
            "turn": [1, 2, 3, 4, 5, 6, 7, 8],
        }
    )
    ledger = compaction_ledger(compactions, pl.DataFrame(), turns, pl.DataFrame())
    rows = {r["compaction_id"]: r for r in ledger.to_dicts()}
    assert rows["a"]["grew"] and rows["a"]["growth_tokens"] == 400
    assert not rows["b"]["grew"] and rows["b"]["growth_tokens"] == 0
    assert rows["a"]["rebound_turns"] == 2  # b (same tier) came back 2 turns after a's turn
    assert rows["b"]["rebound_turns"] == 3  # c (a higher tier) came 3 turns after b's turn
    assert rows["c"]["rebound_turns"] is None  # nothing after c
    assert rows["a"]["reign_turns"] == 2 and rows["c"]["reign_turns"] == 2
