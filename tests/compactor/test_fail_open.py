"""Recording, offloading and collaborators fail open: the agent loop never sees their errors."""

from __future__ import annotations

from pathlib import Path

from compactor import (
    CompactionOffloader,
    CompactionTier,
    CompactorConfig,
    JsonlRecordStore,
    Message,
    OffloadHook,
    ProgressiveCompactor,
    validate_history,
)
from compactor.summaries._message import parse_compaction_message
from tests.compactor.builders import ScriptedSummarizer, conversation, window_for


def _warn(tmp: Path, work_dir: Path, **kw: object) -> tuple[list[Message], ProgressiveCompactor]:
    msgs = conversation(12, result_bytes=6000)
    pc = ProgressiveCompactor(
        ScriptedSummarizer(),
        window_for(msgs, 0.65),
        offloader=CompactionOffloader(work_dir, "s1"),
        session_id="s1",
        **kw,  # type: ignore[arg-type]
    )
    return msgs, pc


def test_denied_offload_keeps_original_content_and_records_the_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the offload folder should be")
    msgs, pc = _warn(tmp_path, blocker)
    view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.WARN
    assert record.offloaded == []
    assert "could not offload tool result 'call_0_0'" in record.error
    assert "content kept in context" in record.error
    assert view == msgs
    assert record.effective is False


def test_full_disk_offload_keeps_every_unwritten_result_verbatim(tiny_disk: Path) -> None:
    msgs, pc = _warn(tiny_disk, tiny_disk)
    view, record = pc.compact_with_record(msgs)
    assert "No space left on device" in record.error
    written = {e.tool_call_id for e in record.offloaded}
    assert written, "the first files fit on the 64 KiB disk"
    for before, after in zip(msgs, view, strict=True):
        if before.tool_call_id and before.tool_call_id not in written:
            assert after == before
        if before.tool_call_id in written:
            assert (
                tiny_disk
                / next(
                    e.file_path for e in record.offloaded if e.tool_call_id == before.tool_call_id
                )
            ).read_text() == (before.content)
    assert not list(tiny_disk.rglob("*.tmp")), "no half-written temp files are left behind"
    assert validate_history(view) == []


def test_record_store_failure_never_raises_into_the_agent(tmp_path: Path) -> None:
    blocker = tmp_path / "records"
    blocker.write_text("a file, not a folder")
    msgs = conversation(30)
    pc = ProgressiveCompactor(
        ScriptedSummarizer(),
        window_for(msgs, 0.85),
        record_store=JsonlRecordStore(blocker),
        session_id="s1",
    )
    view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.FULL
    assert record.error == ""
    assert pc.record_store_errors == 1
    assert len(view) < len(msgs)


class _BrokenExtractor:
    def __init__(self) -> None:
        self.seen: list[int] = []

    def extract(self, messages: list[Message]) -> None:
        self.seen.append(len(messages))
        raise RuntimeError("memory store down")


class _Todos:
    def active_tasks(self) -> str:
        return "[>] Set up middleware\n[ ] Add health endpoint"


def test_memory_extraction_fails_open_and_active_tasks_are_injected(tmp_path: Path) -> None:
    msgs = conversation(30)
    extractor = _BrokenExtractor()
    pc = ProgressiveCompactor(
        ScriptedSummarizer(),
        window_for(msgs, 0.85),
        memory_extractor=extractor,
        todo_injector=_Todos(),
    )
    view, record = pc.compact_with_record(msgs)
    assert extractor.seen == [record.summarized]
    assert record.error == ""
    content = view[1].content
    assert content.startswith("[Context Compaction]\n## Anchors")
    state = parse_compaction_message(view[1])
    assert state is not None
    assert state.active_tasks == "[>] Set up middleware\n[ ] Add health endpoint"
    assert content.index("## Summary") < content.index("## Original Request")


def test_offload_hook_uses_its_own_threshold_and_the_same_folder(tmp_path: Path) -> None:
    hook = OffloadHook(tmp_path, "s1")
    small = Message(role="tool", tool_call_id="t1", content="x" * 9000)
    big = Message(role="tool", tool_call_id="t2", content="\n".join(f"l{i}" for i in range(5000)))
    assert hook(small) is small
    placeholder = hook(big)
    assert placeholder.content.startswith("[offloaded: .compactlens/tool_results/s1/t2.txt")
    preview = placeholder.content.splitlines()
    assert preview[2:22] == [f"l{i}" for i in range(20)]
    assert (tmp_path / hook.entries[0].file_path).read_text() == big.content
    config = CompactorConfig()
    assert config.offload_threshold < 10_000


def test_offload_hook_fails_open(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    hook = OffloadHook(blocker, "s1")
    big = Message(role="tool", tool_call_id="t2", content="y" * 20_000)
    assert hook(big) is big
    assert hook.errors
    assert "t2" in hook.errors[0]


def test_emergency_says_so_when_the_window_is_too_small_for_the_agent(tmp_path: Path) -> None:
    msgs = [Message(role="system", content="s" * 40_000), *conversation(3)[1:]]
    pc = ProgressiveCompactor(
        ScriptedSummarizer(),
        window_for(msgs, 0.97),
        offloader=CompactionOffloader(tmp_path, "s1"),
        session_id="s1",
    )
    view, record = pc.compact_with_record(msgs)
    assert record.tier == CompactionTier.EMERGENCY
    assert record.error.startswith("emergency fallback: forced truncation; still at ")
    assert "this window is too small for this agent" in record.error
    assert view[0] == msgs[0]
    assert validate_history(view) == []
