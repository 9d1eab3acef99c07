"""OpenAI chat-format transcripts → sessions (also tau-bench run arrays).

Accepted shapes: a JSON list of messages (one session); a JSON object with ``messages`` (one
session); a JSON list of runs, each with ``traj`` or ``messages`` (tau-bench: one session per
run, id from ``task_id``/``trial``); JSON Lines of messages (one session for the file) or of
session objects (one session per line). A bad message is reported with its line (JSONL) or JSON
path (documents) and skipped; the rest of its session is kept. There is no per-message usage in
this format. Metadata keys: ``source_sha256``; for tau-bench runs ``task_id``, ``trial``,
``reward``.

``openai_message`` is also used by the SWE-agent and mini-swe-agent importers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from analytics.errors import TranscriptError
from analytics.importers.reading import (
    RecordError,
    Reporter,
    SourceFile,
    as_dict,
    as_list,
    describe,
    first_error,
    first_jsonl_objects,
    iter_json_lines,
    load_json_document,
    opt_str,
)
from analytics.importers.session import ImportedSession
from compactor import Message, from_openai

_ROLES = ("system", "user", "assistant", "tool", "function")
_RUN_FIELDS = ("task_id", "trial", "reward")


def openai_message(raw: object, where: str) -> Message:
    """One OpenAI chat message dict as a ``Message``; ``RecordError`` names the wrong field."""
    obj = as_dict(raw, where)
    role = obj.get("role")
    if role not in _ROLES:
        raise RecordError(
            f"{where}.role: expected one of {', '.join(_ROLES)}, got {describe(role)}"
        )
    content = obj.get("content")
    if content is not None and not isinstance(content, str | list):
        raise RecordError(
            f"{where}.content: expected text, a list of blocks or null, got {describe(content)}"
        )
    calls = obj.get("tool_calls")
    if calls is not None:
        for i, call in enumerate(as_list(calls, f"{where}.tool_calls")):
            call_obj = as_dict(call, f"{where}.tool_calls[{i}]")
            as_dict(call_obj.get("function"), f"{where}.tool_calls[{i}].function")
    try:
        return from_openai(obj)
    except ValidationError as exc:
        raise RecordError(f"{where}: {first_error(exc)}") from None
    except (ValueError, TypeError) as exc:
        raise RecordError(f"{where}: {exc}") from None


def iter_openai_sessions(
    path: Path, report: Reporter, document: object | None = None
) -> Iterator[ImportedSession]:
    """Sessions of one OpenAI-format file; ``document`` if the caller already parsed it."""
    src = SourceFile.of(path, report)
    if document is None and first_jsonl_objects(path):
        yield from _jsonl_sessions(src)
        return
    doc = load_json_document(path, report) if document is None else document
    yield from _document_sessions(src, doc)


def _document_sessions(src: SourceFile, doc: object) -> Iterator[ImportedSession]:
    if isinstance(doc, dict):
        if not isinstance(doc.get("messages"), list) and not isinstance(doc.get("traj"), list):
            raise TranscriptError(str(src.path), "JSON object without a 'messages' or 'traj' list")
        yield _run_session(src, doc, "", src.key, line=None)
        return
    if not isinstance(doc, list):
        raise TranscriptError(str(src.path), f"expected a JSON list or object, got {describe(doc)}")
    if doc and all(isinstance(x, dict) and "role" in x for x in doc[:3]):
        yield _session(src, src.key, _messages(src, doc, "", line=None))
        return
    for i, run in enumerate(doc):
        try:
            yield _run_session(src, as_dict(run, f"[{i}]"), f"[{i}]", f"{src.key}:{i}", line=None)
        except RecordError as exc:
            src.report(f"{exc}; run skipped")


def _jsonl_sessions(src: SourceFile) -> Iterator[ImportedSession]:
    loose: list[Message] = []
    for lineno, obj in iter_json_lines(src.path, src.report):
        if "role" in obj:
            try:
                loose.append(openai_message(obj, "message"))
            except RecordError as exc:
                src.report(f"{exc}; message skipped", lineno)
            continue
        try:
            yield _run_session(src, obj, "", f"{src.key}:{lineno}", line=lineno)
        except RecordError as exc:
            src.report(f"{exc}; line skipped", lineno)
    if loose:
        yield _session(src, src.key, loose)


def _run_session(
    src: SourceFile, run: dict[str, Any], where: str, fallback_id: str, line: int | None
) -> ImportedSession:
    """One session object: ``{"traj": [...]}`` (tau-bench) or ``{"messages": [...]}``."""
    key = "traj" if "traj" in run else "messages"
    label = f"{where}.{key}" if where else key
    messages = _messages(src, as_list(run.get(key), label), label, line)
    owner = where or "session"
    session_id = opt_str(run, "session_id", owner) or opt_str(run, "id", owner)
    model = opt_str(run, "model", owner)
    if key != "traj":
        return _session(src, session_id or fallback_id, messages, model=model)
    metadata = {f: run[f] for f in _RUN_FIELDS if isinstance(run.get(f), int | float | str)}
    if session_id is None and "task_id" in metadata:
        session_id = f"{src.key}:task-{metadata['task_id']}-trial-{metadata.get('trial', 0)}"
    return _session(
        src, session_id or fallback_id, messages, agent="tau-bench", model=model, metadata=metadata
    )


def _messages(src: SourceFile, raws: list[Any], where: str, line: int | None) -> list[Message]:
    out: list[Message] = []
    for i, raw in enumerate(raws):
        try:
            out.append(openai_message(raw, f"{where}[{i}]"))
        except RecordError as exc:
            src.report(f"{exc}; message skipped", line)
    return out


def _session(
    src: SourceFile,
    session_id: str,
    messages: list[Message],
    *,
    agent: str | None = None,
    model: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> ImportedSession:
    return ImportedSession(
        session_id=session_id,
        source_path=str(src.path),
        format="openai",
        messages=messages,
        agent=agent,
        model=model,
        metadata={"source_sha256": src.sha256, **(metadata or {})},
    )
