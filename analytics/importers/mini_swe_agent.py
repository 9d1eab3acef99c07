"""mini-swe-agent trajectories (``*.traj.json``) → one session from ``messages``.

Messages are OpenAI chat format. The final ``role: exit`` message is not a chat message: it goes
to metadata (``exit``: its content, exit status and submission). Each assistant message's usage
comes from ``extra.response.usage`` (``prompt_tokens`` as the prompt size, ``completion_tokens``,
cached tokens from ``prompt_tokens_details.cached_tokens`` or ``prompt_cache_hit_tokens``).
``reasoning_content`` (deepseek-reasoner) is not put in the context: the model does not see it
again on the next call.

Metadata keys: ``source_sha256``; ``instance_id``; ``exit`` (if present); ``mini_version``;
``model_stats``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analytics.errors import TranscriptError
from analytics.importers.openai_chat import openai_message
from analytics.importers.reading import (
    Figures,
    RecordError,
    Reporter,
    SourceFile,
    as_dict,
    describe,
    load_json_object,
    opt_str,
)
from analytics.importers.session import ImportedSession, TurnUsage
from compactor import Message

_KEEP = ("role", "content", "tool_calls", "tool_call_id", "name")


def iter_mini_swe_agent_sessions(
    path: Path, report: Reporter, document: object | None = None
) -> Iterator[ImportedSession]:
    """The one session of a trajectory file; ``document`` if the caller already parsed it."""
    src = SourceFile.of(path, report)
    doc = load_json_object(path, document, report)
    raws = doc.get("messages")
    if not isinstance(raws, list):
        raise TranscriptError(str(path), f"'messages' should be a list, got {describe(raws)}")
    messages: list[Message] = []
    usage: list[TurnUsage] = []
    metadata: dict[str, Any] = {"source_sha256": src.sha256}
    for i, raw in enumerate(raws):
        where = f"messages[{i}]"
        try:
            obj = as_dict(raw, where)
            if obj.get("role") == "exit":
                metadata["exit"] = _exit(obj)
                continue
            msg = openai_message({k: obj[k] for k in _KEEP if k in obj}, where)
        except RecordError as exc:
            report(f"{exc}; message skipped")
            continue
        if msg.role == "assistant":
            turn = _usage(obj, where, len(messages), report)
            if turn is not None:
                usage.append(turn)
        messages.append(msg)
    instance = _instance(doc)
    yield ImportedSession(
        session_id=f"{instance}-{src.sha256[:8]}" if instance else src.key,
        source_path=str(path),
        format="mini-swe-agent",
        messages=messages,
        usage=usage,
        agent="mini-swe-agent",
        model=_model(doc),
        started_at=_started(raws),
        metadata={**metadata, **_info(doc)},
    )


def _usage(obj: dict[str, Any], where: str, index: int, report: Reporter) -> TurnUsage | None:
    extra = obj.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    raw = response.get("usage") if isinstance(response, dict) else None
    if raw is None:
        return None
    where = f"{where}.extra.response.usage"
    try:
        usage = as_dict(raw, where)
    except RecordError as exc:
        report(f"{exc}; usage ignored, the message is kept")
        return None
    figures = Figures(where)
    details = usage.get("prompt_tokens_details")
    cached = figures.count(details, "cached_tokens", f"{where}.prompt_tokens_details")
    found = TurnUsage(
        message_index=index,
        input_tokens=figures.count(usage, "prompt_tokens"),
        output_tokens=figures.count(usage, "completion_tokens"),
        cache_read_tokens=cached
        if cached is not None
        else figures.count(usage, "prompt_cache_hit_tokens"),
    )
    if figures.problem:
        report(figures.problem)
    return found


def _exit(obj: dict[str, Any]) -> dict[str, Any]:
    raw_extra = obj.get("extra")
    extra: dict[str, Any] = raw_extra if isinstance(raw_extra, dict) else {}
    content = obj.get("content")
    return {
        "content": content if isinstance(content, str) else "",
        "exit_status": extra.get("exit_status"),
        "submission": extra.get("submission"),
    }


def _started(raws: list[Any]) -> datetime | None:
    """The first message timestamp (``extra.timestamp``, unix seconds), if any."""
    for raw in raws:
        extra = raw.get("extra") if isinstance(raw, dict) else None
        stamp = extra.get("timestamp") if isinstance(extra, dict) else None
        if isinstance(stamp, int | float) and not isinstance(stamp, bool):
            return datetime.fromtimestamp(stamp, UTC)
    return None


def _instance(doc: dict[str, Any]) -> str | None:
    try:
        return opt_str(doc, "instance_id", "trajectory")
    except RecordError:
        return None


def _info(doc: dict[str, Any]) -> dict[str, Any]:
    info = doc.get("info")
    out: dict[str, Any] = {"instance_id": _instance(doc)}
    if isinstance(info, dict):
        out["mini_version"] = info.get("mini_version")
        out["model_stats"] = info.get("model_stats")
    return out


def _model(doc: dict[str, Any]) -> str | None:
    info = doc.get("info")
    config = info.get("config") if isinstance(info, dict) else None
    model = config.get("model") if isinstance(config, dict) else None
    name = model.get("model_name") if isinstance(model, dict) else None
    return name if isinstance(name, str) else None
