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

Newer rollouts (about 0.149 on) add to the item: the summary item may be a
``context_compaction`` (its ``encrypted_content`` optional: the provider keeps the summary), the
kept items may come as ``replacement_history_entries`` (``{"type": "inline", "item": ...}``; a
``reference`` to an earlier item is not resolved: it is left out of the view after), and
``latest_token_usage_record`` is the compaction call's own usage when its ``response_id`` is the
item's ``compaction_response_id``: its ``input_tokens`` are then the tokens before (Codex's
figure) and its ``output_tokens`` the size of the encrypted summary. What Codex measured after
(the ``token_count`` it writes right after with a zero prompt) is ``codex.py``'s to read.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from analytics.importers.native import Found, cut_summary
from analytics.importers.native_anchors import codex_anchors
from analytics.importers.reading import MAX_COUNT
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
_SUMMARY_ITEMS = ("compaction", "compaction_summary", "context_compaction")
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
    replacement = _kept_items(payload)
    own = _own_usage(payload)
    encrypted, hidden = False, 0
    if replacement is not None:
        after, encrypted, hidden = _replacement(messages, before, replacement)
        if encrypted and own is not None and own[1]:
            hidden = own[1]  # the summary's own size, as the provider counted it
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
        harness_tokens=own[0] if own is not None and own[0] else harness_tokens,
        summary_encrypted=encrypted,
        hidden_tokens=hidden,
        context_window=context_window,
    )


def _kept_items(payload: dict[str, Any]) -> list[Any] | None:
    """The items a remote compaction kept: ``replacement_history``, else the inline items of
    ``replacement_history_entries``; None for a local compaction (neither)."""
    items = payload.get("replacement_history")
    if isinstance(items, list):
        return items
    entries = payload.get("replacement_history_entries")
    if not isinstance(entries, list):
        return None
    return [e.get("item") for e in entries if isinstance(e, dict) and e.get("type") == "inline"]


def _own_usage(payload: dict[str, Any]) -> tuple[int | None, int | None] | None:
    """(input, output tokens) of the compaction call itself, from the item's
    ``latest_token_usage_record`` when it is that call's (its ``response_id`` is the item's
    ``compaction_response_id``); None otherwise. A figure that is no count is None."""
    record = payload.get("latest_token_usage_record")
    response = payload.get("compaction_response_id")
    if not isinstance(record, dict) or not response or record.get("response_id") != response:
        return None
    usage = record.get("usage")
    if not isinstance(usage, dict):
        return None
    return _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        return None
    return value


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
        if kind in _SUMMARY_ITEMS:
            blob = item.get("encrypted_content")
            if isinstance(blob, str) and blob:
                hidden += max(0, len(blob) * 3 // 4 - _FERNET_ENVELOPE) // 4
            encrypted = True  # opaque: the provider holds the summary (encrypted, or not sent)
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
