"""One test per point of SPEC 3.3: each would fail on the Go original's behaviour."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from compactor import (
    Anchor,
    AnchorType,
    CompactionOffloader,
    CompactionRecord,
    CompactionSession,
    CompactionTier,
    CompactorConfig,
    JsonlRecordStore,
    MemorySink,
    Message,
    ProgressiveCompactor,
    ToolCall,
    estimate_tokens,
    merge_anchors,
    parse_anchors_and_summary,
    validate_history,
)
from compactor.events import CompactionRecorded
from compactor.summaries._message import is_compaction_message
from tests.compactor.builders import (
    GOOD_SUMMARY,
    TASK,
    ScriptedSummarizer,
    conversation,
    exchange,
    window_for,
)


def _compactor(
    msgs: list[Message], ratio: float, tmp_path: Path, **kw: object
) -> ProgressiveCompactor:
    summarizer = kw.pop("summarizer", ScriptedSummarizer())
    return ProgressiveCompactor(
        summarizer,  # type: ignore[arg-type]
        window_for(msgs, ratio),
        offloader=CompactionOffloader(tmp_path, "s1"),
        session_id="s1",
        **kw,  # type: ignore[arg-type]
    )


def test_1_one_offload_threshold_is_honoured(tmp_path: Path) -> None:
    msgs = conversation(12, result_bytes=3000)
    config = CompactorConfig(offload_threshold=2000)
    # The offloader's own default (10000) would skip 3000-byte results; the config's 2000 rules.
    offloader = CompactionOffloader(tmp_path, "s1", threshold=10_000)
    pc = ProgressiveCompactor(
        ScriptedSummarizer(),
        window_for(msgs, 0.65),
        config=config,
        offloader=offloader,
        session_id="s1",
    )
    view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.WARN
    assert record.offloaded, "results above offload_threshold must be offloaded"
    assert all(e.bytes > 2000 for e in record.offloaded)
    # ...and a higher config threshold is honoured too: nothing of 3000 bytes moves.
    pc_high = ProgressiveCompactor(
        ScriptedSummarizer(),
        window_for(msgs, 0.65),
        config=CompactorConfig(offload_threshold=5000),
        offloader=CompactionOffloader(tmp_path, "s2", threshold=100),
        session_id="s2",
    )
    assert pc_high.compact_with_record(msgs)[1].offloaded == []
    assert validate_history(view) == []


@pytest.mark.parametrize("marker", ["- N/A", "N/A", "n/a", "none", "None.", "- none", ""])
def test_2_na_variants_never_overwrite_real_anchors(marker: str) -> None:
    old = [Anchor(type=t, content=f"- real {t.value}") for t in AnchorType]
    text = "## Anchors\n" + "\n".join(
        f"### {h}\n{marker}\n"
        for h in (
            "User Intent",
            "Execution Progress",
            "Key Decisions",
            "Tried Solutions",
            "Next Steps",
        )
    )
    new, _ = parse_anchors_and_summary(text + "\n## Summary\nmore")
    assert all(a.content == "N/A" for a in new)
    merged = merge_anchors(old, new)
    assert [a.content for a in merged] == [a.content for a in old]


def test_2_incremental_compaction_keeps_old_decision_when_new_says_na(tmp_path: Path) -> None:
    msgs = conversation(30)
    na_decisions = GOOD_SUMMARY.replace("- keep the public API: callers depend on it", "- N/A")
    summarizer = ScriptedSummarizer()
    session = CompactionSession(
        _compactor(msgs, 0.85, tmp_path, summarizer=summarizer), "sys", session_id="s1"
    )
    session.extend(msgs[1:])
    first = session.prepare()[1]
    assert first.tier == CompactionTier.FULL
    summarizer.text = na_decisions
    second = first
    for i in range(100, 200):
        session.extend(exchange(i, 1000))
        second = session.prepare()[1]
        if second.effective and second.tier in (CompactionTier.SOFT, CompactionTier.FULL):
            break
    assert len(summarizer.calls) == 2 and summarizer.calls[1][1] is not None
    decisions = {a.type: a.content for a in second.anchors}[AnchorType.KEY_DECISION]
    assert second.summarized > 0
    assert decisions == "- keep the public API: callers depend on it"


def test_3_all_na_summary_is_a_failure_not_a_replacement(tmp_path: Path) -> None:
    msgs = conversation(30)
    empty = "## Anchors\n### User Intent\n- N/A\n### Next Steps\nnone\n## Summary\n"
    pc = _compactor(msgs, 0.85, tmp_path, summarizer=ScriptedSummarizer(empty))
    view, record = pc.compact_with_record(msgs)
    assert record.error.startswith("LLM summary failed in TierFull")
    assert "five N/A anchors" in record.error
    assert record.fallback == "budget_trim"
    assert not any(is_compaction_message(m) for m in view)
    assert record.anchors == []


@pytest.mark.parametrize("ratio", [0.75, 0.85])
def test_4_llm_failure_fallback_drops_below_the_tier_that_fired(
    tmp_path: Path, ratio: float
) -> None:
    msgs = conversation(30, result_bytes=5000)
    pc = _compactor(
        msgs, ratio, tmp_path, summarizer=ScriptedSummarizer(error=RuntimeError("boom"))
    )
    view, record = pc.compact_with_record(msgs)
    tier = "TierSoft" if ratio < 0.8 else "TierFull"
    assert record.error == f"LLM summary failed in {tier}: RuntimeError: boom"
    assert estimate_tokens(view) / pc.context_window < pc.config.warn
    assert pc.determine_tier(view) == CompactionTier.NONE
    assert record.offloaded, "offloads made before the failure are kept"
    placeholders = [m for m in view if m.content.startswith("[offloaded: ")]
    kept_ids = {m.tool_call_id for m in placeholders}
    assert kept_ids <= {e.tool_call_id for e in record.offloaded}
    assert view[0] == msgs[0] and TASK in [m.content for m in view]
    assert validate_history(view) == []


def test_5_split_never_separates_tool_call_from_result(tmp_path: Path) -> None:
    msgs = conversation(10)
    msgs += exchange(50, 500, parallel=4)  # the last 6 messages start inside this exchange
    msgs += [Message(role="assistant", content="done")]
    pc = _compactor(msgs, 0.85, tmp_path)
    pc_cfg = pc.config.min_tail_messages
    view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.FULL
    assert validate_history(view) == []
    # The tail was extended back to the assistant message that made the four calls.
    assert record.preserved_tail == 6 > pc_cfg - 1
    assert view[2:] == msgs[-6:]
    assert view[2].tool_calls and len(view[2].tool_calls) == 4


def test_5_soft_midpoint_moves_to_a_safe_point(tmp_path: Path) -> None:
    msgs = [Message(role="system", content="sys"), Message(role="user", content=TASK)]
    for i in range(6):
        msgs += exchange(i, 800, parallel=3)
    pc = _compactor(msgs, 0.75, tmp_path)
    view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.SOFT
    assert validate_history(view) == []
    assert record.preserved_tail == len(view) - 2
    assert view[2].role in ("assistant", "user") and not view[2].is_tool_result


def test_6_emergency_keeps_system_task_and_newest_within_target(tmp_path: Path) -> None:
    long_task = "Please do this. " + "x" * 80_000
    msgs = conversation(40, result_bytes=2000, task=long_task)
    msgs += exchange(99, 120_000)  # one huge newest result
    window = window_for(msgs, 0.97)
    pc = ProgressiveCompactor(
        ScriptedSummarizer(), window, offloader=CompactionOffloader(tmp_path, "s1"), session_id="s1"
    )
    view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.EMERGENCY
    assert record.error == "emergency fallback: forced truncation"
    assert estimate_tokens(view) <= pc.config.emergency_target * window
    assert view[0] == msgs[0]
    task_view = view[1]
    assert task_view.role == "user" and task_view.content.startswith("Please do this.")
    assert "truncated by compactlens" in task_view.content
    assert len(task_view.content.encode()) <= 0.25 * window * 4
    assert view[-1].tool_call_id == "call_99_0", "the newest result is offloaded, not dropped"
    assert view[-1].content.startswith("[offloaded: ")
    assert len(view) > 2 and validate_history(view) == []
    assert record.dropped and record.preserved_tail == sum(1 for m in view[1:] if m in msgs)
    # It does not fire again next turn.
    assert pc.determine_tier(view) < CompactionTier.EMERGENCY


def test_7_compaction_never_mutates_the_history(tmp_path: Path) -> None:
    msgs = conversation(30, result_bytes=5000)
    snapshot = [m.model_dump() for m in msgs]
    for ratio in (0.65, 0.75, 0.85, 0.97):
        pc = _compactor(msgs, ratio, tmp_path)
        view, _ = pc.compact_with_record(msgs)
        assert view is not msgs
    assert [m.model_dump() for m in msgs] == snapshot
    session = CompactionSession(_compactor(msgs, 0.85, tmp_path), "sys", session_id="s1")
    session.extend(msgs[1:])
    session.prepare()
    assert session.history == msgs[1:]


def test_8_new_session_never_inherits_previous_summary(tmp_path: Path) -> None:
    msgs = conversation(30)
    summarizer = ScriptedSummarizer()
    base = _compactor(msgs, 0.85, tmp_path, summarizer=summarizer)
    base.compact_with_record(msgs)
    base.compact_with_record(msgs)
    assert summarizer.calls[1][1] is not None, "the same session is incremental"
    other = base.for_session("s2")
    other.compact_with_record(msgs)
    assert summarizer.calls[2][1] is None
    assert other.offloader is not None and other.offloader.session_id == "s2"
    assert "s2" in str(other.offloader.session_dir)


def test_9_nothing_to_compact_is_recorded_as_noop(tmp_path: Path) -> None:
    msgs = [
        Message(role="system", content="sys"),
        Message(role="user", content="x" * 4000),
        Message(role="assistant", content="ok"),
    ]
    store = JsonlRecordStore(tmp_path / "records")
    pc = ProgressiveCompactor(
        ScriptedSummarizer(), window_for(msgs, 0.85), record_store=store, session_id="s1"
    )
    assert pc.determine_tier(msgs) == CompactionTier.FULL  # decided, but the tail is everything
    view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.FULL
    assert record.effective is False
    assert view == msgs
    assert (record.summarized, record.tokens_after) == (0, record.tokens_before)
    assert store.list("s1") == []
    sink = MemorySink()
    session = CompactionSession(pc, msgs[0], session_id="s1", event_sink=sink)
    session.extend(msgs[1:])
    session.prepare()
    session.prepare()
    (event,) = sink.of_type("compaction_recorded")  # emitted once for the streak, not stored
    assert isinstance(event.payload, CompactionRecorded)
    assert event.payload.record.effective is False
    assert session.noops_suppressed == 1
    assert store.list("s1") == []


def test_10_offload_names_are_sanitised_and_idempotent_across_restarts(tmp_path: Path) -> None:
    hostile = Message(role="tool", tool_call_id="../../etc/passwd", content="A\n" * 5000)
    off = CompactionOffloader(tmp_path, "../../../tmp/evil", preview_lines=3, preview_chars=5)
    done = off.offload(hostile)
    assert done is not None
    entry, placeholder = done
    path = (tmp_path / entry.file_path).resolve()
    assert tmp_path.resolve() in path.parents
    assert path.read_text() == hostile.content
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"
    preview = placeholder.content.splitlines()
    assert preview[0].startswith(f"[offloaded: {entry.file_path} | 5000 lines / 10000 bytes]")
    assert len(preview[2]) <= 6  # preview capped in characters...
    assert len(placeholder.content) < 400  # ...and in lines
    before = path.stat().st_mtime_ns, path.stat().st_ino
    restarted = CompactionOffloader(tmp_path, "../../../tmp/evil")
    again = restarted.offload(hostile)
    assert again is not None and again[0].file_path == entry.file_path
    assert (path.stat().st_mtime_ns, path.stat().st_ino) == before, "identical file not rewritten"
    changed = hostile.model_copy(update={"content": "B\n" * 5000})
    other = restarted.offload(changed)
    assert other is not None and other[0].file_path != entry.file_path
    assert Path(other[0].file_path).stem.endswith(other[0].sha256[:8])
    assert path.read_text() == hostile.content


def test_11_record_store_fsyncs_locks_and_reports_bad_lines(tmp_path: Path) -> None:
    store = JsonlRecordStore(tmp_path)
    store.append(
        CompactionRecord(session_id="../s", tier=CompactionTier.FULL, summary_text="y" * 2_000_000)
    )
    path = store.path_for("../s")
    assert path.parent == tmp_path and path.exists()
    with path.open("a") as fh:
        fh.write("{not json\n")
        fh.write(json.dumps({"tier": "high"}) + "\n")
    store.append(CompactionRecord(session_id="../s", tier=CompactionTier.WARN))
    records = store.list("../s")
    assert [r.tier for r in records] == [CompactionTier.FULL, CompactionTier.WARN]
    assert len(records[0].summary_text or "") == 2_000_000
    assert [(e.line, e.path) for e in store.last_errors] == [(2, str(path)), (3, str(path))]
    assert "tier" in store.last_errors[1].reason
    go_line = (
        '{"id":"a1","session_id":"sess1","timestamp":"2025-06-01T10:00:00.123456789+08:00",'
        '"tier":3,"tokens_before":45200,"tokens_after":8100,"msgs_before":40,'
        '"msgs_after":8,"anchors":[{"type":"user_intent","content":"Build API"}],'
        '"offloaded":null,"summarized":28,"preserved_tail":6,"summary_text":"s",'
        '"compression_ratio":0.179,"duration":1500000000}'
    )
    (tmp_path / "sess1.jsonl").write_text(go_line + "\n")
    (go,) = store.list("sess1")
    assert go.tier == CompactionTier.FULL and go.duration_ms == 1500.0 and go.offloaded == []
    assert json.loads(go.to_json_line())["tier"] == 3


def test_12_summarizer_timeout_falls_back_promptly(tmp_path: Path) -> None:
    msgs = conversation(30)
    gate = threading.Event()
    pc = _compactor(
        msgs,
        0.85,
        tmp_path,
        summarizer=ScriptedSummarizer(block=gate),
        config=CompactorConfig(summarizer_timeout_s=0.2),
    )
    view, record = pc.compact_with_record(msgs)
    gate.set()
    assert "timed out after 0.2s" in record.error
    assert record.error.startswith("LLM summary failed in TierFull")
    assert pc.determine_tier(view) == CompactionTier.NONE


async def test_12_async_summarizer_call_can_be_cancelled(tmp_path: Path) -> None:
    msgs = conversation(30)
    gate = threading.Event()
    summarizer = ScriptedSummarizer(block=gate)
    pc = _compactor(msgs, 0.85, tmp_path, summarizer=summarizer)
    task = asyncio.create_task(pc.acompact_with_record(msgs))
    while not summarizer.calls:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gate.set()
    summarizer.block = None
    _view, record = await pc.acompact_with_record(msgs)
    assert record.tier == CompactionTier.FULL and record.error == ""
    assert summarizer.calls[-1][1] is None, "the cancelled call left no summary state behind"


def test_12_tool_schema_tokens_count_in_the_tier_decision(tmp_path: Path) -> None:
    msgs = conversation(20)
    window = window_for(msgs, 0.5)
    plain = ProgressiveCompactor(ScriptedSummarizer(), window)
    assert plain.determine_tier(msgs) == CompactionTier.NONE
    schemas = ProgressiveCompactor(
        ScriptedSummarizer(), window, config=CompactorConfig(reserve_tokens=int(window * 0.31))
    )
    assert schemas.determine_tier(msgs) == CompactionTier.FULL


def test_assistant_tool_call_arguments_count_in_tokens() -> None:
    call = ToolCall(id="abcd", name="bash", arguments='{"command": "ls"}')
    msg = Message(role="assistant", content="", tool_calls=(call,))
    assert estimate_tokens([msg]) == (4 + 4 + len(call.arguments)) // 4


def test_8_compactor_adopts_the_offloaders_session_when_given_none(tmp_path: Path) -> None:
    pc = ProgressiveCompactor(
        ScriptedSummarizer(), 1000, offloader=CompactionOffloader(tmp_path, "session-1")
    )
    assert pc.session_id == "session-1"
    assert pc.offloader is not None
    assert pc.offloader.session_dir.name == "session-1"
