"""Claude Code session JSONL → the main chain and each sub-agent (side) chain as sessions.

Lines are read one at a time and converted at once, so a bad line is reported with its number
and skipped while every other line still comes through; the chains are only known at the end of
the file, so the converted lines (not the raw JSON) are held until then. ``parentUuid`` links
lines into trees (through progress and system lines too, and across a ``compact_boundary`` by
its ``logicalParentUuid``); where a tree branches (an edited or retried turn) the branch holding the
newest line is the conversation, and lines on abandoned branches are counted, not imported.
Parallel tool calls are not branches: CLI 2.x links each parallel result to the line holding its
call, and such lines are kept (see ``claude_code_chains``). A line whose ``isSidechain`` differs
from its parent's starts a new chain. All main-chain (``isSidechain`` false) trees form one
session; each side-chain tree (a Task sub-agent) is a separate child session with
``parent_session_id`` set. Assistant lines sharing ``message.id`` are one API response and
become one assistant ``Message`` (text blocks joined, ``tool_use`` blocks as tool calls,
thinking dropped); ``tool_result`` blocks become tool-result messages with ``is_error`` kept.
The final usage of each response is attached to its assistant message: prompt size =
``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` (``prompt="view"``
after Claude Code's first compaction of the chain). Claude Code's own compactions become the
session's ``compactions`` (``claude_code_compactions``); their summaries are not messages, so
``messages`` is the original history the harness saw before compacting, then what came after.

Metadata keys: ``source_sha256``; ``source_lines`` (the user and assistant JSONL lines in the
session, compact summaries included: what SOURCES.md counts as messages); ``off_branch_lines``;
``summaries`` (titles from ``summary`` lines, main session only); ``cwd``, ``version``,
``git_branch``; ``starts_mid_session`` (main session: its first line's parent is not in the
file, so the history before it is missing); for side chains ``sidechain`` (true),
``parent_tool_call_id`` and ``subagent_type`` when the Task call that started it is found in
the main chain.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analytics.importers.claude_code_chains import Chain, Line, build_chains
from analytics.importers.claude_code_compactions import (
    Mark,
    boundary_of,
    compactions_of,
    summary_of,
)
from analytics.importers.native import usage_after_compactions
from analytics.importers.reading import (
    Figures,
    RecordError,
    Reporter,
    SourceFile,
    as_dict,
    as_list,
    iter_json_lines,
    opt_bool,
    opt_str,
    parse_timestamp,
    req_str,
)
from analytics.importers.session import ImportedSession, TurnUsage
from compactor import Message, ToolCall

_TASK_TOOLS = ("Task", "Agent")


def iter_claude_code_sessions(
    path: Path, report: Reporter, document: object | None = None
) -> Iterator[ImportedSession]:
    """The main session of the file (if any), then one child session per side chain."""
    del document  # JSON Lines: never parsed as one document
    src = SourceFile.of(path, report)
    lines: list[Line] = []
    summaries: list[str] = []
    for lineno, obj in iter_json_lines(path, report):
        try:
            line = _parse_line(obj, lineno)
        except RecordError as exc:
            report(f"{exc}; line skipped", lineno)
            continue
        if line is not None:
            lines.append(line)
            if line.problem:
                report(line.problem, lineno)
        elif obj.get("type") == "summary" and isinstance(obj.get("summary"), str):
            summaries.append(obj["summary"])
    if not any(line.is_message for line in lines):
        report("no user or assistant lines; nothing imported")
        return
    yield from _sessions(src, lines, summaries)


def _sessions(
    src: SourceFile, lines: list[Line], summaries: list[str]
) -> Iterator[ImportedSession]:
    forest = build_chains(lines)
    if forest.unreachable:
        src.report(
            f"{forest.unreachable} lines unreachable from any root (parentUuid cycle); skipped"
        )
    if forest.duplicates:
        src.report(f"{forest.duplicates} lines repeat an earlier line's uuid; the first kept")
    main = [chain for chain in forest.chains if not chain.lines[0].sidechain]
    main_id = next((ln.session_id for ln in lines if ln.session_id), None) or src.key
    task_calls: dict[str, tuple[str, str | None]] = {}
    if main:
        root = main[0].lines[0]
        main_extra: dict[str, Any] = {
            "summaries": summaries,
            "off_branch_lines": sum(chain.off_branch for chain in main),
            # its first line answers a line the file does not hold: a resumed or cut session
            "starts_mid_session": root.parent is not None
            and all(ln.uuid != root.parent for ln in lines),
        }
        main_lines = [ln for chain in main for ln in chain.lines]
        session = _session(src, main_id, main_lines, None, main_extra)
        task_calls = _task_prompts(session.messages)
        yield session
    for chain in forest.chains:
        if chain.lines[0].sidechain:
            yield _side_session(src, main_id, chain, task_calls)


def _side_session(
    src: SourceFile, main_id: str, chain: Chain, task_calls: dict[str, tuple[str, str | None]]
) -> ImportedSession:
    extra: dict[str, Any] = {"sidechain": True, "off_branch_lines": chain.off_branch}
    link = task_calls.get(_first_user_text(chain.lines))
    if link is not None:
        extra["parent_tool_call_id"], extra["subagent_type"] = link
    session_id = f"{main_id}:sidechain:{chain.lines[0].uuid}"
    return _session(src, session_id, chain.lines, main_id, extra)


@dataclass
class _Response:
    """One assistant API response, possibly spread over several lines."""

    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: TurnUsage | None = None
    at: str | None = None
    """Its first line's timestamp: when the answer started, just after the call was made."""

    def add(self, line: Line) -> None:
        self.at = self.at or line.timestamp
        self.texts.extend(line.texts)
        self.calls.extend(line.calls)
        if line.usage is not None and (
            self.usage is None or (line.usage.output_tokens or 0) >= (self.usage.output_tokens or 0)
        ):
            self.usage = line.usage

    def message(self) -> Message:
        return Message(
            role="assistant", content="\n".join(self.texts), tool_calls=tuple(self.calls)
        )


def _session(
    src: SourceFile,
    session_id: str,
    chain: list[Line],
    parent: str | None,
    extra: dict[str, Any],
) -> ImportedSession:
    messages, usage, marks = _messages(chain)
    compactions = compactions_of(messages, marks)
    first = next(ln for ln in chain if ln.is_message)
    metadata: dict[str, Any] = {
        "source_sha256": src.sha256,
        "source_lines": sum(ln.is_message for ln in chain),
        "cwd": first.cwd,
        "version": first.version,
        "git_branch": first.git_branch,
        **extra,
    }
    return ImportedSession(
        session_id=session_id,
        source_path=str(src.path),
        format="claude-code",
        messages=messages,
        usage=usage_after_compactions(usage, compactions),
        parent_session_id=parent,
        agent="claude-code",
        model=next((ln.model for ln in chain if ln.model and ln.model != "<synthetic>"), None),
        started_at=parse_timestamp(first.timestamp),
        metadata=metadata,
        compactions=compactions,
    )


def _messages(chain: list[Line]) -> tuple[list[Message], list[TurnUsage], list[Mark]]:
    """Merge each response's lines into one assistant message placed where its first line was;
    mark where each compaction happened and what its summary said."""
    items: list[Message | _Response] = []
    responses: dict[str, _Response] = {}
    marks: list[Mark] = []
    for line in chain:
        if line.boundary is not None:
            marks.append(Mark(len(items), line.boundary))
        elif line.summary is not None and marks and marks[-1].summary is None:
            marks[-1].summary = line.summary
        if line.response_id is None:
            items.extend(line.user_messages)
            continue
        response = responses.get(line.response_id)
        if response is None:
            response = responses[line.response_id] = _Response()
            items.append(response)
        response.add(line)
    messages: list[Message] = []
    usage: list[TurnUsage] = []
    for item in items:
        if isinstance(item, _Response):
            if item.usage is not None:
                dated = {"message_index": len(messages), "at": parse_timestamp(item.at)}
                usage.append(item.usage.model_copy(update=dated))
            messages.append(item.message())
        else:
            messages.append(item)
    return messages, usage, marks


# ---------------------------------------------------------------- one line


def _parse_line(obj: dict[str, Any], lineno: int) -> Line | None:
    kind = obj.get("type")
    if kind not in ("user", "assistant"):
        return _link(obj, lineno)
    message = as_dict(obj.get("message"), "message")
    line = Line(
        kind="user" if kind == "user" else "assistant",
        lineno=lineno,
        uuid=req_str(obj, "uuid", "line"),
        parent=opt_str(obj, "parentUuid", "line"),
        sidechain=bool(opt_bool(obj, "isSidechain", "line")),
        session_id=opt_str(obj, "sessionId", "line"),
        timestamp=opt_str(obj, "timestamp", "line"),
        cwd=opt_str(obj, "cwd", "line"),
        version=opt_str(obj, "version", "line"),
        git_branch=opt_str(obj, "gitBranch", "line"),
    )
    if kind == "assistant":
        _fill_assistant(line, message)
    else:
        line.summary = summary_of(obj, message)
        line.user_messages = [] if line.summary is not None else _user_messages(message)
    return line


def _link(obj: dict[str, Any], lineno: int) -> Line | None:
    """A progress, system or other line with a uuid: it carries no message, but the chain runs
    through it; a ``compact_boundary`` links to its ``logicalParentUuid``."""
    uuid = obj.get("uuid")
    if not isinstance(uuid, str):
        return None  # titles, snapshots, queue operations: not part of any chain
    boundary, problem = boundary_of(obj, lineno, uuid)
    parent = obj.get("parentUuid")
    if boundary is not None and parent is None:
        parent = obj.get("logicalParentUuid")
    sidechain = obj.get("isSidechain")
    return Line(
        lineno=lineno,
        uuid=uuid,
        parent=parent if isinstance(parent, str) else None,
        sidechain=sidechain is True,
        boundary=boundary,
        problem=problem or None,
    )


def _user_messages(message: dict[str, Any]) -> list[Message]:
    content = message.get("content")
    if isinstance(content, str):
        return [Message(role="user", content=content)]
    out: list[Message] = []
    texts: list[str] = []
    for i, block in enumerate(as_list(content, "message.content")):
        where = f"message.content[{i}]"
        block = as_dict(block, where)
        kind = block.get("type")
        if kind == "text":
            texts.append(req_str(block, "text", where))
        elif kind == "tool_result":
            if texts:
                out.append(Message(role="user", content="\n".join(texts)))
                texts = []
            out.append(
                Message(
                    role="tool",
                    content=_result_text(block.get("content"), f"{where}.content"),
                    tool_call_id=req_str(block, "tool_use_id", where),
                    is_error=bool(opt_bool(block, "is_error", where)),
                )
            )
    if texts:
        out.append(Message(role="user", content="\n".join(texts)))
    return out


def _result_text(content: object, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[str] = []
    for i, block in enumerate(as_list(content, where)):
        block = as_dict(block, f"{where}[{i}]")
        if block.get("type") == "text":
            parts.append(req_str(block, "text", f"{where}[{i}]"))
    return "\n".join(parts)


def _fill_assistant(line: Line, message: dict[str, Any]) -> None:
    line.response_id = opt_str(message, "id", "message") or line.uuid
    line.model = opt_str(message, "model", "message")
    for i, block in enumerate(as_list(message.get("content"), "message.content")):
        where = f"message.content[{i}]"
        block = as_dict(block, where)
        kind = block.get("type")
        if kind == "text":
            line.texts.append(req_str(block, "text", where))
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
            line.calls.append(
                ToolCall(
                    id=req_str(block, "id", where),
                    name=req_str(block, "name", where),
                    arguments=arguments,
                )
            )
    usage = message.get("usage")
    if usage is not None:
        try:
            figures = Figures("message.usage")
            line.usage = _usage(as_dict(usage, "message.usage"), figures)
            line.problem = figures.problem
        except RecordError as exc:
            line.problem = f"{exc}; usage ignored, the message is kept"


def _usage(raw: dict[str, Any], figures: Figures) -> TurnUsage:
    """The response's usage; a bad figure is None (``figures`` says which), and the prompt is
    unknown when any of its three parts is."""
    fresh = figures.count(raw, "input_tokens")
    write = figures.count(raw, "cache_creation_input_tokens")
    read = figures.count(raw, "cache_read_input_tokens")
    parts_bad = any(
        figures.failed(k)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    total = None if fresh is None or parts_bad else fresh + (write or 0) + (read or 0)
    return TurnUsage(
        message_index=0,
        input_tokens=total,
        output_tokens=figures.count(raw, "output_tokens"),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


# ---------------------------------------------------------------- linking side chains


def _task_prompts(messages: list[Message]) -> dict[str, tuple[str, str | None]]:
    """Task-call prompt → (tool call id, subagent type), to find which call started a side chain."""
    out: dict[str, tuple[str, str | None]] = {}
    for msg in messages:
        for call in msg.tool_calls:
            if call.name not in _TASK_TOOLS:
                continue
            try:
                args = json.loads(call.arguments)
            except ValueError:
                continue
            if isinstance(args, dict) and isinstance(args.get("prompt"), str):
                kind = args.get("subagent_type")
                out[args["prompt"]] = (call.id, kind if isinstance(kind, str) else None)
    return out


def _first_user_text(chain: list[Line]) -> str:
    for line in chain:
        for msg in line.user_messages:
            if msg.role == "user" and not msg.is_tool_result:
                return msg.content
    return ""
