"""Codex's own compactions: a rollout's ``compacted`` items → what each replaced and left.

A *local* compaction (older versions) is ``{"message": <summary>}``: Codex replaced its context
with the summary. Codex then also re-sends the session's user messages, but the rollout does not
record which, so the view after is the summary alone. A *remote* compaction (newer versions,
OpenAI providers) has ``replacement_history``: the items Codex kept, usually the user messages
verbatim, and a ``compaction`` / ``compaction_summary`` item whose summary is encrypted. Each
kept message that equals one of the view before is that history message (``kept``); others are
messages Codex made; the encrypted summary is a placeholder message, its size estimated from the
ciphertext (the token's length less Fernet's 57-byte envelope, / 4), ``summary_text`` is None
and ``summary_encrypted`` true. ``tokens_before`` is the prompt of the last ``token_count``
before the item (Codex's own figure; for a local compaction, the compaction's own call). Codex
does not say what triggered a compaction: ``auto`` is recorded. Anchors come from the summary
and the user's requests in the view before (``native_anchors.codex_anchors``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from analytics.importers.native import Found, cut_summary
from analytics.importers.native_anchors import codex_anchors
from analytics.importers.session import ViewRef
from compactor import Message

_REQUEST_MARK = "## My request for Codex:"
_INJECTED = (
    "# AGENTS.md instructions",
    "<environment_context>",
    "<user_instructions>",
    "<turn_aborted>",
    "<permissions instructions>",
    "<collaboration_mode>",
)
_FERNET_ENVELOPE = 57  # version 1 + timestamp 8 + IV 16 + HMAC 32 bytes
ENCRYPTED_PLACEHOLDER = "[Codex compaction summary: encrypted by the provider, not readable]"


def compaction_found(
    messages: Sequence[Message],
    before: list[ViewRef],
    payload: dict[str, Any],
    *,
    lineno: int,
    timestamp: datetime | None,
    harness_tokens: int | None,
    context_window: int,
) -> Found:
    """What one ``compacted`` item says, as a ``Found`` compaction."""
    message = payload.get("message")
    summary, cut = cut_summary(message if isinstance(message, str) and message else None)
    replacement = payload.get("replacement_history")
    encrypted, hidden = False, 0
    if isinstance(replacement, list):
        after, encrypted, hidden = _replacement(messages, before, replacement)
    else:
        after = [] if summary is None else [Message(role="user", content=summary)]
        hidden = cut
    requests = [r for r in (codex_request(messages[i]) for i in _ints(before)) if r]
    return Found(
        harness="codex",
        native_id=f"compacted:{lineno}",
        line=lineno,
        timestamp=timestamp,
        before=before,
        after=after,
        summary_text=None if encrypted else summary,
        anchors=codex_anchors(summary, requests),
        harness_tokens=harness_tokens,
        summary_encrypted=encrypted,
        hidden_tokens=hidden,
        context_window=context_window,
    )


def codex_request(msg: Message) -> str | None:
    """What the user asked in a Codex user message: the text after the IDE's request marker,
    None for the context Codex injects itself (AGENTS.md, environment, permissions)."""
    if msg.role != "user" or msg.name is not None or msg.is_tool_result:
        return None
    text = msg.content
    if _REQUEST_MARK in text:
        return text.split(_REQUEST_MARK, 1)[1].strip()
    stripped = text.lstrip()
    return None if stripped.startswith(_INJECTED) else stripped


def _replacement(
    messages: Sequence[Message], before: list[ViewRef], items: list[Any]
) -> tuple[list[ViewRef], bool, int]:
    """The view after a remote compaction, whether its summary is encrypted, and the
    estimated tokens of the encrypted summary. A kept message is the earliest equal message of
    the view before not matched yet, found by a look-up (a search per message was quadratic)."""
    unused: dict[Message, deque[int]] = {}
    for i in _ints(before):
        unused.setdefault(messages[i], deque()).append(i)
    after: list[ViewRef] = []
    encrypted, hidden = False, 0
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in ("compaction", "compaction_summary"):
            blob = item.get("encrypted_content")
            if isinstance(blob, str) and blob:
                encrypted = True
                hidden += max(0, len(blob) * 3 // 4 - _FERNET_ENVELOPE) // 4
            after.append(Message(role="user", content=ENCRYPTED_PLACEHOLDER))
        elif kind == "message":
            kept = _message(item)
            same = unused.get(kept)
            after.append(same.popleft() if same else kept)
    return after, encrypted, hidden


def _message(item: dict[str, Any]) -> Message:
    role = item.get("role")
    content = item.get("content")
    blocks = content if isinstance(content, list) else []
    text = "\n".join(
        b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)
    )
    if role == "assistant":
        return Message(role="assistant", content=text)
    name = None if role == "user" else str(role)
    return Message(role="user", content=text, name=name)


def _ints(refs: Sequence[ViewRef]) -> list[int]:
    return [r for r in refs if isinstance(r, int)]
