"""Safe file names from untrusted identifiers (tool_call_id, session_id).

Any id may come from a model or a transcript: it is reduced to ``[A-Za-z0-9._-]``, never starts
with a dot, is capped in length, and gets a hash suffix when it had to be changed, so two hostile
ids never collide and none can name a path outside its folder.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_NAME = 96


def safe_name(raw: str) -> str:
    """A file-name-safe form of ``raw``; identical to ``raw`` when it was already safe."""
    cleaned = _UNSAFE.sub("_", raw).lstrip(".")
    if cleaned == raw and 0 < len(raw) <= MAX_NAME:
        return raw
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[: MAX_NAME - 9] or 'id'}-{digest}"


def confined(root: Path, *parts: str) -> Path:
    """``root/parts`` resolved, raising ``ValueError`` if it is not inside ``root``."""
    base = root.resolve()
    target = base.joinpath(*parts).resolve()
    if target != base and base not in target.parents:
        raise ValueError(f"path {target} escapes {base}")
    return target
