"""SWE-agent ``.traj`` files → one session from ``history`` (the prompt the model saw).

Function-calling variants carry ``tool_calls`` on assistant messages and ``role: tool`` results
with ``tool_call_ids``; they become tool calls and tool-result messages. The other variants have
no call ids: the action is a fenced command in the assistant text and the observation comes back
as the next user message; those stay plain assistant and user messages (no synthetic pairs).
``is_demo`` messages (in-context demonstrations) are kept, since they are part of the prompt.
There is no per-message usage; ``info.model_stats`` totals go to metadata.

Metadata keys: ``source_sha256``; ``function_calling`` (the file has tool-call ids);
``actions`` (steps in ``trajectory``: what SOURCES.md counts as tool calls when there are no
ids); ``observations`` (non-demo user messages after the task, i.e. results without ids);
``demo_messages``; ``exit_status``; ``model_stats``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from analytics.errors import TranscriptError
from analytics.importers.openai_chat import openai_message
from analytics.importers.reading import (
    RecordError,
    Reporter,
    SourceFile,
    as_dict,
    as_list,
    describe,
    load_json_object,
)
from analytics.importers.session import ImportedSession
from compactor import Message


def iter_swe_agent_sessions(
    path: Path, report: Reporter, document: object | None = None
) -> Iterator[ImportedSession]:
    """The one session of a ``.traj`` file; ``document`` if the caller already parsed it."""
    src = SourceFile.of(path, report)
    doc = load_json_object(path, document, report)
    history = doc.get("history")
    if not isinstance(history, list):
        raise TranscriptError(
            str(path), f"'history' should be a list of messages, got {describe(history)}"
        )
    messages: list[Message] = []
    demos = observations = 0
    seen_task = False
    for i, raw in enumerate(history):
        try:
            msg, is_demo = _history_message(raw, f"history[{i}]")
        except RecordError as exc:
            report(f"{exc}; message skipped")
            continue
        messages.append(msg)
        demos += is_demo
        if msg.role == "user" and not msg.is_tool_result and not is_demo:
            observations += seen_task
            seen_task = True
    yield ImportedSession(
        session_id=src.key,
        source_path=str(path),
        format="swe-agent",
        messages=messages,
        agent="swe-agent",
        model=_model_name(doc),
        metadata=_metadata(src, doc, messages, demos, observations),
    )


def _history_message(raw: object, where: str) -> tuple[Message, bool]:
    obj = as_dict(raw, where)
    is_demo = bool(obj.get("is_demo"))
    if obj.get("role") == "tool" and "tool_call_id" not in obj:
        ids = as_list(obj.get("tool_call_ids"), f"{where}.tool_call_ids")
        if not ids or not isinstance(ids[0], str):
            raise RecordError(f"{where}.tool_call_ids: expected a list of call ids, got {ids!r}")
        obj = {**obj, "tool_call_id": ids[0]}
    keep = {
        k: obj[k] for k in ("role", "content", "tool_calls", "tool_call_id", "name") if k in obj
    }
    return openai_message(keep, where), is_demo


def _metadata(
    src: SourceFile, doc: dict[str, Any], messages: list[Message], demos: int, observations: int
) -> dict[str, Any]:
    raw_info = doc.get("info")
    info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
    trajectory = doc.get("trajectory")
    function_calling = any(m.tool_calls for m in messages)
    actions = (
        len(trajectory)
        if isinstance(trajectory, list)
        else sum(1 for m in messages if m.role == "assistant")
    )
    return {
        "source_sha256": src.sha256,
        "function_calling": function_calling,
        "actions": actions,
        "observations": observations,
        "demo_messages": demos,
        "exit_status": info.get("exit_status"),
        "model_stats": info.get("model_stats"),
    }


def _model_name(doc: dict[str, Any]) -> str | None:
    """``replay_config.agent.model.name`` when present (newer files); older files do not say."""
    config = doc.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    try:
        name = as_dict(as_dict(as_dict(config, "").get("agent"), "").get("model"), "").get("name")
    except RecordError:
        return None
    return name if isinstance(name, str) else None
