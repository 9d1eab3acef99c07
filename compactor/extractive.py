"""The offline ``ExtractiveSummarizer``: anchors and a summary derived from messages by rule.

It is the deterministic default summariser when no chat model is configured. One pass over the
transcript pairs tool calls with their results and fills: user intent (the first real user
message), execution progress (calls that succeeded), tried solutions (calls that failed, with the
salient error line), key decisions (assistant sentences phrased as decisions), next steps (the
plan in the latest assistant text), and a ``## Summary`` with counts, files touched and commands
run. Given a previous compaction it merges, so earlier items survive.

It does not call a model, use the network or randomness, or understand the conversation: it
copies sentences, it does not paraphrase them. It does not judge its own output (the compactor
parses it like any summariser's). Only a bounded prefix and suffix of each message is scanned, so
the cost is linear in the number of messages whatever their size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compactor.anchors import NA, Anchor, AnchorType, format_anchors
from compactor.messages import Message, ToolCall
from compactor.paths import add_path, add_text_paths
from compactor.summarize import PreviousCompaction, SummaryResult

MODEL_NAME = "extractive"

# Local copy rather than an import: the compaction-message module sits above this one.
_COMPACTION_PREFIX = "[Context Compaction]"

_HEAD_CHARS = 4000  # patterns are looked for in this much of each message's start...
_TAIL_CHARS = 2000  # ...and end: errors and exit codes cluster at the edges of tool output
_EXIT_SCAN_CHARS = 300  # exit codes only near the edges, not inside a file's printed content
_INTENT_CHARS = 300
_ITEM_CHARS = 200
_COMMAND_CHARS = 120
_MAX_PROGRESS = 12
_MAX_TRIED = 8
_MAX_DECISIONS = 8
_MAX_NEXT = 5
_MAX_FILES = 40
_MAX_COMMANDS = 10

_PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "target_file")
_COMMAND_KEYS = ("command", "cmd", "script", "code")
_SEARCH_KEYS = ("pattern", "query", "regex", "q")
# Sub-commands of editor tools (str_replace_based_edit_tool and friends) that carry a path.
_EDITOR_VIEW = {"view", "read", "cat"}
_EDITOR_EDIT = {"create", "str_replace", "insert", "undo_edit", "write", "edit", "append"}
_READ_WORDS = {"read", "view", "cat", "open", "show", "get"}
_EDIT_WORDS = {"write", "edit", "replace", "patch", "create", "insert", "apply", "delete", "update"}
_SEARCH_WORDS = {"grep", "search", "find", "glob", "list", "ls", "rg"}

_RETURNCODE_RE = re.compile(r"<returncode>[^<]*</returncode>")
_TAG_RE = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>")
_WS_RE = re.compile(r"\s+")
_FENCE_RE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_EXIT_RE = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>"
    r"|\bexit(?:ed)?(?: with)?(?: code| status)?[\s:=]+(-?\d+)\b"
    r"|\breturn ?code[\s:=]+(-?\d+)\b",
    re.IGNORECASE,
)
_FAILURE_RE = re.compile(
    r"Traceback \(most recent call last\)|\b\w*(?:Error|ERROR|error)\b:|\bFAILED\b"
    r"|\bAssertionError\b|\bfatal:|command not found|No such file or directory"
)
_EXCEPTION_LINE_RE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)\b")
_DECISION_RE = re.compile(
    r"\b(?:I(?:'|’|\s+wi)ll\s+(?:use|go with|switch|implement|modify|change|replace|keep|fix)"
    r"|let'?s\s+(?:use|go with)|we(?:'|’)ll use|decided|decide to|instead of|rather than"
    r"|we should|should use|going with|chose|choose to|opted|opt for|the fix is"
    r"|the solution is|the approach is|switch(?:ed|ing)? to)\b|决定|改用|选择",
    re.IGNORECASE,
)
_PLAN_RE = re.compile(
    r"\b(?:next|then|I(?:'|’)ll|I will|now I|let me|let'?s|TODO|need to|going to|plan to)\b"
    r"|接下来|然后|下一步|需要",
    re.IGNORECASE,
)


@dataclass
class _Exchange:
    """A tool call and its result; either may be missing (pending call, orphaned result)."""

    call: ToolCall | None
    args: dict[str, Any] = field(default_factory=dict)
    result: Message | None = None


@dataclass
class _Findings:
    intent: str = ""
    progress: list[str] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    # Insertion-ordered sets: paths a tool call acted on come before paths merely mentioned.
    acted: dict[str, None] = field(default_factory=dict)
    mentioned: dict[str, None] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    users: int = 0
    assistants: int = 0
    results: int = 0
    tool_calls: int = 0
    failures: int = 0


class ExtractiveSummarizer:
    """Deterministic, offline ``Summarizer``: anchors and summary extracted from the messages."""

    model_name = MODEL_NAME

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None = None
    ) -> SummaryResult:
        found = _scan(transcript)
        anchors = _anchors(found, previous)
        summary = _summary(found, len(transcript), previous)
        text = f"{format_anchors(anchors)}\n## Summary\n{summary}\n"
        return SummaryResult(text=text, usage=None, model=MODEL_NAME)


# ---------------------------------------------------------------- the single pass


def _scan(transcript: Sequence[Message]) -> _Findings:
    found = _Findings()
    pending: dict[str, _Exchange] = {}
    exchanges: list[_Exchange] = []
    last_text = ""
    for msg in transcript:
        if msg.is_tool_result:
            found.results += 1
            ex = pending.pop(msg.tool_call_id or "", None)
            if ex is None:
                exchanges.append(_Exchange(call=None, result=msg))
            else:
                ex.result = msg
        elif msg.role == "assistant":
            found.assistants += 1
            for tc in msg.tool_calls:
                ex = _Exchange(call=tc, args=_parse_arguments(tc.arguments))
                _add_call_paths(found.acted, ex.args, tc.arguments)
                pending[tc.id] = ex
                exchanges.append(ex)
            if msg.content.strip():
                last_text = msg.content
                found.decisions.extend(_decisions(msg.content))
        elif msg.role == "user":
            found.users += 1
            if not found.intent and not msg.content.lstrip().startswith(_COMPACTION_PREFIX):
                found.intent = _intent(msg.content)
        if msg.role != "system":
            add_text_paths(found.mentioned, _window(msg.content))
    for ex in exchanges:
        _record_exchange(found, ex)
    found.next_steps = _next_steps(last_text)
    return found


def _record_exchange(found: _Findings, ex: _Exchange) -> None:
    kind, desc = "other", f"tool call {ex.result.tool_call_id if ex.result else '?'}"
    if ex.call is not None:
        found.tool_calls += 1
        kind, desc = _describe(ex.call, ex.args)
        command = _first_string(ex.args, _COMMAND_KEYS)
        if command and kind == "shell":
            found.commands.append(_unquoted(command))
    if ex.result is None:
        return  # still pending: neither progress nor a failure yet
    failed, code, line = _outcome(ex.result, kind)
    if code is not None:
        desc = f"{desc} (exit {code})"
    if failed:
        found.failures += 1
        found.tried.append(_clip(f"{desc}: failed — {line}", _ITEM_CHARS))
    else:
        found.progress.append(_clip(desc, _ITEM_CHARS))


# ---------------------------------------------------------------- tool calls and results


def _parse_arguments(raw: str) -> dict[str, Any]:
    """Arguments as a dict; anything that is not a JSON object yields ``{}`` (raw text is kept)."""
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _first_string(args: dict[str, Any], keys: Iterable[str]) -> str:
    """The first non-empty string under ``keys``; an argv list (Codex-style) is joined."""
    for key in keys:
        value = args.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = " ".join(value)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _name_words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w}


def _describe(call: ToolCall, args: dict[str, Any]) -> tuple[str, str]:
    """``(kind, text)``: kind is shell/read/edit/search/other; text like "ran `pytest -x`"."""
    path = _first_string(args, _PATH_KEYS)
    command = _first_string(args, _COMMAND_KEYS)
    words = _name_words(call.name)
    if path and command in _EDITOR_VIEW:
        return "read", f"read {_clip(path, _COMMAND_CHARS)}"
    if path and command in _EDITOR_EDIT:
        return "edit", f"edited {_clip(path, _COMMAND_CHARS)}"
    if command:
        return "shell", f"ran `{_unquoted(command)}`"
    pattern = _first_string(args, _SEARCH_KEYS)
    if words & _EDIT_WORDS and path:
        return "edit", f"edited {_clip(path, _COMMAND_CHARS)}"
    if words & _READ_WORDS and path:
        return "read", f"read {_clip(path, _COMMAND_CHARS)}"
    if words & _SEARCH_WORDS or pattern:
        where = f" in {_clip(path, _COMMAND_CHARS)}" if path else ""
        return "search", f"searched `{_clip(pattern or path, _COMMAND_CHARS)}`{where}"
    detail = path or _clip(_WS_RE.sub(" ", call.arguments).strip(), 80)
    return "other", f"called {call.name or 'tool'}({detail})"


def _outcome(result: Message, kind: str) -> tuple[bool, int | None, str]:
    """``(failed, exit code or None, salient error line)`` of one tool result."""
    text = _window(result.content)
    edges = text[:_EXIT_SCAN_CHARS] + "\n" + text[-_EXIT_SCAN_CHARS:]
    match = _EXIT_RE.search(edges)
    code = int(next(g for g in match.groups() if g is not None)) if match else None
    if result.is_error:
        failed = True
    elif code is not None:
        failed = code != 0  # an explicit exit status outranks words in the output
    elif kind == "read":
        failed = False  # a file's contents are data: its "Error:" lines are not an outcome
    else:
        failed = _FAILURE_RE.search(text) is not None
    return failed, code, _salient_line(text) if failed else ""


def _salient_line(text: str) -> str:
    text = _TAG_RE.sub(" ", _RETURNCODE_RE.sub(" ", text))
    lines = [s for s in (_clean(raw) for raw in text.splitlines()) if s]
    # The exception's own line (last in a traceback) says more than "Traceback (most recent...".
    for line in reversed(lines):
        if _EXCEPTION_LINE_RE.match(line):
            return line
    for line in lines:
        if _FAILURE_RE.search(line) and not line.startswith("Traceback"):
            return line
    return lines[0] if lines else "no output"


# ---------------------------------------------------------------- text: intent, decisions, plan


def _intent(content: str) -> str:
    """The first meaningful line (lead-ins ending in ":" joined to what follows), one sentence."""
    lines = [
        _clean(_TAG_RE.sub(" ", raw).lstrip("#>*- ")) for raw in content[:_HEAD_CHARS].split("\n")
    ]
    lines = [line for line in lines if line and not line.startswith("```")]
    if not lines:
        return ""
    text = lines[0]
    for line in lines[1:]:
        if not text.endswith(":") or len(text) >= _INTENT_CHARS:
            break
        text = f"{text} {line}"
    return _clip(_sentences(text)[0], _INTENT_CHARS)


def _decisions(content: str) -> list[str]:
    prose = _window(content)
    if not _DECISION_RE.search(prose):
        return []  # the common case costs one search, no sentence splitting
    lines = _FENCE_RE.sub(" ", prose).splitlines()
    hits = (s for line in lines if _DECISION_RE.search(line) for s in _sentences(line))
    found = [_clip(s, _ITEM_CHARS) for s in hits if _DECISION_RE.search(s)]
    return found[-_MAX_DECISIONS:]  # only the newest survive the cap anyway


def _next_steps(content: str) -> list[str]:
    prose = _FENCE_RE.sub(" ", _window(content))
    items: list[str] = []
    for line in prose.splitlines():
        if _BULLET_RE.match(line):
            items.append(_clean(_BULLET_RE.sub("", line)))
        else:
            items.extend(s for s in _sentences(line) if _PLAN_RE.search(s))
    if not items:
        items = _sentences(prose)[-1:]  # no plan stated: the last thing said is the best guess
    return _newest_unique([_clip(i, _ITEM_CHARS) for i in items if i], len(items))[:_MAX_NEXT]


def _sentences(text: str) -> list[str]:
    return [s for s in (_clean(part) for part in _SENTENCE_RE.split(text)) if s]


# ---------------------------------------------------------------- paths


def _add_call_paths(files: dict[str, None], args: dict[str, Any], raw: str) -> None:
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip() and "\n" not in value:
            add_path(files, value.strip())
    command = _first_string(args, _COMMAND_KEYS)
    # Unparseable arguments are scanned as text; a parsed write's file body is not.
    add_text_paths(files, _window(command) if args else _window(raw))


# ---------------------------------------------------------------- assembling the output


def _anchors(found: _Findings, previous: PreviousCompaction | None) -> list[Anchor]:
    old = {a.type: a for a in previous.anchors} if previous is not None else {}

    def old_items(kind: AnchorType) -> list[str]:
        anchor = old.get(kind)
        return anchor.items if anchor is not None else []

    old_intent = old.get(AnchorType.USER_INTENT)
    intent = found.intent or (old_intent.content if old_intent and not old_intent.is_na else NA)
    contents = {AnchorType.USER_INTENT: intent}
    logs = {
        AnchorType.EXECUTION_PROGRESS: (found.progress, _MAX_PROGRESS),
        AnchorType.KEY_DECISION: (found.decisions, _MAX_DECISIONS),
        AnchorType.TRIED_SOLUTION: (found.tried, _MAX_TRIED),
    }
    for kind, (new, cap) in logs.items():
        contents[kind] = _bullets(_merge(old_items(kind), new, cap))
    # Next steps are a current state, not a log: new ones replace, old ones stand in.
    contents[AnchorType.NEXT_STEP] = _bullets(found.next_steps or old_items(AnchorType.NEXT_STEP))
    return [Anchor(type=kind, content=contents[kind]) for kind in AnchorType]


def _summary(found: _Findings, total: int, previous: PreviousCompaction | None) -> str:
    lines = [
        f"Extractive summary of {total} messages ({found.users} user, {found.assistants} "
        f"assistant, {found.results} tool results): {found.tool_calls} tool calls, "
        f"{found.failures} failed."
    ]
    old_files, old_commands = _previous_lists(previous.summary if previous else "")
    if previous is not None:
        lines.append("Continues a previous compaction; earlier items are kept above.")
    files = list(dict.fromkeys([*old_files, *found.acted, *found.mentioned]))
    if files:
        more = f" (+{len(files) - _MAX_FILES} more)" if len(files) > _MAX_FILES else ""
        lines.append(f"Files touched: {', '.join(files[:_MAX_FILES])}{more}")
    commands = _merge(old_commands, found.commands, _MAX_COMMANDS)
    if commands:
        lines.append("Commands run: " + "; ".join(f"`{c}`" for c in commands))
    return "\n".join(lines)


def _previous_lists(summary: str) -> tuple[list[str], list[str]]:
    """Files and commands listed in a previous summary, so merging does not lose them."""
    files: list[str] = []
    commands: list[str] = []
    for line in summary.splitlines():
        if line.startswith("Files touched:"):
            listed = re.sub(r"\s*\(\+\d+ more\)\s*$", "", line.removeprefix("Files touched:"))
            files = [f.strip() for f in listed.split(",") if f.strip()]
        elif line.startswith("Commands run:"):
            commands = re.findall(r"`([^`]*)`", line)
    return files, commands


def _merge(old: list[str], new: list[str], cap: int) -> list[str]:
    return _newest_unique([*old, *new], cap)


def _newest_unique(items: list[str], cap: int) -> list[str]:
    """Deduplicated (whitespace and case folded), at most ``cap``, newest kept, order preserved."""
    seen: set[str] = set()
    kept: list[str] = []
    for item in reversed(items):
        key = _WS_RE.sub(" ", item).strip().lower()
        if key and key not in seen:
            seen.add(key)
            kept.append(item)
            if len(kept) >= cap:
                break
    return kept[::-1]


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else NA


def _window(text: str) -> str:
    if len(text) <= _HEAD_CHARS + _TAIL_CHARS:
        return text
    return f"{text[:_HEAD_CHARS]}\n{text[-_TAIL_CHARS:]}"


def _clean(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def _unquoted(command: str) -> str:
    """A command on one line without its comments, backticks swapped to sit inside backticks."""
    lines = [line for line in command.splitlines() if not line.lstrip().startswith("#")]
    return _clip(" ".join(lines) or command, _COMMAND_CHARS).replace("`", "'")


def _clip(text: str, limit: int) -> str:
    text = _clean(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
