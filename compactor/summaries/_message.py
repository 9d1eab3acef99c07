"""The ``[Context Compaction]`` message: its state, rendering it, and reading it back exactly.

A compaction message carries the five anchors, the summary, the original request (so the task
survives whatever the summariser wrote), the offloaded file references and the active tasks.
Every free-text body sits in a tilde fence longer than any run of tildes inside it, so no
content (a markdown task with ``## `` lines, a summary quoting ``[Context Compaction]``, a
fence of its own) can close it: ``parse_compaction_message(render(state)) == state`` for any
text. A message that starts with the marker but does not parse exactly is an ordinary message
(a user may paste one as their task). This module also finds the task in a list of messages.
It does not summarise, decide tiers or truncate.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from compactor._truncation import truncate_middle
from compactor.messages import Message
from compactor.records import OffloadEntry
from compactor.summaries.anchors import ANCHOR_ORDER, ANCHOR_TITLES, NA, Anchor, normalise
from compactor.summaries.summarize import PreviousCompaction
from compactor.tokens import message_bytes, utf8_len

COMPACTION_MARKER = "[Context Compaction]"
MAX_REFERENCES = 100

_FENCE_MIN = 3
_TILDES = re.compile(r"~+")
_FENCE_LINE = re.compile(r"~{3,}")


class CompactionState(BaseModel):
    """What one compaction message says, as data: the session's memory between compactions.

    ``task`` is the text as carried in the message (middle-truncated when the task is larger
    than the cap); the compactor keeps the full task beside it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    anchors: list[Anchor] = Field(default_factory=list)
    summary: str = ""
    task: str = ""
    references: list[str] = Field(default_factory=list)
    active_tasks: str = ""

    @property
    def previous(self) -> PreviousCompaction:
        return PreviousCompaction(anchors=self.anchors, summary=self.summary)


def offload_reference(entry: OffloadEntry) -> str:
    tool = f" - {entry.tool_name} result" if entry.tool_name else " - offloaded tool result"
    return f"- {entry.file_path} ({entry.lines} lines, {entry.bytes} bytes){tool}"


def _fence(body: str) -> str:
    longest = max((len(m) for m in _TILDES.findall(body)), default=0)
    fence = "~" * max(_FENCE_MIN, longest + 1)
    return f"{fence}\n{body}\n{fence}"


def render_compaction_message(state: CompactionState) -> Message:
    """The message for ``state``: marker, anchors, summary, request, references, tasks."""
    by_type = {a.type: a for a in state.anchors}
    parts = [COMPACTION_MARKER, "## Anchors"]
    for kind in ANCHOR_ORDER:
        anchor = by_type.get(kind)
        content = anchor.content if anchor is not None and not anchor.is_na else NA
        parts += ["", f"### {ANCHOR_TITLES[kind]}", _fence(content)]
    parts += ["", "## Summary", _fence(state.summary or NA)]
    parts += ["", "## Original Request", _fence(state.task or NA)]
    refs = list(dict.fromkeys(state.references))[-MAX_REFERENCES:]
    if refs:
        parts += ["", "## Offloaded References", _fence("\n".join(refs))]
    if state.active_tasks:
        parts += ["", "## Active Tasks", _fence(state.active_tasks)]
    return Message(role="user", content="\n".join(parts))


class _Reader:
    """A strict cursor over the lines of a rendered message; any surprise means 'not ours'."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self.i = 0

    def skip_blank(self) -> None:
        while self.i < len(self.lines) and not self.lines[self.i]:
            self.i += 1

    def at(self, line: str) -> bool:
        self.skip_blank()
        return self.i < len(self.lines) and self.lines[self.i] == line

    def expect(self, line: str) -> None:
        if not self.at(line):
            raise ValueError(line)
        self.i += 1

    def block(self) -> str:
        self.skip_blank()
        if self.i >= len(self.lines) or not _FENCE_LINE.fullmatch(self.lines[self.i]):
            raise ValueError("fence")
        fence = self.lines[self.i]
        try:
            end = self.lines.index(fence, self.i + 1)
        except ValueError:
            raise ValueError("unclosed fence") from None
        body = "\n".join(self.lines[self.i + 1 : end])
        self.i = end + 1
        return body

    def optional(self, header: str) -> str:
        if not self.at(header):
            return ""
        self.i += 1
        return self.block()

    def done(self) -> bool:
        self.skip_blank()
        return self.i == len(self.lines)


def _unfilled(text: str) -> str:
    return "" if text == NA else text


@functools.lru_cache(maxsize=64)
def _parse(content: str) -> CompactionState | None:
    reader = _Reader(content[len(COMPACTION_MARKER) + 1 :])
    try:
        reader.expect("## Anchors")
        anchors = []
        for kind in ANCHOR_ORDER:
            reader.expect(f"### {ANCHOR_TITLES[kind]}")
            anchors.append(Anchor(type=kind, content=normalise(reader.block())))
        reader.expect("## Summary")
        summary = _unfilled(reader.block())
        reader.expect("## Original Request")
        task = _unfilled(reader.block())
        refs = reader.optional("## Offloaded References")
        active = reader.optional("## Active Tasks")
    except ValueError:
        return None
    if not reader.done():
        return None
    return CompactionState(
        anchors=anchors,
        summary=summary,
        task=task,
        references=refs.split("\n") if refs else [],
        active_tasks=active,
    )


def parse_compaction_message(msg: Message) -> CompactionState | None:
    """The state a compaction message carries, or None when ``msg`` is not one."""
    if msg.role != "user" or msg.is_tool_result:
        return None
    if not msg.content.startswith(COMPACTION_MARKER + "\n"):
        return None
    return _parse(msg.content)


def is_compaction_message(msg: Message) -> bool:
    """True for a message this library rendered (not merely one starting with the marker)."""
    return parse_compaction_message(msg) is not None


def find_task_index(msgs: Sequence[Message]) -> int | None:
    """The task: the first user message that is neither a tool result nor a compaction."""
    for i, m in enumerate(msgs):
        if m.role == "user" and not m.is_tool_result and not is_compaction_message(m):
            return i
    return None


def task_carrier_index(msgs: Sequence[Message]) -> int | None:
    """Where the task is in a view: the latest compaction message when there is one (it
    carries the task; any user message after it is a follow-up), else the task itself."""
    for i in range(len(msgs) - 1, -1, -1):
        if is_compaction_message(msgs[i]):
            return i
    return find_task_index(msgs)


def fit_compaction_message(state: CompactionState, max_bytes: int) -> Message:
    """The message for ``state`` in at most about ``max_bytes``: the task stays whole (it is
    capped already), the anchors, summary, references and tasks are cut in the middle, each in
    proportion to its size. Used when Emergency must keep a compaction message that is too big."""
    message = render_compaction_message(state)
    if message_bytes(message) <= max_bytes:
        return message
    bare = state.model_copy(
        update={"anchors": [], "summary": "", "references": [], "active_tasks": ""}
    )
    fixed = message_bytes(render_compaction_message(bare)) + 16 * len(ANCHOR_ORDER)
    room = max(0, max_bytes - fixed)
    refs = "\n".join(state.references)
    bodies = [a.content for a in state.anchors] + [state.summary, refs, state.active_tasks]
    total = sum(utf8_len(b) for b in bodies) or 1

    def cut(text: str) -> str:
        share = utf8_len(text) * room // total
        return truncate_middle(text, share) if text else text

    anchors = [a.model_copy(update={"content": normalise(cut(a.content))}) for a in state.anchors]
    fitted = CompactionState(
        anchors=anchors,
        summary=cut(state.summary),
        task=state.task,
        references=[r for r in cut(refs).split("\n") if r] if refs else [],
        active_tasks=cut(state.active_tasks).strip(),
    )
    return render_compaction_message(fitted)
