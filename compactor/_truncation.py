"""Cutting text and messages to a byte size: the middle goes, both ends stay, with a marker.

Used by Emergency and the fallback to fit a message into what is left of a budget, and for the
task carried in compaction messages. Tool-call arguments stay valid JSON objects when cut; an
offload placeholder keeps its first line whole, since that line is the only pointer to the file
that holds the result. Nothing here decides what to cut; the fallback does.
"""

from __future__ import annotations

import json

from compactor.messages import Message, ToolCall
from compactor.pipeline.offload import is_offloaded
from compactor.tokens import message_bytes, utf8_len

_SHORT_MARKER = "…"
"""The marker when the full one would not fit: a cut is still visible, and the size is kept."""


def truncate_middle(text: str, max_bytes: int) -> str:
    """Cut ``text`` in the middle with a marker so that it fits ``max_bytes`` UTF-8 bytes
    (always: below the marker's own size the marker shrinks to an ellipsis, then to nothing)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    room = max(0, max_bytes)
    marker = f"\n…[{len(data) - room} bytes truncated by compactlens]…\n"
    if utf8_len(marker) > room:
        marker = _SHORT_MARKER if utf8_len(_SHORT_MARKER) <= room else ""
    keep = room - utf8_len(marker)
    head = data[: keep // 2].decode("utf-8", "ignore")
    tail = data[len(data) - (keep - keep // 2) :].decode("utf-8", "ignore") if keep else ""
    return f"{head}{marker}{tail}"


def _shrink_arguments(call: ToolCall, room: int) -> ToolCall:
    """The call with its arguments cut to ``room`` bytes, still a valid JSON object."""
    raw = call.arguments
    if utf8_len(raw) <= room:
        return call
    keep = max(0, room - 40)
    while True:
        args = json.dumps({"truncated_arguments": truncate_middle(raw, keep)}, ensure_ascii=False)
        if utf8_len(args) <= room or keep == 0:
            return call.model_copy(update={"arguments": args})
        keep //= 2


def shrink_message(msg: Message, max_bytes: int) -> Message:
    """``msg`` cut to about ``max_bytes``: long tool-call arguments first, then the content.
    An offload placeholder's first line stays whole even where it alone is above the size."""
    if message_bytes(msg) <= max_bytes:
        return msg
    if is_offloaded(msg.content):
        return _shrink_placeholder(msg, max_bytes)
    content = utf8_len(msg.content)
    fixed = message_bytes(msg) - content - sum(utf8_len(tc.arguments) for tc in msg.tool_calls)
    available = max(0, max_bytes - fixed)
    if msg.tool_calls:
        arg_room = available - content if content <= available // 2 else available // 2
        per_call = max(0, arg_room) // len(msg.tool_calls)
        calls = tuple(_shrink_arguments(tc, per_call) for tc in msg.tool_calls)
        msg = msg.model_copy(update={"tool_calls": calls})
    room = max(0, max_bytes - (message_bytes(msg) - content))
    return msg.model_copy(update={"content": truncate_middle(msg.content, room)})


def _shrink_placeholder(msg: Message, max_bytes: int) -> Message:
    """The placeholder with its first line (``[offloaded: <path> | …]``) whole and the preview
    after it cut to what is left: without that line the agent could not read the result back."""
    first, _, rest = msg.content.partition("\n")
    fixed = message_bytes(msg) - utf8_len(msg.content)
    room = max_bytes - fixed - utf8_len(first) - 1  # the newline after the first line
    content = f"{first}\n{truncate_middle(rest, room)}" if rest and room > 0 else first
    return msg.model_copy(update={"content": content})
