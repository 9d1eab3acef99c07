"""OpenHands SDK conversation folders → one session per folder.

A conversation folder holds ``event_service/base_state.json`` (the agent: model, context size,
condenser) and ``event_service/events/event-NNNNN-<uuid>.json``, one event per file, numbered in
order. The folder is one session (a folder import reads it whole, never file by file). Events:
``SystemPromptEvent`` (the system message), ``MessageEvent`` (user or agent text, extended
content included), ``ActionEvent`` (a tool call; the calls of one ``llm_response_id`` share one
assistant message, the ``thought`` its text; usage from the agent's ``token_usages`` in
``base_state.json`` with that response id), ``ObservationEvent`` / ``AgentErrorEvent`` /
``UserRejectObservation`` (tool results), ``CondensationRequest`` and ``Condensation``
(``forgotten_event_ids``, ``summary``, ``summary_offset``: a native compaction, see
``openhands_events``). Other events are in the view but no message (counted in metadata).

A missing event file (a gap in the numbers) or one that is not a JSON event is one issue naming
that file (and its line); the other events are still imported. Metadata keys: ``source_sha256``
(of every file's name and content, in order), ``events``, ``skipped_events`` (kind → count),
``condenser`` (its kind, ``max_size`` and ``keep_first``) when ``base_state.json`` says.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from analytics.errors import TranscriptError
from analytics.importers.native import usage_after_compactions
from analytics.importers.openhands_events import Condensed, Conversation, usage_of
from analytics.importers.reading import (
    Figures,
    RecordError,
    Reporter,
    as_dict,
    describe,
    event_service,
    file_sha256,
    load_json_document,
    parse_timestamp,
    sub,
)
from analytics.importers.session import ImportedSession, TurnUsage
from compactor import Message, ToolCall

_EVENT_FILE = re.compile(r"^event-(\d+)-.*\.json$")
_RESULTS = ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation")


def iter_openhands_sdk_sessions(
    path: Path, report: Reporter, document: object | None = None
) -> Iterator[ImportedSession]:
    """The one session of a conversation folder."""
    del document
    service = event_service(path)
    if service is None:
        raise TranscriptError(
            str(path),
            "not an OpenHands conversation folder (no event_service/base_state.json and no "
            "event_service/events/); pass the conversation's folder",
        )
    state = _base_state(service, report)
    events, digest = _events(service, report)
    figures = Figures("agent.llm")
    tokens = _token_usages(state, figures)
    conv = Conversation(context_window=figures.count(_llm(state), "max_input_tokens") or 0)
    if figures.problem:
        Reporter(service / "base_state.json", report.sink)(figures.problem)
    skipped: Counter[str] = Counter()
    for number, file, event in events:
        try:
            _event(conv, event, number, tokens, skipped)
        except RecordError as exc:
            Reporter(file, report.sink)(f"{exc}; event skipped")
    if not conv.messages:
        report("no messages among the conversation's events; nothing imported")
        return
    yield _session(path, service, state, events, digest, conv, skipped)


def _base_state(service: Path, report: Reporter) -> dict[str, Any]:
    file = service / "base_state.json"
    if not file.is_file():
        return {}  # optional: only the model and condenser settings come from it
    try:
        doc = load_json_document(file, Reporter(file, report.sink))
    except TranscriptError as exc:
        Reporter(file, report.sink)(f"{exc.reason}; the events are imported without it", exc.line)
        return {}
    return doc if isinstance(doc, dict) else {}


def _events(service: Path, report: Reporter) -> tuple[list[tuple[int, Path, Any]], str]:
    """``(number, file, event)`` in order, and the digest of every file read; missing and
    unreadable event files are reported."""
    folder = service / "events"
    numbered = sorted(
        (int(m.group(1)), f)
        for f in (folder.iterdir() if folder.is_dir() else ())
        if (m := _EVENT_FILE.match(f.name)) and f.is_file()
    )
    digest = hashlib.sha256()
    state = service / "base_state.json"
    if state.is_file():
        digest.update(_fingerprint(state))
    out: list[tuple[int, Path, Any]] = []
    expected = 0
    for number, file in numbered:
        if number > expected:
            report(_gap(folder, expected, number))
        expected = number + 1
        digest.update(_fingerprint(file))
        try:
            out.append((number, file, load_json_document(file, Reporter(file, report.sink))))
        except TranscriptError as exc:
            Reporter(file, report.sink)(f"{exc.reason}; event skipped", exc.line)
    return out, digest.hexdigest()


def _fingerprint(file: Path) -> bytes:
    """One file's part of the folder's ``source_sha256``: its name and content hash."""
    try:
        sha = file_sha256(file)
    except TranscriptError:
        sha = "unreadable"  # reported when the file is loaded
    return f"{file.name}\0{sha}\n".encode()


def _gap(folder: Path, first: int, after: int) -> str:
    """The issue for event files ``first`` .. ``after - 1`` missing from ``folder``."""
    missing = f"event-{first:05d}-*.json"
    if after - 1 > first:
        missing += f" to event-{after - 1:05d}-*.json"
    return (
        f"{missing} missing from {folder}: the event files are numbered in order and the next "
        f"one found is event-{after:05d}; the events on both sides are imported, the missing "
        "ones are not (copy the whole conversation folder to import them)"
    )


def _event(
    conv: Conversation,
    raw: Any,
    number: int,
    tokens: dict[str, TurnUsage],
    skipped: Counter[str],
) -> None:
    event = as_dict(raw, "event")
    kind = event.get("kind")
    key = str(event.get("id") or f"#{number}")
    if kind == "SystemPromptEvent":
        prompt = event.get("system_prompt")
        conv.message(key, Message(role="system", content=_text(prompt)))
    elif kind == "MessageEvent":
        conv.message(key, _message(event))
    elif kind == "ActionEvent":
        _call(conv, key, event, tokens)
    elif kind in _RESULTS and isinstance(event.get("tool_call_id"), str):
        conv.message(key, _result(event))
    elif kind == "CondensationRequest":
        conv.requested()
    elif kind == "Condensation":
        conv.condensed(_condensed(key, event, number))
    else:
        conv.other(key)
        skipped[str(kind)] += 1


def _message(event: dict[str, Any]) -> Message:
    llm = as_dict(event.get("llm_message"), "llm_message")
    role = llm.get("role")
    if role not in ("user", "assistant", "system"):
        raise RecordError(
            f"llm_message.role: expected user, assistant or system, got {describe(role)}"
        )
    texts = [_text(llm.get("content")), _text(event.get("extended_content"))]
    return Message(role=role, content="\n".join(t for t in texts if t))


def _call(
    conv: Conversation, key: str, event: dict[str, Any], tokens: dict[str, TurnUsage]
) -> None:
    call = sub(event, "tool_call")
    function = sub(call, "function")
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(event.get("action"), ensure_ascii=False, default=str)
    call_id = event.get("tool_call_id") or call.get("id") or key
    name = event.get("tool_name") or function.get("name") or "tool"
    response = event.get("llm_response_id")
    response_id = response if isinstance(response, str) else None
    tool_call = ToolCall(id=str(call_id), name=str(name), arguments=arguments)
    usage = tokens.get(response_id) if response_id else None
    conv.call(key, response_id, _text(event.get("thought")), tool_call, usage)


def _result(event: dict[str, Any]) -> Message:
    obs = sub(event, "observation")
    text = _text(obs.get("content")) or _text(obs.get("output")) or _text(obs.get("message"))
    text = text or _text(event.get("error")) or _text(event.get("rejection_reason"))
    if not text and obs:
        text = json.dumps(obs, ensure_ascii=False, default=str)
    meta = sub(obs, "metadata")
    code = meta.get("exit_code")
    error = obs.get("error")
    failed = (
        event.get("kind") != "ObservationEvent"
        or obs.get("is_error") is True
        or error is True
        or (isinstance(error, str) and bool(error))
        or (isinstance(code, int) and code > 0)
    )
    return Message(role="tool", content=text, tool_call_id=event["tool_call_id"], is_error=failed)


def _condensed(key: str, event: dict[str, Any], number: int) -> Condensed:
    ids = event.get("forgotten_event_ids")
    if not isinstance(ids, list):
        raise RecordError(f"Condensation.forgotten_event_ids: expected a list, got {describe(ids)}")
    offset, summary = event.get("summary_offset"), event.get("summary")
    return Condensed(
        key=key,
        forgotten={str(x) for x in ids},
        summary=summary if isinstance(summary, str) else None,
        summary_offset=offset if isinstance(offset, int) and offset >= 0 else None,
        line=number,
        timestamp=parse_timestamp(event.get("timestamp")),
    )


def _text(value: object) -> str:
    """Text from a string, a ``{"text"}`` block or a list of them."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return value["text"] if isinstance(value.get("text"), str) else ""
    if isinstance(value, list):
        return "\n".join(t for t in map(_text, value) if t)
    return ""


def _llm(state: dict[str, Any]) -> dict[str, Any]:
    agent = sub(state, "agent")
    llm = agent.get("llm")
    return llm if isinstance(llm, dict) else {}


def _token_usages(state: dict[str, Any], figures: Figures) -> dict[str, TurnUsage]:
    """Usage per LLM response id, from every service's ``token_usages`` in the base state."""
    stats = sub(state, "stats")
    services = stats.get("service_to_metrics")
    out: dict[str, TurnUsage] = {}
    for name, metrics in services.items() if isinstance(services, dict) else ():
        usages = metrics.get("token_usages") if isinstance(metrics, dict) else None
        for i, raw in enumerate(usages if isinstance(usages, list) else ()):
            figures.where = f"stats.service_to_metrics.{name}.token_usages[{i}]"
            usage = usage_of(raw, figures)
            if usage is not None and isinstance(raw.get("response_id"), str):
                out[raw["response_id"]] = usage
    figures.where = "agent.llm"
    return out


def _session(
    path: Path,
    service: Path,
    state: dict[str, Any],
    events: list[tuple[int, Path, Any]],
    digest: str,
    conv: Conversation,
    skipped: Counter[str],
) -> ImportedSession:
    agent = sub(state, "agent")
    condenser = sub(agent, "condenser")
    state_id = state.get("id")
    first = events[0][2] if events and isinstance(events[0][2], dict) else {}
    metadata: dict[str, Any] = {
        "source_sha256": digest,
        "events": len(events),
        "skipped_events": dict(sorted(skipped.items())),
    }
    if condenser:
        metadata["condenser"] = {
            k: condenser[k] for k in ("kind", "max_size", "keep_first") if k in condenser
        }
    model = _llm(state).get("model")
    return ImportedSession(
        session_id=state_id
        if isinstance(state_id, str) and state_id
        else f"{service.parent.name}-{digest[:8]}",
        source_path=str(path),
        format="openhands-sdk",
        messages=conv.messages,
        usage=usage_after_compactions(conv.usage, conv.compactions),
        agent="openhands",
        model=model if isinstance(model, str) else None,
        started_at=parse_timestamp(first.get("timestamp")),
        metadata=metadata,
        compactions=conv.compactions,
    )
