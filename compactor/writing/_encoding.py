"""Any ``str`` into valid UTF-8: lone surrogates become U+FFFD instead of an exception.

Python strings may hold surrogate code points (JSON ``"\\ud800"``, bytes decoded with
``surrogateescape``) that UTF-8 cannot encode. Content is the agent's, so the library never
raises on it: sizes and hashes count such text with ``surrogatepass``, and whatever is written
as text (events, records) goes through ``scrub``. Nothing here reads or writes files.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """``text`` with valid surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if text.isascii() or _SURROGATE.search(text) is None:  # isascii: the common case, in C
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _scrub_value(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, list):
        return [_scrub_value(v) for v in value]
    if isinstance(value, dict):
        return {scrub(str(k)): _scrub_value(v) for k, v in value.items()}
    return value


def model_json_line(model: BaseModel) -> str:
    """``model`` as one JSON line; text that UTF-8 cannot hold is scrubbed, never raised on."""
    try:
        line = model.model_dump_json()
    except ValueError:  # pydantic refuses to serialise lone surrogates
        data = _scrub_value(model.model_dump(mode="json"))
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return line


def utf8(text: str) -> bytes:
    """``text`` as UTF-8 bytes, scrubbed when it holds lone surrogates."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return scrub(text).encode("utf-8")
