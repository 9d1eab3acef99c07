"""One turn key: ``usage.turn`` is the ``turns.turn`` its report describes (issue 26 item 1).

Usage events before schema 3 held the history length in ``turn``; projecting them (a store
rebuilt from an old spool) puts that in ``history_messages`` and takes the turn from the
session's last ``view_prepared`` before the report, on both backends.
"""

from __future__ import annotations

import json
from pathlib import Path

from analytics.store.projector import Projector
from compactor.events import EventFactory, UsageReported, ViewPrepared
from tests.analytics.spool_helpers import write_lines
from tests.analytics.store.conftest import Backend

SID = "old-spool"


def _legacy(line: str) -> str:
    """A usage line as a release before schema 3 wrote it: ``turn`` = the history length."""
    raw = json.loads(line)
    payload = raw["payload"]
    payload["turn"] = payload.pop("history_messages")
    return json.dumps({**raw, "schema_version": 2, "payload": payload})


def _spool(tmp_path: Path) -> tuple[Path, list[tuple[int, int]]]:
    """Three turns of a two-messages-per-turn session, a usage report after each (the first
    two as the old release wrote them), and (turn, history length) of each report."""
    factory = EventFactory(SID)
    lines: list[str] = []
    expected: list[tuple[int, int]] = []
    for turn in (1, 2, 3):
        history = 2 * turn - 1
        lines.append(
            factory.make(
                ViewPrepared(turn=turn, tokens=100 * turn, tokens_before=100 * turn, tier=0,
                             messages=history, history_messages=history,
                             history_tokens=100 * turn, context_window=8000)
            ).to_json_line()
        )  # fmt: skip
        usage = UsageReported(
            estimated_input_tokens=100 * turn,
            input_tokens=110 * turn,
            turn=turn,
            history_messages=history,
        )
        line = factory.make(usage).to_json_line()
        lines.append(_legacy(line) if turn < 3 else line)
        expected.append((turn, history))
    spool = tmp_path / "spool"
    write_lines(spool / "agent-1.jsonl", lines)
    return spool, expected


def test_old_usage_events_take_the_turn_of_the_view_they_report_on(
    backend: Backend, tmp_path: Path
) -> None:
    spool, expected = _spool(tmp_path)
    assert (
        json.loads((spool / "agent-1.jsonl").read_text().splitlines()[1])["payload"]["turn"]
        == expected[0][1]
    )  # the old meaning really is in the file
    with backend.open() as store:
        Projector(store, spool).ingest()
        rows = store.query(
            "SELECT turn, history_messages FROM usage WHERE session_id = ? ORDER BY seq", [SID]
        ).iter_rows()
        turns = store.query("SELECT turn FROM turns WHERE session_id = ?", [SID]).iter_rows()
    assert [(int(t), int(h)) for t, h in rows] == expected
    assert {int(t) for (t,) in turns} == {t for t, _h in expected}
