"""Transcript format detection from content (the first bytes and lines), not the file name.

Order: a folder is an OpenHands SDK conversation if it has ``event_service/``; refuse empty and
binary files; a file whose first lines include unindented JSON objects is JSON Lines (or a
one-line document) and is classified by those objects' keys (Codex rollout items by their
``type`` and ``payload``); a pretty-printed JSON document is classified by the keys visible in
its first 64 KiB (an OpenHands V0 event list by its first event's ``id``, ``timestamp`` and
``source``, before SWE-agent's ``trajectory``), or, failing that, by parsing it (the parsed
document is handed on so it is never parsed twice); markdown with aider chat headers is aider.
Anything else is an ``UnknownFormatError`` saying what was seen.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analytics.errors import UnknownFormatError
from analytics.importers.codex import ITEM_TYPES as CODEX_ITEMS
from analytics.importers.harness9_records import looks_like_record
from analytics.importers.openhands_v0 import event_list
from analytics.importers.reading import (
    Reporter,
    describe,
    event_service,
    first_jsonl_objects,
    load_json_document,
    read_head,
)
from analytics.importers.session import FORMATS, TranscriptFormat
from analytics.text import parse_json

_MINI = re.compile(r'"trajectory_format"\s*:\s*"mini-swe-agent|"mini_version"\s*:')
_TAU = re.compile(r'^\[\s*\{[\s\S]*?"traj"\s*:\s*\[')
_OPENHANDS_V0 = re.compile(
    r'^(?:\{\s*"trajectory"\s*:\s*)?\[\s*\{\s*"id"\s*:\s*\d+\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,'
    r'\s*"source"\s*:\s*"(?:agent|user|environment)"'
)
_SWE = re.compile(r'^\{\s*"(?:environment|trajectory|history)"\s*:')
_OPENAI_OBJECT = re.compile(r'^\{\s*"messages"\s*:\s*\[')
_OPENAI_LIST = re.compile(r'^\[\s*\{\s*"role"\s*:')
_AIDER_HEADER = re.compile(r"(?m)^# aider chat started at ")
_AIDER_USER = re.compile(r"(?m)^#### \S")
_CLAUDE_KEYS = ("parentUuid", "leafUuid", "sessionId")
_CLAUDE_TYPES = ("file-history-snapshot", "queue-operation", "summary")
_HINT = f"pass the format explicitly (one of: {', '.join(FORMATS)})"


@dataclass(frozen=True)
class Detection:
    """A detected format, and the parsed JSON document when detection had to parse it."""

    format: TranscriptFormat
    document: Any = None


def detect_format(path: str | os.PathLike[str]) -> TranscriptFormat:
    """The transcript format of the file, judged from its content.

    Raises ``TranscriptError`` for an empty, binary or unreadable file and
    ``UnknownFormatError`` when the content matches no known format.
    """
    return detect(Path(path)).format


def detect(path: Path, report: Reporter | None = None) -> Detection:
    """The format of the file; a document parsed on the way is kept, and its problems that do
    not stop the import (replaced characters) go to ``report``."""
    if path.is_dir():
        if event_service(path) is not None:
            return Detection("openhands-sdk")
        raise UnknownFormatError(
            str(path),
            "a folder that is not an OpenHands conversation (no event_service/ in it); "
            "import the folder to walk it, or name the transcript files",
        )
    head = read_head(path)
    text = head.lstrip()
    if text[:1] in ("{", "["):
        return _detect_json(path, text, report)
    scalar = _json_scalar(text)
    if scalar is not None:
        raise UnknownFormatError(
            str(path),
            f"the file is one JSON value ({scalar}), not a transcript (expected a JSON object or "
            f"list, JSON Lines or aider chat markdown); {_HINT}",
        )
    if _AIDER_HEADER.search(head):
        return Detection("aider")
    if path.suffix == ".md" and _AIDER_USER.search(head):
        return Detection("aider")
    first = text.splitlines()[0][:60] if text else ""
    raise UnknownFormatError(
        str(path), f"text that is neither JSON nor aider chat markdown (starts {first!r}); {_HINT}"
    )


def _detect_json(path: Path, text: str, report: Reporter | None) -> Detection:
    records = first_jsonl_objects(path)
    if records:
        fmt = next((f for f in map(classify_object, records) if f is not None), None)
        if fmt is None:
            first = records[0]
            keys = f"keys {', '.join(sorted(first)[:8])}" if first else "no keys ({})"
            raise UnknownFormatError(
                str(path),
                f"JSON objects with {keys} match no transcript format; {_misplaced(first)}"
                f"{_conversation_part(path)}{_HINT}",
            )
        return Detection(fmt)
    sniffed = _sniff_document(text)
    if sniffed is not None:
        return Detection(sniffed)
    doc = load_json_document(path, report)
    fmt = classify_document(doc)
    if fmt is None:
        raise UnknownFormatError(
            str(path), f"{_shape(doc)} matches no transcript format; {_misplaced(doc)}{_HINT}"
        )
    return Detection(fmt, doc)


def _json_scalar(text: str) -> str | None:
    """``null``, ``42``, ``"text"``...: a whole file that is one JSON scalar, described."""
    if len(text) > 1024 or text[:1] not in '"-0123456789tfn':
        return None
    try:
        value = parse_json(text).value
    except ValueError:
        return None
    return None if isinstance(value, dict | list) else describe(value)


def _misplaced(doc: object) -> str:
    """A hint when a transcript key is there with the wrong kind of value."""
    if isinstance(doc, dict):
        for key in ("messages", "traj", "history"):
            if key in doc and not isinstance(doc[key], list):
                return f"'{key}' should be a list of messages, got {describe(doc[key])}; "
    return ""


def looks_like_aider(head: str) -> bool:
    """True for text with an aider chat header or a ``#### `` user line (and not JSON): what
    ``--format aider`` requires before reading a file as a chat."""
    if head.lstrip()[:1] in ("{", "["):
        return False
    return bool(_AIDER_HEADER.search(head) or _AIDER_USER.search(head))


def _conversation_part(path: Path) -> str:
    """A hint for one file of an OpenHands conversation folder named on its own."""
    for parent in path.parents:
        if parent.name == "event_service":
            return f"it is part of the OpenHands conversation {parent.parent}: import that folder; "
    return ""


def _sniff_document(text: str) -> TranscriptFormat | None:
    if _OPENHANDS_V0.search(text):
        return "openhands-v0"
    if _MINI.search(text):
        return "mini-swe-agent"
    if _SWE.search(text):
        return "swe-agent"
    if _OPENAI_OBJECT.search(text) or _OPENAI_LIST.search(text) or _TAU.search(text):
        return "openai"
    return None


def classify_object(obj: dict[str, Any]) -> TranscriptFormat | None:
    """The format a JSON object (a JSONL line or a whole document) belongs to, if any."""
    kind = obj.get("type")
    if kind in CODEX_ITEMS and isinstance(obj.get("payload"), dict):
        return "codex"
    if event_list(obj) is not None:
        return "openhands-v0"
    if isinstance(kind, str) and (kind in _CLAUDE_TYPES or any(k in obj for k in _CLAUDE_KEYS)):
        return "claude-code"
    if looks_like_record(obj):
        return "harness9-records"
    fmt = obj.get("trajectory_format")
    info = obj.get("info")
    if (isinstance(fmt, str) and fmt.startswith("mini-swe-agent")) or (
        isinstance(info, dict) and "mini_version" in info and "messages" in obj
    ):
        return "mini-swe-agent"
    if isinstance(obj.get("history"), list):
        return "swe-agent"
    if isinstance(obj.get("role"), str) or any(
        isinstance(obj.get(key), list) for key in ("messages", "traj")
    ):
        return "openai"
    return None


def classify_document(doc: object) -> TranscriptFormat | None:
    """The format of a parsed JSON document, if any."""
    if isinstance(doc, dict):
        return classify_object(doc)
    if event_list(doc) is not None:
        return "openhands-v0"
    if isinstance(doc, list) and doc and isinstance(doc[0], dict):
        first = doc[0]
        if isinstance(first.get("role"), str) or any(
            isinstance(first.get(key), list) for key in ("traj", "messages")
        ):
            return "openai"
    return None


def _shape(doc: object) -> str:
    if isinstance(doc, dict):
        if not doc:
            return "an empty JSON object ({}, no keys)"
        return f"a JSON object with keys {', '.join(sorted(doc)[:8])}"
    if isinstance(doc, list):
        if not doc:
            return "an empty JSON list"
        first = doc[0]
        inner = (
            f"objects with keys {', '.join(sorted(first)[:8])}"
            if isinstance(first, dict)
            else (type(first).__name__)
        )
        return f"a JSON list of {inner}"
    return f"a JSON {type(doc).__name__}"
