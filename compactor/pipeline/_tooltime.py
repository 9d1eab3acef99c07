"""Tool-time offload as a session setting: ``CompactorConfig.tool_offload_threshold``.

When the threshold is set, ``CompactionSession.append`` passes each tool result through an
``OffloadHook`` in the compactor's offloader folders (the same scheme as every offload): a
result above the threshold is written to its file and the history keeps the placeholder. It
fails open (a result that cannot be written is kept whole; the failure is counted and logged
once per kind). Nothing here decides when a compaction offloads; the compactor does.
"""

from __future__ import annotations

from compactor.config import CompactorConfig
from compactor.messages import Message
from compactor.pipeline.offload import CompactionOffloader, OffloadHook
from compactor.records import OffloadEntry
from compactor.writing._faults import FaultLog


class ToolTimeOffload:
    """The tool-time offload of one session (``hook`` is None when it is off)."""

    def __init__(
        self,
        config: CompactorConfig,
        offloader: CompactionOffloader | None,
        session_id: str,
        faults: FaultLog,
    ) -> None:
        self.faults = faults
        self.hook: OffloadHook | None = None
        if config.tool_offload_threshold is None:
            return
        if offloader is None:
            faults.note(
                "tool_offload_threshold is set but the compactor has no offloader",
                then="tool results are kept whole; give the compactor a CompactionOffloader",
            )
            return
        self.hook = OffloadHook(
            offloader.work_dir,
            session_id,
            threshold=config.tool_offload_threshold,
            preview_lines=config.tool_offload_preview_lines,
            preview_chars=config.tool_offload_preview_chars,
        )

    @property
    def entries(self) -> list[OffloadEntry]:
        return self.hook.entries if self.hook is not None else []

    @property
    def errors(self) -> int:
        return len(self.hook.errors) if self.hook is not None else 0

    def apply(self, msg: Message, tool_name: str) -> tuple[Message, OffloadEntry | None]:
        """``msg`` as the history keeps it (the placeholder, if offloaded) and its entry."""
        hook = self.hook
        if hook is None or not msg.is_tool_result:
            return msg, None
        failed = len(hook.errors)
        out = hook(msg, tool_name=tool_name)
        if len(hook.errors) > failed:
            self.faults.note("tool-time offload failed", then="the result is kept whole")
        return (out, hook.entries[-1]) if out is not msg else (msg, None)
