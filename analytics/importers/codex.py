"""Codex rollout JSONL → one session, with Codex's own compactions.

A rollout holds items ``{"timestamp", "type", "payload"}``: ``session_meta`` (id, cwd, CLI
version, and in newer versions ``base_instructions``, the system prompt, which becomes the
system message), ``turn_context`` (the model), ``response_item`` (what the model saw and said),
``event_msg`` (UI events; only ``token_count`` is read) and ``compacted``. Response items become
messages: ``message`` items by role (``developer`` ones as user messages named ``developer``,
text blocks joined), ``function_call`` / ``custom_tool_call`` / ``local_shell_call`` as tool
calls on one assistant message per model response (its text and calls up to the next input),
their ``*_output`` items as tool results (``is_error`` when the output reports a non-zero exit
code); ``reasoning`` and ``ghost_snapshot`` items are not messages (counted in metadata).

Usage: a ``token_count`` whose ``total_token_usage`` changed reports one model call; its
``last_token_usage`` is attached to that call's assistant message (the response open when it
arrives, else the next one: Codex writes it before the response's items in some versions, after
in others): prompt = ``input_tokens`` (cached included), ``cache_read_tokens`` =
``cached_input_tokens``. Usage after the first compaction is ``prompt="view"``.

A ``compacted`` item is one native compaction (``codex_compactions``). Bad lines are reported
with their number and skipped. Metadata keys: ``source_sha256``, ``cwd``, ``cli_version``,
``originator``, ``model_provider``, ``skipped_items`` (item type → count).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from analytics.importers.codex_compactions import compaction_found
from analytics.importers.native import HarnessView, usage_after_compactions
from analytics.importers.reading import (
    Figures,
    RecordError,
    Reporter,
    SourceFile,
    as_dict,
    as_list,
    iter_json_lines,
    opt_str,
    parse_timestamp,
    req_str,
)
from analytics.importers.session import ImportedSession, NativeCompaction, TurnUsage
from compactor import Message, ToolCall

ITEM_TYPES = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_EXIT = re.compile(r"(?:^|\n)Exit code: (-?\d+)|\"exit_code\"\s*:\s*(-?\d+)")


@dataclass
class _Response:
    """One model response: its text and calls, and the usage of the call that produced it."""

    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: TurnUsage | None = None


@dataclass
class _Rollout:
    """What has been read so far."""

    src: SourceFile
    messages: list[Message] = field(default_factory=list)
    usage: list[TurnUsage] = field(default_factory=list)
    compactions: list[NativeCompaction] = field(default_factory=list)
    view: HarnessView = field(default_factory=HarnessView)
    meta: dict[str, Any] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    model: str | None = None
    response: _Response | None = None
    pending: TurnUsage | None = None
    """Usage reported before the items of its response (attached when the response opens)."""
    last_total: object = None
    last_prompt: int | None = None
    """The prompt size of the last call that reported one: Codex's size of its context."""
    context_window: int = 0
    measuring_after: bool = False
    """A compaction was just read: the next ``token_count`` with a zero prompt is Codex's own
    size of the context it left (its ``total_tokens``)."""

    def close(self) -> None:
        """End the open response: it becomes one assistant message (if it said anything)."""
        response, self.response = self.response, None
        if response is None or not (response.texts or response.calls):
            return
        if response.usage is not None:
            index = len(self.messages)
            self.usage.append(response.usage.model_copy(update={"message_index": index}))
        content = "\n".join(response.texts)
        self.messages.append(Message(role="assistant", content=content, tool_calls=response.calls))

    def open(self) -> _Response:
        if self.response is None:
            self.response = _Response(usage=self.pending)
            self.pending = None
        return self.response

    def add_input(self, message: Message) -> None:
        self.close()
        if not message.is_tool_result:
            self.pending = None  # a new prompt: usage not yet attached belonged to no response
        self.messages.append(message)


def iter_codex_sessions(
    path: Path, report: Reporter, document: object | None = None
) -> Iterator[ImportedSession]:
    """The one session of a rollout file."""
    del document  # JSON Lines: never parsed as one document
    rollout = _Rollout(SourceFile.of(path, report))
    for lineno, obj in iter_json_lines(path, report):
        try:
            _item(rollout, obj, lineno)
        except RecordError as exc:
            report(f"{exc}; line skipped", lineno)
    rollout.close()
    if not rollout.messages:
        report("no messages in the rollout; nothing imported")
        return
    yield _session(rollout)


def _item(rollout: _Rollout, obj: dict[str, Any], lineno: int) -> None:
    kind = obj.get("type")
    payload = as_dict(obj.get("payload"), "payload")
    if kind == "session_meta":
        _session_meta(rollout, payload)
    elif kind == "turn_context":
        rollout.model = rollout.model or opt_str(payload, "model", "payload")
    elif kind == "response_item":
        _response_item(rollout, payload)
    elif kind == "event_msg":
        if payload.get("type") == "token_count":
            _token_count(rollout, payload, lineno, parse_timestamp(obj.get("timestamp")))
    elif kind == "compacted":
        rollout.close()
        rollout.pending = None  # the compaction's own call is not a turn
        at = len(rollout.messages)
        found = compaction_found(
            rollout.messages,
            rollout.view.upto(at),
            payload,
            lineno=lineno,
            timestamp=parse_timestamp(obj.get("timestamp")),
            harness_tokens=rollout.last_prompt,
            context_window=rollout.context_window,
        )
        rollout.compactions.append(rollout.view.compacted(rollout.messages, at, found))
        rollout.measuring_after = True
    else:
        rollout.skipped[str(kind)] += 1


def _session_meta(rollout: _Rollout, payload: dict[str, Any]) -> None:
    rollout.meta = payload
    base = payload.get("base_instructions")
    text = base.get("text") if isinstance(base, dict) else None
    if isinstance(text, str) and text and not rollout.messages:
        rollout.messages.append(Message(role="system", content=text))


def _response_item(rollout: _Rollout, item: dict[str, Any]) -> None:
    kind = item.get("type")
    if kind == "message":
        role = req_str(item, "role", "payload")
        text = _text(item.get("content"), "payload.content")
        if role == "assistant":
            rollout.open().texts.append(text)
        else:
            name = None if role == "user" else role
            rollout.add_input(Message(role="user", content=text, name=name))
    elif kind in _CALLS:
        rollout.open().calls.append(_call(item, str(kind)))
    elif kind == "reasoning":
        rollout.open()  # part of the response (its usage may arrive now), not a message
        rollout.skipped["reasoning"] += 1
    elif kind in _OUTPUTS:
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        call_id = req_str(item, "call_id", "payload")
        exit_code = _exit_code(text)
        error = exit_code is not None and exit_code != 0
        rollout.add_input(Message(role="tool", content=text, tool_call_id=call_id, is_error=error))
    else:
        rollout.skipped[str(kind)] += 1


def _call(item: dict[str, Any], kind: str) -> ToolCall:
    call_id = opt_str(item, "call_id", "payload") or req_str(item, "id", "payload")
    if kind == "function_call":
        arguments = item.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        return ToolCall(id=call_id, name=req_str(item, "name", "payload"), arguments=arguments)
    if kind == "custom_tool_call":
        raw = json.dumps({"input": item.get("input")}, ensure_ascii=False)
        return ToolCall(id=call_id, name=req_str(item, "name", "payload"), arguments=raw)
    raw = json.dumps(item.get("action"), ensure_ascii=False)
    return ToolCall(id=call_id, name="local_shell", arguments=raw)


def _text(content: object, where: str) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for i, block in enumerate(as_list(content, where)):
        block = as_dict(block, f"{where}[{i}]")
        if isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


def _exit_code(output: str) -> int | None:
    m = _EXIT.search(output[:2000])
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


def _token_count(
    rollout: _Rollout, payload: dict[str, Any], lineno: int, at: datetime | None
) -> None:
    info = payload.get("info")
    if info is None:
        return  # rate limits only
    info = as_dict(info, "payload.info")
    figures = Figures("payload.info.last_token_usage")
    try:
        _count_call(rollout, info, figures, at)
    finally:
        if figures.problem:
            rollout.src.report(figures.problem, lineno)


def _count_call(
    rollout: _Rollout, info: dict[str, Any], figures: Figures, at: datetime | None = None
) -> None:
    """One ``token_count``'s call; a bad figure is None (``figures`` says which), and a call
    whose prompt is unreadable still counts, its size unknown."""
    window = figures.count(info, "model_context_window", "payload.info")
    rollout.context_window = window or rollout.context_window
    total = info.get("total_token_usage")
    last = as_dict(info.get("last_token_usage"), "payload.info.last_token_usage")
    if last.get("input_tokens") == 0:  # a reset after a compaction: no call (the total repeats)
        _measured_after(rollout, figures.count(last, "total_tokens"))
        rollout.last_total = total
        return
    if total == rollout.last_total:
        return  # Codex repeats the last call's count at each turn boundary
    rollout.last_total = total
    prompt = figures.count(last, "input_tokens")
    if not prompt and not figures.failed("input_tokens"):
        return
    rollout.measuring_after = False
    rollout.last_prompt = prompt
    usage = TurnUsage(
        message_index=0,
        input_tokens=prompt,
        output_tokens=figures.count(last, "output_tokens"),
        cache_read_tokens=figures.count(last, "cached_input_tokens"),
        at=at,  # the count is written as the call ends: as near its time as the rollout says
    )
    response = rollout.response
    if response is not None and response.usage is None:
        response.usage = usage
    else:
        rollout.pending = usage


def _measured_after(rollout: _Rollout, total: int | None) -> None:
    """Codex's size of the context its last compaction left (the count it writes right after,
    with no call: a zero prompt and the new context's ``total_tokens``), as that compaction's
    ``tokens_after`` from the harness."""
    if not rollout.measuring_after or not total or not rollout.compactions:
        return
    rollout.measuring_after = False
    last = rollout.compactions[-1]
    update = {"tokens_after": total, "tokens_after_source": "harness"}
    rollout.compactions[-1] = last.model_copy(update=update)


def _session(rollout: _Rollout) -> ImportedSession:
    src, meta = rollout.src, rollout.meta
    keys = ("cwd", "cli_version", "originator", "model_provider")
    metadata: dict[str, Any] = {
        "source_sha256": src.sha256,
        **{k: meta[k] for k in keys if isinstance(meta.get(k), str)},
        "skipped_items": dict(sorted(rollout.skipped.items())),
    }
    session_id = meta.get("id")
    return ImportedSession(
        session_id=session_id if isinstance(session_id, str) and session_id else src.key,
        source_path=str(src.path),
        format="codex",
        messages=rollout.messages,
        usage=usage_after_compactions(rollout.usage, rollout.compactions),
        agent="codex",
        model=rollout.model,
        started_at=parse_timestamp(meta.get("timestamp")),
        metadata=metadata,
        compactions=rollout.compactions,
    )
