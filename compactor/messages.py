"""Messages and tool calls, and converters to and from OpenAI and Anthropic message dicts.

A message is a tool result iff ``tool_call_id`` is set, whatever its role: harness9 sends tool
results as role ``user`` with an id, OpenAI as role ``tool``. This module does no token counting
and no validation of conversation structure (see ``fallback.validate_history``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """One tool call requested by an assistant message; ``arguments`` is the raw JSON text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    arguments: str = ""


class Message(BaseModel):
    """One chat message. Frozen: compaction edits copies, never the caller's history."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = Field(default_factory=tuple)
    tool_call_id: str | None = None
    is_error: bool = False
    name: str | None = None

    @property
    def is_tool_result(self) -> bool:
        """True for a tool result (role ``tool``, or role ``user`` with a ``tool_call_id``)."""
        return self.tool_call_id is not None

    @property
    def has_tool_calls(self) -> bool:
        return bool(self.tool_calls)


def _text_of(content: Any) -> str:
    """Flatten a provider content field (string, list of blocks, or None) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping):
                text = block.get("text")
                if isinstance(text, str):
                    parts.append(text)
                elif block.get("type") == "tool_result":
                    parts.append(_text_of(block.get("content")))
        return "\n".join(parts)
    return str(content)


# ---------------------------------------------------------------- OpenAI chat completions


def to_openai(msg: Message) -> dict[str, Any]:
    """One message as an OpenAI chat-completions message dict."""
    if msg.is_tool_result:
        out: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": msg.tool_call_id,
            "content": msg.content,
        }
        if msg.name:
            out["name"] = msg.name
        return out
    out = {"role": msg.role, "content": msg.content}
    if msg.tool_calls:
        out["content"] = msg.content or None
        out["tool_calls"] = [
            {
                "id": tc.id,
                "type": "function",
                "function": {"name": tc.name, "arguments": tc.arguments},
            }
            for tc in msg.tool_calls
        ]
    if msg.name:
        out["name"] = msg.name
    return out


def messages_to_openai(msgs: Iterable[Message]) -> list[dict[str, Any]]:
    return [to_openai(m) for m in msgs]


def from_openai(raw: Mapping[str, Any]) -> Message:
    """Parse one OpenAI chat message dict (tool calls, tool results, legacy ``function``)."""
    role = raw.get("role")
    content = _text_of(raw.get("content"))
    if role in ("tool", "function"):
        call_id = raw.get("tool_call_id") or raw.get("name") or ""
        return Message(
            role="tool",
            content=content,
            tool_call_id=str(call_id),
            name=raw.get("name"),
            is_error=bool(raw.get("is_error", False)),
        )
    calls: list[ToolCall] = []
    for tc in raw.get("tool_calls") or ():
        fn = tc.get("function") or {}
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        calls.append(
            ToolCall(id=str(tc.get("id", "")), name=str(fn.get("name", "")), arguments=args)
        )
    if role not in ("system", "user", "assistant"):
        raise ValueError(
            f"unknown OpenAI message role {role!r}; expected system/user/assistant/tool"
        )
    return Message(role=role, content=content, tool_calls=tuple(calls), name=raw.get("name"))


def messages_from_openai(raws: Iterable[Mapping[str, Any]]) -> list[Message]:
    return [from_openai(r) for r in raws]


# ---------------------------------------------------------------- Anthropic messages


def messages_to_anthropic(msgs: Iterable[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Render to Anthropic's ``(system, messages)``.

    System messages are joined into the system string; consecutive tool results become
    ``tool_result`` blocks of one user message, as the Messages API requires after parallel calls.
    """
    system_parts: list[str] = []
    out: list[dict[str, Any]] = []
    for msg in msgs:
        if msg.role == "system":
            system_parts.append(msg.content)
            continue
        if msg.is_tool_result:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": msg.tool_call_id,
                "content": msg.content,
            }
            if msg.is_error:
                block["is_error"] = True
            if out and out[-1]["role"] == "user" and _all_tool_results(out[-1]["content"]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        blocks: list[dict[str, Any]] = []
        if msg.content:
            blocks.append({"type": "text", "text": msg.content})
        for tc in msg.tool_calls:
            try:
                parsed: Any = json.loads(tc.arguments) if tc.arguments else {}
            except json.JSONDecodeError:
                parsed = {"raw_arguments": tc.arguments}
            blocks.append({"type": "tool_use", "id": tc.id, "name": tc.name, "input": parsed})
        role = "assistant" if msg.role == "assistant" else "user"
        out.append({"role": role, "content": blocks or [{"type": "text", "text": ""}]})
    return "\n\n".join(system_parts), out


def _all_tool_results(blocks: Any) -> bool:
    return isinstance(blocks, list) and all(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in blocks
    )


def messages_from_anthropic(
    raws: Iterable[Mapping[str, Any]], system: str | None = None
) -> list[Message]:
    """Parse Anthropic messages; each ``tool_result`` block becomes its own tool-result message."""
    out: list[Message] = []
    if system:
        out.append(Message(role="system", content=system))
    for raw in raws:
        role = raw.get("role")
        if role not in ("user", "assistant"):
            raise ValueError(f"unknown Anthropic message role {role!r}; expected user/assistant")
        content = raw.get("content")
        if isinstance(content, str) or content is None:
            out.append(Message(role=role, content=content or ""))
            continue
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in content:
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(block.get("id", "")),
                        name=str(block.get("name", "")),
                        arguments=json.dumps(block.get("input", {}), ensure_ascii=False),
                    )
                )
            elif kind == "tool_result":
                if texts:
                    out.append(Message(role="user", content="\n".join(texts)))
                    texts = []
                out.append(
                    Message(
                        role="tool",
                        content=_text_of(block.get("content")),
                        tool_call_id=str(block.get("tool_use_id", "")),
                        is_error=bool(block.get("is_error", False)),
                    )
                )
        if texts or calls:
            out.append(Message(role=role, content="\n".join(texts), tool_calls=tuple(calls)))
    return out
