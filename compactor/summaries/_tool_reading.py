"""Tool calls and their results, read by rule: what a call did and whether it failed.

The offline summariser's view of tool use: a call is classified (shell, read, edit, search,
other) and described in a few words (``ran `pytest -x` ``); a result is judged failed or not
from its exit code, error flag or failure words, with its most telling line. Only a bounded
prefix and suffix of a message is scanned. It does not summarise or render anchors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from compactor.messages import Message, ToolCall

HEAD_CHARS = 4000  # patterns are looked for in this much of each message's start...
TAIL_CHARS = 2000  # ...and end: errors and exit codes cluster at the edges of tool output
_EXIT_SCAN_CHARS = 300  # exit codes only near the edges, not inside a file's printed content
COMMAND_CHARS = 120
PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "target_file")
COMMAND_KEYS = ("command", "cmd", "script", "code")
_SEARCH_KEYS = ("pattern", "query", "regex", "q")
_EDITOR_VIEW = {"view", "read", "cat"}
_EDITOR_EDIT = {"create", "str_replace", "insert", "undo_edit", "write", "edit", "append"}
_READ_WORDS = {"read", "view", "cat", "open", "show", "get"}
_EDIT_WORDS = {"write", "edit", "replace", "patch", "create", "insert", "apply", "delete", "update"}
_SEARCH_WORDS = {"grep", "search", "find", "glob", "list", "ls", "rg"}

RETURNCODE_RE = re.compile(r"<returncode>[^<]*</returncode>")
TAG_RE = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>")
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
WS_RE = re.compile(r"\s+")


def parse_arguments(raw: str) -> dict[str, Any]:
    """Arguments as a dict; anything that is not a JSON object yields ``{}`` (raw text is kept)."""
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def first_string(args: dict[str, Any], keys: Iterable[str]) -> str:
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


def describe(call: ToolCall, args: dict[str, Any]) -> tuple[str, str]:
    """``(kind, text)``: kind is shell/read/edit/search/other; text like "ran `pytest -x`"."""
    path = first_string(args, PATH_KEYS)
    command = first_string(args, COMMAND_KEYS)
    words = _name_words(call.name)
    if path and command in _EDITOR_VIEW:
        return "read", f"read {clip(path, COMMAND_CHARS)}"
    if path and command in _EDITOR_EDIT:
        return "edit", f"edited {clip(path, COMMAND_CHARS)}"
    if command:
        return "shell", f"ran `{unquoted(command)}`"
    pattern = first_string(args, _SEARCH_KEYS)
    if words & _EDIT_WORDS and path:
        return "edit", f"edited {clip(path, COMMAND_CHARS)}"
    if words & _READ_WORDS and path:
        return "read", f"read {clip(path, COMMAND_CHARS)}"
    if words & _SEARCH_WORDS or pattern:
        where = f" in {clip(path, COMMAND_CHARS)}" if path else ""
        return "search", f"searched `{clip(pattern or path, COMMAND_CHARS)}`{where}"
    detail = path or clip(WS_RE.sub(" ", call.arguments).strip(), 80)
    return "other", f"called {call.name or 'tool'}({detail})"


def outcome(result: Message, kind: str) -> tuple[bool, int | None, str]:
    """``(failed, exit code or None, salient error line)`` of one tool result."""
    text = window(result.content)
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
    text = TAG_RE.sub(" ", RETURNCODE_RE.sub(" ", text))
    lines = [s for s in (clean(raw) for raw in text.splitlines()) if s]
    # The exception's own line (last in a traceback) says more than "Traceback (most recent...".
    for line in reversed(lines):
        if _EXCEPTION_LINE_RE.match(line):
            return line
    for line in lines:
        if _FAILURE_RE.search(line) and not line.startswith("Traceback"):
            return line
    return lines[0] if lines else "no output"


# ---------------------------------------------------------------- text helpers


def window(text: str) -> str:
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text
    return f"{text[:HEAD_CHARS]}\n{text[-TAIL_CHARS:]}"


def clean(text: str) -> str:
    return WS_RE.sub(" ", text).strip()


def unquoted(command: str) -> str:
    """A command on one line without its comments, backticks swapped to sit inside backticks."""
    lines = [line for line in command.splitlines() if not line.lstrip().startswith("#")]
    return clip(" ".join(lines) or command, COMMAND_CHARS).replace("`", "'")


def clip(text: str, limit: int) -> str:
    text = clean(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
