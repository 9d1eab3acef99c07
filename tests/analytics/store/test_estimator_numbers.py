"""A compaction's estimator as numbers (issue 29): the record carries the slope and overhead it
counted with, the store keeps them as columns, and records written before they did have theirs
read back from the estimator's name once, as they are projected.

A real session runs with a calibrating estimator fed by usage reports; what the store holds is
checked against the raw events' records, read as JSON in the test. Then the same spool, its
records stripped of the numbers and renamed as older versions named them, is projected into a
fresh store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.replay.counterfactual import FixedEstimator
from analytics.replay.synthetic import generate_session
from analytics.store import open_store
from compactor import (
    CompactionOffloader,
    CompactionSession,
    ExtractiveSummarizer,
    OverheadCalibratedEstimator,
    ProgressiveCompactor,
    SpoolSink,
)
from tests.analytics.spool_helpers import ingest

WINDOW = 8_000
LEGACY = {  # a name older records carry -> (slope, overhead) it stands for; tokens of 4,000 bytes
    "bytes/4": (1.0, 0.0, 1_000),
    "bytes/4*calibrated(1.500)": (1.5, 0.0, 1_500),
    "bytes/4*0.900+15000": (0.9, 15_000.0, 15_900),
    "an estimator of the caller's own": (None, None, 1_000),
}


def _run(home: Path) -> None:
    """A synthetic session whose provider reports a hidden prompt of 900 tokens and 10% more
    than bytes / 4, so that the estimator's fit moves off (1, 0)."""
    messages = generate_session(7)
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(),
        WINDOW,
        estimator=OverheadCalibratedEstimator(),
        offloader=CompactionOffloader(home / "offload", "numbers"),
    )
    sink = SpoolSink(home / "spool")
    session = CompactionSession(
        compactor, messages[0].content, session_id="numbers", event_sink=sink
    )
    for m in messages[1:]:
        if m.role == "assistant":
            view, _record = session.prepare()
            raw = sum(len(x.content.encode()) for x in view) // 4
            session.observe_usage(input_tokens=int(raw * 1.1) + 900, output_tokens=40)
        session.append(m)
    session.close()
    sink.close()


def _spooled_records(home: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)["payload"]["record"]
        for path in sorted((home / "spool").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if json.loads(line)["type"] == "compaction_recorded"
    ]


def test_the_store_holds_each_record_s_slope_and_overhead(tmp_path: Path) -> None:
    _run(tmp_path)
    ingest(tmp_path)
    records = _spooled_records(tmp_path)

    with open_store(tmp_path, read_only=True) as store:
        rows = store.query(
            "SELECT id, estimator, estimator_slope, estimator_overhead FROM compactions"
        ).rows()
    assert len(rows) == len(records) > 0
    raw = {str(r["id"]): r for r in records}
    moved = 0
    for cid, name, slope, overhead in rows:
        record = raw[cid]
        assert (slope, overhead) == (record["estimator_slope"], record["estimator_overhead"])
        assert name == f"bytes/4*{slope:.3f}+{overhead:.0f}"  # the name rounds them
        moved += (slope, overhead) != (1.0, 0.0)
    assert moved  # the fit moved: the numbers are the estimator's, not a default


def test_older_records_get_the_numbers_their_estimator_name_stands_for(tmp_path: Path) -> None:
    _run(tmp_path / "new")
    legacy = tmp_path / "old"
    (legacy / "spool").mkdir(parents=True)
    names = list(LEGACY)
    for path in sorted((tmp_path / "new" / "spool").glob("*.jsonl")):
        lines = []
        for k, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            event = json.loads(line)
            if event["type"] == "compaction_recorded":
                record = event["payload"]["record"]
                del record["estimator_slope"], record["estimator_overhead"]
                record["estimator"] = names[k % len(names)]
            lines.append(json.dumps(event))
        (legacy / "spool" / path.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    ingest(legacy)

    with open_store(legacy, read_only=True) as store:
        rows = store.query(
            "SELECT estimator, estimator_slope, estimator_overhead FROM compactions"
        ).rows()
    assert {name for name, _s, _o in rows} == set(LEGACY)  # every form is among them
    for name, slope, overhead in rows:
        want_slope, want_overhead, tokens = LEGACY[name]
        assert (slope, overhead) == (want_slope, want_overhead), name
        assert FixedEstimator.of_record(slope, overhead, name).tokens_for_bytes(4_000) == tokens


@pytest.mark.parametrize(("name", "expected"), [(n, v[2]) for n, v in LEGACY.items()])
def test_a_frozen_estimate_counts_as_its_record_s_numbers(name: str, expected: int) -> None:
    slope, overhead, _tokens = LEGACY[name]
    assert FixedEstimator.of_record(slope, overhead, name).tokens_for_bytes(4_000) == expected
