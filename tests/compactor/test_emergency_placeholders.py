"""Emergency in a window with little room keeps every offload placeholder's first line: the path
of the file that holds the result is the agent's only way back to it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from compactor import (
    CompactionOffloader,
    CompactionTier,
    ExtractiveSummarizer,
    Message,
    OverheadCalibratedEstimator,
    ProgressiveCompactor,
    ToolCall,
)
from compactor.tokens import raw_tokens

FIRST_LINE = re.compile(r"^\[offloaded: (?P<path>\S+) \| \d+ lines / \d+ bytes\]$")
WINDOW = 32_000
HIDDEN_PROMPT = 15_700
"""Tokens the harness adds that the messages do not show (what calibration learns)."""


def _parallel_results(n: int, result_bytes: int) -> list[Message]:
    calls = [
        ToolCall(id=f"call_{k}", name="bash", arguments=json.dumps({"command": f"make part{k}"}))
        for k in range(n)
    ]
    out = [Message(role="assistant", content="building all parts", tool_calls=calls)]
    for call in calls:
        body = "\n".join(f"{call.id}: compiling unit {i}" for i in range(result_bytes // 28))
        out.append(Message(role="tool", tool_call_id=call.id, name="bash", content=body))
    return out


def test_emergency_in_a_tight_window_keeps_each_placeholders_file_path(tmp_path: Path) -> None:
    msgs = [
        Message(role="system", content="You are a build agent."),
        Message(role="user", content="Build every part and report the failures."),
        *_parallel_results(6, 12_000),
    ]
    estimator = OverheadCalibratedEstimator()
    visible = raw_tokens(estimator, sum(len(m.content) for m in msgs[:2]))
    estimator.observe(visible, visible + HIDDEN_PROMPT)
    assert round(estimator.overhead) == HIDDEN_PROMPT
    pc = ProgressiveCompactor(
        ExtractiveSummarizer(),
        WINDOW,
        offloader=CompactionOffloader(tmp_path, "tight"),
        session_id="tight",
        estimator=estimator,
    )

    out = pc.compact_detailed(msgs)
    originals = {m.tool_call_id: m.content for m in msgs if m.is_tool_result}

    assert out.record.tier == CompactionTier.EMERGENCY
    results = [m for m in out.view if m.is_tool_result]
    assert len(results) == 6 == len(out.record.offloaded)
    for msg, entry in zip(results, out.record.offloaded, strict=True):
        first = FIRST_LINE.match(msg.content.split("\n", 1)[0])
        assert first is not None, msg.content[:120]
        assert first["path"] == entry.file_path
        assert (tmp_path / entry.file_path).read_text() == originals[msg.tool_call_id]
