"""OpenHands V0 event lists (the agent controller's trajectory export) → one session.

The file is a JSON list of events, or ``{"trajectory": [events]}``. Each event has ``id``,
``timestamp``, ``source`` (``agent``, ``user``, ``environment``) and an ``action`` or an
``observation``. The ``system`` action is the system message; ``message`` actions are user or
agent text; actions with ``tool_call_metadata`` are tool calls (the calls of one model response,
``model_response.id``, share one assistant message, its text the action's ``thought`` or the
response's own text; the response's ``usage`` is the turn's); observations with
``tool_call_metadata`` are the tool results (``is_error`` for ``error`` observations and non-zero
exit codes). A ``condensation`` action (``forgotten_event_ids``, or
``forgotten_events_start_id``..``forgotten_events_end_id``, ``summary``, ``summary_offset``) is
a native compaction (``openhands_events``). Everything else (state changes, recalls and their
workspace context, null observations) is in the view but no message, counted in metadata. A bad
event is reported with its position and id and skipped.

Metadata keys: ``source_sha256``, ``events``, ``skipped_events`` (kind → count).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Container, Iterator
from pathlib import Path
from typing import Any

from analytics.errors import TranscriptError
from analytics.importers.native import usage_after_compactions
from analytics.importers.openhands_events import Condensed, Conversation, IdRange, usage_of
from analytics.importers.reading import (
    Figures,
    RecordError,
    Reporter,
    SourceFile,
    as_dict,
    describe,
    load_json_document,
    opt_str,
    parse_timestamp,
    sub,
)
from analytics.importers.session import ImportedSession
from compactor import Message, ToolCall

SOURCES = ("agent", "user", "environment")


def event_list(doc: object) -> list[Any] | None:
    """The events of a V0 document (a list, or ``{"trajectory": list}``), if it is one."""
    events = doc.get("trajectory") if isinstance(doc, dict) else doc
    if not isinstance(events, list) or not events or not isinstance(events[0], dict):
        return None
    first = events[0]
    if first.get("source") in SOURCES and ("action" in first or "observation" in first):
        return events
    return None


def iter_openhands_v0_sessions(
    path: Path, report: Reporter, document: object | None = None
) -> Iterator[ImportedSession]:
    """The one session of a V0 event list."""
    src = SourceFile.of(path, report)
    doc = load_json_document(path, report) if document is None else document
    events = event_list(doc)
    if events is None:
        raise TranscriptError(
            str(path),
            f"expected an OpenHands event list (a JSON list of events with 'source' and "
            f"'action' or 'observation', or {{'trajectory': [...]}}), got {describe(doc)}",
        )
    conv = Conversation()
    skipped: Counter[str] = Counter()
    model: str | None = None
    for i, raw in enumerate(events):
        where = f"event [{i}]"
        figures = Figures(where)
        try:
            event = as_dict(raw, where)
            where = f"event [{i}] (id {event.get('id')!r})"
            answered = _event(conv, event, i, skipped, figures)
            model = model or answered
        except RecordError as exc:
            report(f"{where}: {exc}; event skipped")
        if figures.problem:
            report(f"{where}: {figures.problem}")
    if not conv.messages:
        report("no messages among the events; nothing imported")
        return
    first = events[0] if isinstance(events[0], dict) else {}
    yield ImportedSession(
        session_id=src.key,
        source_path=str(path),
        format="openhands-v0",
        messages=conv.messages,
        usage=usage_after_compactions(conv.usage, conv.compactions),
        agent="openhands",
        model=model,
        started_at=parse_timestamp(first.get("timestamp")),
        metadata={
            "source_sha256": src.sha256,
            "events": len(events),
            "skipped_events": dict(sorted(skipped.items())),
        },
        compactions=conv.compactions,
    )


def _event(
    conv: Conversation, event: dict[str, Any], i: int, skipped: Counter[str], figures: Figures
) -> str | None:
    """Feed one event to the conversation; the model that answered, if the event says (a bad
    figure is None, named in ``figures``)."""
    key = str(event.get("id", f"#{i}"))
    _window(conv, event, figures)
    action, observation = event.get("action"), event.get("observation")
    args = sub(event, "args")
    meta = event.get("tool_call_metadata")
    if action == "condensation":
        conv.condensed(_condensed(key, args, i, event))
    elif action == "condensation_request":
        conv.requested()
    elif isinstance(meta, dict) and action is not None:
        return _call(conv, key, event, as_dict(meta, "tool_call_metadata"), args, figures)
    elif isinstance(meta, dict) and observation is not None:
        conv.message(key, _result(event, as_dict(meta, "tool_call_metadata")))
    elif action == "system":
        conv.message(key, Message(role="system", content=_content(args, event)))
    elif action == "message":
        role = "user" if event.get("source") == "user" else "assistant"
        conv.message(key, Message(role=role, content=_content(args, event)))
    else:
        conv.other(key)
        skipped[str(action or observation)] += 1
    return None


def _call(
    conv: Conversation,
    key: str,
    event: dict[str, Any],
    meta: dict[str, Any],
    args: dict[str, Any],
    figures: Figures,
) -> str | None:
    call_id = opt_str(meta, "tool_call_id", "tool_call_metadata") or key
    name = opt_str(meta, "function_name", "tool_call_metadata") or str(event.get("action"))
    response = sub(meta, "model_response")
    said = _response_message(response)
    arguments = next(
        (
            c["function"]["arguments"]
            for c in said.get("tool_calls") or []
            if isinstance(c, dict)
            and c.get("id") == call_id
            and isinstance(c.get("function"), dict)
            and isinstance(c["function"].get("arguments"), str)
        ),
        None,
    )
    if arguments is None:
        plain = {k: v for k, v in args.items() if k != "thought"}
        arguments = json.dumps(plain, ensure_ascii=False, default=str)
    thought = args.get("thought") if isinstance(args.get("thought"), str) else ""
    text = thought or (said.get("content") if isinstance(said.get("content"), str) else "")
    response_id = response.get("id") if isinstance(response.get("id"), str) else None
    call = ToolCall(id=call_id, name=name, arguments=arguments)
    figures.where = "tool_call_metadata.model_response.usage"
    conv.call(key, response_id, text or "", call, usage_of(response.get("usage"), figures))
    model = response.get("model")
    return model if isinstance(model, str) else None


def _response_message(response: dict[str, Any]) -> dict[str, Any]:
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    message = first.get("message") if isinstance(first, dict) else None
    return message if isinstance(message, dict) else {}


def _result(event: dict[str, Any], meta: dict[str, Any]) -> Message:
    call_id = opt_str(meta, "tool_call_id", "tool_call_metadata") or str(event.get("cause"))
    extras = sub(event, "extras")
    metadata = sub(extras, "metadata")
    code = metadata.get("exit_code")
    failed = event.get("observation") == "error" or (isinstance(code, int) and code > 0)
    content = event.get("content")
    text = content if isinstance(content, str) else str(event.get("message") or "")
    return Message(role="tool", content=text, tool_call_id=call_id, is_error=failed)


def _content(args: dict[str, Any], event: dict[str, Any]) -> str:
    content = args.get("content")
    if isinstance(content, str):
        return content
    message = event.get("message")
    return message if isinstance(message, str) else ""


def _condensed(key: str, args: dict[str, Any], i: int, event: dict[str, Any]) -> Condensed:
    ids = args.get("forgotten_event_ids")
    start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
    forgotten: Container[str]
    if isinstance(ids, list):
        forgotten = {str(x) for x in ids}
    elif isinstance(start, int) and isinstance(end, int):
        forgotten = IdRange(start, end)
    else:
        raise RecordError(
            "condensation: neither 'forgotten_event_ids' nor 'forgotten_events_start_id' and "
            f"'forgotten_events_end_id' (got {describe(ids)}, {describe(start)}, {describe(end)})"
        )
    offset = args.get("summary_offset")
    summary = args.get("summary")
    return Condensed(
        key=key,
        forgotten=forgotten,
        summary=summary if isinstance(summary, str) else None,
        summary_offset=offset if isinstance(offset, int) and offset >= 0 else None,
        line=i,
        timestamp=parse_timestamp(event.get("timestamp")),
    )


def _window(conv: Conversation, event: dict[str, Any], figures: Figures) -> None:
    metrics = event.get("llm_metrics")
    usage = metrics.get("accumulated_token_usage") if isinstance(metrics, dict) else None
    where = "llm_metrics.accumulated_token_usage"
    window = figures.count(usage, "context_window", where)
    if window is not None and window > conv.context_window:
        conv.context_window = window
