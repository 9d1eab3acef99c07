"""One spool line -> a validated event in an ``EventBatch``, or a ``QuarantinedLine`` with why.

Each line is validated as an ``Event`` (the current schema of its type, else upcast from an
older one by ``parse_event``); a line that is not UTF-8, not JSON, nested too deeply or not a
valid event becomes a quarantined line with a reason that names the field, its line number,
its byte offset and a hash of its bytes (the quarantine key: a line read twice is stored once).
Nothing here reads files or touches the database.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import ValidationError

from analytics.store.batch import EventBatch, QuarantinedLine
from analytics.text import SURROGATE
from compactor.events import Event, parse_event

MAX_RAW = 64 * 1024
"""How much of a quarantined line is kept in ``quarantine.raw``."""


def parse_line(text: str) -> tuple[Event, str]:
    """(event, JSON to store) for one spool line; raises ValueError/ValidationError if invalid.

    ``Event`` accepts the current schema version of each type only; anything else goes through
    ``parse_event``, which upcasts older versions or raises a clean error."""
    try:
        return Event.model_validate_json(text), text
    except ValidationError:
        try:
            event = parse_event(text)
        except RecursionError:  # json.loads gives up past ~1,000 levels: a bad line, no crash
            raise ValueError("JSON nested too deeply to parse (over about 1,000 levels)") from None
        return event, event.model_dump_json()


def parse_into(
    raw: bytes,
    source: str,
    line: int,
    offset: int,
    batch: EventBatch,
    bad: list[QuarantinedLine],
) -> None:
    """Add the line ``raw`` (line number ``line``, starting at byte ``offset`` of ``source``)
    to ``batch`` if it is a valid event, else to ``bad``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        why, shown = f"not UTF-8 text at byte {exc.start}", raw[:MAX_RAW].decode("utf-8", "replace")
        bad.append(_quarantined(raw, source, line, offset, why, shown))
        return
    try:
        event, stored = parse_line(text)
    except (ValueError, TypeError, KeyError, OverflowError, ValidationError) as exc:
        bad.append(_quarantined(raw, source, line, offset, _reason(exc, text), text[:MAX_RAW]))
        return
    batch.event_id.append(event.event_id)
    batch.type.append(event.type)
    batch.schema_version.append(event.schema_version)
    batch.session_id.append(event.session_id)
    batch.seq.append(event.seq)
    batch.occurred_at.append(event.occurred_at)
    batch.payload.append(_payload_text(stored, event))
    batch.source.append(source)
    batch.line.append(line)


def _quarantined(
    raw: bytes, source: str, line: int, offset: int, reason: str, shown: str
) -> QuarantinedLine:
    return QuarantinedLine(source, line, reason, shown, offset, hashlib.sha256(raw).hexdigest())


def _reason(exc: Exception, text: str = "") -> str:
    if "surrogates not allowed" in str(exc) and (found := _lone_surrogate(text)):
        where, char = found
        return (
            f"invalid event: {where} holds a lone surrogate (\\u{ord(char):04x}), which is not "
            "Unicode text"
        )
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        return f"invalid event: {loc}: {err['msg']}" if loc else f"invalid event: {err['msg']}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc.msg} at column {exc.colno}"
    return f"invalid event: {exc}"


def _lone_surrogate(text: str) -> tuple[str, str] | None:
    """(where, the character): the first key or string of the JSON line ``text`` holding a lone
    surrogate, as a path such as ``payload.messages[2].content``; None if there is none."""
    try:
        stack: list[tuple[str, Any]] = [("the line", json.loads(text))]
    except (ValueError, RecursionError):
        return None
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key, inner in reversed(value.items()):
                path = key if where == "the line" else f"{where}.{key}"
                stack.append((path, inner))
                stack.append((f"a key of {where}", key))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", inner) for i, inner in reversed(list(enumerate(value))))
        elif isinstance(value, str) and (char := SURROGATE.search(value)):
            return where, char.group()
    return None


_CANONICAL_START = '{"event_id":'
_PAYLOAD_KEY = ',"payload":'


def _payload_text(text: str, event: Event) -> str:
    """The payload's JSON text, sliced out of the line when the line is in the layout our
    serialiser writes (payload last; a bare ``"`` only ever delimits keys and strings, so the
    first ``,"payload":`` is the key), else serialised again."""
    if text.startswith(_CANONICAL_START) and text.endswith("}}"):
        at = text.find(_PAYLOAD_KEY)
        if at > text.find('"producer":') > 0:
            return text[at + len(_PAYLOAD_KEY) : -1]
    return event.payload.model_dump_json()
