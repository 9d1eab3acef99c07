"""Tool-time offload as a config field: ``CompactorConfig.tool_offload_threshold``, applied by
``CompactionSession.append`` to each tool result (off unless set)."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

import pytest

from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactorConfig,
    ExtractiveSummarizer,
    MemorySink,
    Message,
    ProgressiveCompactor,
    ToolCall,
)


def _call(call_id: str, lines: int) -> tuple[Message, Message]:
    asked = Message(
        role="assistant", content="", tool_calls=[ToolCall(id=call_id, name="grep", arguments="{}")]
    )
    body = "\n".join(f"match {n}: src/cache.py" for n in range(lines))
    return asked, Message(role="tool", tool_call_id=call_id, content=body)


def _session(
    tmp_path: Path, config: CompactorConfig, *, offloader: bool = True
) -> tuple[CompactionSession, MemorySink]:
    sink = MemorySink()
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(),
        1_000_000,
        config=config,
        offloader=CompactionOffloader(tmp_path, "s1") if offloader else None,
    )
    session = CompactionSession(compactor, "sys", session_id="s1", event_sink=sink)
    session.append(Message(role="user", content="find the cache users"))
    return session, sink


def test_by_default_appended_tool_results_stay_whole_in_the_history(tmp_path: Path) -> None:
    assert CompactorConfig().tool_offload_threshold is None
    session, sink = _session(tmp_path, CompactorConfig())
    asked, big = _call("c1", 3000)
    session.extend([asked, big])
    assert session.history[-1] == big
    assert session.tool_offloads == []
    assert not (tmp_path / ".compactlens" / "tool_results").exists()
    assert sink.of_type("tool_result_offloaded") == []


def test_a_result_above_the_threshold_is_offloaded_on_append_and_the_history_keeps_the_placeholder(
    tmp_path: Path,
) -> None:
    config = CompactorConfig(tool_offload_threshold=8000)
    session, sink = _session(tmp_path, config)
    asked, big = _call("c1", 3000)
    small_call, small = _call("c2", 10)
    session.extend([asked, big, small_call, small])

    kept = session.history[2]
    assert kept.tool_call_id == "c1" and kept.role == "tool"
    assert kept.content.startswith("[offloaded: .compactlens/tool_results/s1/c1.txt | 3000 lines")
    assert kept.content.splitlines()[2:22] == big.content.splitlines()[:20]  # 20 preview lines
    assert (tmp_path / ".compactlens/tool_results/s1/c1.txt").read_text() == big.content
    assert session.history[4] == small  # under the threshold: whole
    assert session.history_bytes < len(big.content)
    [entry] = session.tool_offloads
    assert (entry.tool_name, entry.bytes, entry.lines) == ("grep", len(big.content), 3000)

    appended = sink.of_type("message_appended")
    assert appended[2].payload.content == kept.content  # type: ignore[union-attr]
    [offloaded] = sink.of_type("tool_result_offloaded")
    assert offloaded.payload.record_id == ""  # type: ignore[union-attr]
    assert offloaded.payload.file_path == entry.file_path  # type: ignore[union-attr]
    view, _ = session.prepare()
    assert view[3] == kept


def test_the_tool_time_preview_follows_its_own_config_fields(tmp_path: Path) -> None:
    config = CompactorConfig(tool_offload_threshold=100, tool_offload_preview_lines=3)
    session, _ = _session(tmp_path, config)
    session.extend(_call("c1", 50))
    lines = session.history[-1].content.splitlines()
    assert lines[1] == "Preview (first 3 lines):"
    assert lines[2:5] == ["match 0: src/cache.py", "match 1: src/cache.py", "match 2: src/cache.py"]
    assert lines[5].startswith("[Full result saved to")


def test_a_result_that_cannot_be_offloaded_is_kept_whole_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "work"
    blocker.write_text("a file where the work dir should be")
    sink = MemorySink()
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(),
        1_000_000,
        config=CompactorConfig(tool_offload_threshold=100),
        offloader=CompactionOffloader(blocker, "s1"),
    )
    session = CompactionSession(compactor, "sys", session_id="s1", event_sink=sink)
    for i in range(5):
        asked, big = _call(f"c{i}", 200)
        session.extend([asked, big])
        assert session.history[-1] == big
    assert session.tool_offload_errors == 5
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1


def test_the_threshold_without_an_offloader_keeps_results_whole_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session, _ = _session(tmp_path, CompactorConfig(tool_offload_threshold=100), offloader=False)
    asked, big = _call("c1", 200)
    session.extend([asked, big])
    assert session.history[-1] == big
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "no offloader" in warnings[0]


def test_a_toml_config_file_sets_the_tool_time_offload(tmp_path: Path) -> None:
    text = "warn = 0.5\nfallback_target = 0.4\ntool_offload_threshold = 8000\n"
    config = CompactorConfig.model_validate(tomllib.loads(text))  # what replay --config does
    assert config.tool_offload_threshold == 8000
    with pytest.raises(ValueError, match="tool_offload_threshold"):
        CompactorConfig.model_validate({"tool_offload_threshold": 0})


def test_configs_that_leave_the_new_fields_alone_keep_their_hash() -> None:
    assert CompactorConfig().config_hash() == "f2218ddbc86e"  # the hash before the fields
    assert CompactorConfig(tool_offload_threshold=8000).config_hash() != "f2218ddbc86e"
    assert CompactorConfig(tool_offload_preview_lines=5).config_hash() != "f2218ddbc86e"
