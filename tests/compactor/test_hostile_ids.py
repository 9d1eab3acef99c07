"""Ids and names a model made up are recorded, never raised on: a lone surrogate (what
``json.loads`` gives for ``"\\udcff"``) in a tool call's id or name."""

from __future__ import annotations

import json
import re
from pathlib import Path

from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    JsonlRecordStore,
    Message,
    ProgressiveCompactor,
    SpoolSink,
    ToolCall,
    validate_history,
)
from compactor.events import message_appended, parse_event, sha256_of
from tests.compactor.builders import ScriptedSummarizer

LONE = json.loads('"\\udcff"')


def _exchange(i: int) -> list[Message]:
    call = ToolCall(id=f"call{LONE}{i}", name=f"bash{LONE}", arguments=f'{{"n": "{LONE}"}}')
    return [
        Message(role="assistant", content=f"step {i}", tool_calls=[call]),
        Message(
            role="tool",
            tool_call_id=call.id,
            name=call.name,
            content="\n".join(f"line {n} {LONE}" for n in range(400)),
        ),
    ]


def test_a_session_whose_tool_ids_and_names_hold_lone_surrogates_records_every_turn(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    compactor = ProgressiveCompactor(
        ScriptedSummarizer(),
        6_000,
        offloader=CompactionOffloader(tmp_path / "work", "s"),
        record_store=JsonlRecordStore(tmp_path / "records"),
    )
    session = CompactionSession(compactor, "sys", session_id="s", event_sink=SpoolSink(spool))
    session.append(Message(role="user", content="the task"))
    tiers = []
    for i in range(25):
        for msg in _exchange(i):
            session.append(msg)
        view, record = session.prepare()
        tiers.append(record.tier)
        assert validate_history(view) == []
    session.close()
    assert session.sink_errors == 0
    assert compactor.record_store_errors == 0
    assert sum(t != CompactionTier.NONE for t in tiers) >= 5, "the session compacted often"

    lines = [line for p in spool.glob("*.jsonl") for line in p.read_bytes().splitlines()]
    events = [parse_event(line) for line in lines]
    kinds = {e.type for e in events}
    assert {"message_appended", "compaction_recorded", "view_prepared"} <= kinds
    appended = [e for e in events if e.type == "message_appended"]
    assert len(appended) == 1 + 25 * 2
    assert appended[1].payload.tool_call_ids == ["call\ufffd0"]  # type: ignore[union-attr]
    assert appended[1].payload.tool_names == ["bash\ufffd"]  # type: ignore[union-attr]

    names = [p.name for p in (tmp_path / "work").rglob("*") if p.is_file()]
    offloaded = [n for n in names if n.endswith(".txt")]
    assert offloaded, "large results were offloaded"
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", n) for n in names), names


def test_hashes_and_payloads_of_a_message_with_lone_surrogates_are_built_without_raising() -> None:
    msg = _exchange(0)[0]
    payload = message_appended(0, msg, "metadata")
    assert payload.sha256 == sha256_of(msg)
    assert payload.tool_call_ids == ["call\ufffd0"]
    assert sha256_of(msg) != sha256_of(msg.model_copy(update={"tool_calls": []}))
