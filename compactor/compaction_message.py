"""The ``[Context Compaction]`` message: building it, and reading back what an earlier one held.

A compaction message carries the five anchors, the summary, the original request verbatim (so
the task survives whatever the summariser wrote), the offloaded file references and the active
tasks. Reading one back gives the ``previous`` of the incremental prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactor.anchors import Anchor, format_anchors, parse_anchors_and_summary, parse_sections
from compactor.fallback import COMPACTION_MARKER, truncate_middle
from compactor.messages import Message
from compactor.records import OffloadEntry
from compactor.summarize import PreviousCompaction

MAX_REFERENCES = 100


def offload_reference(entry: OffloadEntry) -> str:
    tool = f" - {entry.tool_name} result" if entry.tool_name else " - offloaded tool result"
    return f"- {entry.file_path} ({entry.lines} lines, {entry.bytes} bytes){tool}"


def build_compaction_message(
    anchors: list[Anchor],
    summary: str,
    *,
    task: str,
    task_max_bytes: int,
    references: Sequence[str] = (),
    active_tasks: str = "",
) -> Message:
    parts = [
        COMPACTION_MARKER,
        format_anchors(anchors).rstrip(),
        "",
        "## Summary",
        summary.strip() or "N/A",
        "",
        "## Original Request",
        truncate_middle(task, task_max_bytes) if task else "N/A",
    ]
    refs = list(dict.fromkeys(references))[-MAX_REFERENCES:]
    if refs:
        parts += ["", "## Offloaded References", *refs]
    if active_tasks.strip():
        parts += ["", "## Active Tasks", active_tasks.strip()]
    return Message(role="user", content="\n".join(parts))


def read_previous(msg: Message) -> PreviousCompaction:
    anchors, summary = parse_anchors_and_summary(msg.content)
    return PreviousCompaction(anchors=anchors, summary=summary)


def read_section(msg: Message, title: str) -> str:
    return parse_sections(msg.content).get(title.lower(), "")


def read_references(msg: Message) -> list[str]:
    body = read_section(msg, "Offloaded References")
    return [line for line in body.splitlines() if line.startswith("- ")]
