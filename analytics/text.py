"""Parsing JSON text from transcripts: one place for what ``json.loads`` lets through or trips on.

``parse_json`` parses a document or a line and turns the three surprises of real files into
something an importer can report: a UTF-8 byte-order mark (accepted and dropped), nesting too
deep for the parser (``JsonTooDeepError``, a clear reason instead of a ``RecursionError``) and lone
UTF-16 surrogates written as ``\\ud800`` escapes. Python accepts those escapes, but the text
cannot be encoded as UTF-8, so an event holding it could never be written: they are replaced by
U+FFFD and counted, and the caller says so. It reads no files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

BOM = "\ufeff"
REPLACEMENT = "\ufffd"
SURROGATE = re.compile("[\ud800-\udfff]")
"""A surrogate code point (U+D800 to U+DFFF): UTF-8 cannot encode one."""
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class JsonTooDeepError(ValueError):
    """The JSON nests deeper than the parser can follow."""

    def __init__(self) -> None:
        super().__init__(
            "JSON nested too deeply to parse (more than about 1,000 levels of lists or "
            "objects); not a transcript"
        )


@dataclass(frozen=True)
class Parsed:
    """A parsed value; ``replaced`` lone surrogates were replaced with U+FFFD, the first of
    them at character ``offset`` of the text (a ``\\udXXX`` escape)."""

    value: Any
    replaced: int = 0
    offset: int = 0
    escape: str = ""

    def note(self) -> str:
        """What was replaced, for an issue's reason."""
        many = f" (and {self.replaced - 1} more)" if self.replaced > 1 else ""
        return (
            f"lone UTF-16 surrogate {self.escape}{many} in a JSON string is not valid Unicode; "
            "replaced with U+FFFD (\N{REPLACEMENT CHARACTER}), everything else kept"
        )


def parse_json(text: str) -> Parsed:
    """``json.loads`` with a leading BOM dropped, lone surrogates replaced and deep nesting
    reported; raises ``json.JSONDecodeError`` or ``JsonTooDeepError``."""
    if text.startswith(BOM):
        text = text[1:]
    try:
        value = json.loads(text)
    except RecursionError:
        raise JsonTooDeepError() from None
    if _ESCAPE.search(text) is None:  # the common case: no surrogate escape at all
        return Parsed(value)
    counter = [0]
    try:
        cleaned = _replace(value, counter)
    except RecursionError:
        raise JsonTooDeepError() from None
    if not counter[0]:
        return Parsed(value)
    offset, escape = _first_lone_escape(text)
    return Parsed(cleaned, counter[0], offset, escape)


def decode_error(exc: json.JSONDecodeError, *, with_line: bool) -> str:
    """``invalid JSON: <what> at column N`` (or line and column), however ``json`` words it:
    some of its messages already end in "at" ("Unterminated string starting at")."""
    place = f"line {exc.lineno}, column {exc.colno}" if with_line else f"column {exc.colno}"
    msg = exc.msg.removesuffix(" at")
    return f"invalid JSON: {msg} at {place}"


def line_of(text: str, offset: int) -> int:
    """The 1-based line number of character ``offset``."""
    return text.count("\n", 0, offset) + 1


def _replace(value: Any, counter: list[int]) -> Any:
    if isinstance(value, str):
        return SURROGATE.sub(lambda _m: _count(counter), value)
    if isinstance(value, list):
        return [_replace(v, counter) for v in value]
    if isinstance(value, dict):
        return {_replace(k, counter): _replace(v, counter) for k, v in value.items()}
    return value


def _count(counter: list[int]) -> str:
    counter[0] += 1
    return REPLACEMENT


def _first_lone_escape(text: str) -> tuple[int, str]:
    """Where the first escape not part of a high+low pair is (a best guess for the report)."""
    matches = list(_ESCAPE.finditer(text))
    skip = False
    for i, m in enumerate(matches):
        if skip:
            skip = False
            continue
        high = m.group()[3].lower() in "89ab"
        nxt = matches[i + 1] if i + 1 < len(matches) else None
        pairs = nxt is not None and nxt.start() == m.end() and nxt.group()[3].lower() in "cdef"
        if high and pairs:
            skip = True
            continue
        return m.start(), m.group()
    return 0, "\\ud800"
