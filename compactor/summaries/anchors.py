"""Anchors: the five structured facts every compaction carries, and their parse/merge/format.

Parsing never raises and always yields the five anchors in order. ``"- N/A"``, ``"N/A"``,
``"n/a"``, ``"none"`` (and an empty section) all normalise to ``"N/A"``, so merging never
overwrites a real older anchor with an empty one (the seed's prompt asked for ``- N/A`` and its
merge then destroyed older anchors). No LLM calls happen here.
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

NA = "N/A"


class AnchorType(StrEnum):
    USER_INTENT = "user_intent"
    EXECUTION_PROGRESS = "execution_progress"
    KEY_DECISION = "key_decision"
    TRIED_SOLUTION = "tried_solution"
    NEXT_STEP = "next_step"


ANCHOR_ORDER: tuple[AnchorType, ...] = tuple(AnchorType)

ANCHOR_TITLES: dict[AnchorType, str] = {
    AnchorType.USER_INTENT: "User Intent",
    AnchorType.EXECUTION_PROGRESS: "Execution Progress",
    AnchorType.KEY_DECISION: "Key Decisions",
    AnchorType.TRIED_SOLUTION: "Tried Solutions",
    AnchorType.NEXT_STEP: "Next Steps",
}

_HEADER_KEYS: dict[str, AnchorType] = {
    "userintent": AnchorType.USER_INTENT,
    "intent": AnchorType.USER_INTENT,
    "executionprogress": AnchorType.EXECUTION_PROGRESS,
    "progress": AnchorType.EXECUTION_PROGRESS,
    "keydecision": AnchorType.KEY_DECISION,
    "decision": AnchorType.KEY_DECISION,
    "triedsolution": AnchorType.TRIED_SOLUTION,
    "triedapproach": AnchorType.TRIED_SOLUTION,
    "nextstep": AnchorType.NEXT_STEP,
}

_NA_WORDS = {"", "n/a", "na", "none", "nothing", "null", "-", "n.a.", "not applicable"}
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


class Anchor(BaseModel):
    """One anchor: its type and its content (one sentence, or ``- item`` lines)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    type: AnchorType = Field(validation_alias=AliasChoices("type", "Type"))
    content: str = Field(NA, validation_alias=AliasChoices("content", "Content"))

    @property
    def is_na(self) -> bool:
        return is_na(self.content)

    @property
    def items(self) -> list[str]:
        return anchor_items(self.content)


def is_na(content: str) -> bool:
    """True when every line of ``content`` is an N/A marker (``- N/A``, ``none``, blank...)."""
    return all(
        _BULLET.sub("", line).strip().strip(".").lower() in _NA_WORDS
        for line in content.splitlines() or [""]
    )


def normalise(content: str) -> str:
    text = content.strip()
    return NA if is_na(text) else text


def anchor_items(content: str) -> list[str]:
    """The items of an anchor: bullet lines without their bullets (or the sentence itself)."""
    if is_na(content):
        return []
    items = [_BULLET.sub("", line).strip() for line in content.splitlines()]
    return [i for i in items if i and not is_na(i)]


def _header_type(title: str) -> AnchorType | None:
    key = re.sub(r"[^a-z]", "", title.lower())
    if key in _HEADER_KEYS:
        return _HEADER_KEYS[key]
    if key.endswith("s") and key[:-1] in _HEADER_KEYS:
        return _HEADER_KEYS[key[:-1]]
    return None


def _header(line: str) -> tuple[int, str] | None:
    m = re.match(r"^\s*(#{1,6})\s+(.*?)\s*:?\s*$", line)
    if not m:
        return None
    title = m.group(2).strip().strip("*").strip()
    return len(m.group(1)), title


def parse_sections(text: str) -> dict[str, str]:
    """Level-2 sections of a compaction text by lower-cased title (``summary``, ``anchors``...)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        h = _header(line)
        if h and h[0] == 2:
            current = sections.setdefault(h[1].lower(), [])
            continue
        if current is not None:
            current.append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


def parse_anchors_and_summary(text: str) -> tuple[list[Anchor], str]:
    """Parse the anchor template. Never raises; always five anchors in order, missing -> N/A.

    Anchor sections are ``###`` headers (any level of 3+ is accepted, titles matched loosely);
    the summary is the body of ``## Summary`` up to the next level-2 header. A header that names
    no anchor ends the anchor before it unless it is deeper (a sub-heading of that anchor);
    such a section is ignored, and inside ``## Summary`` it is part of the summary.
    """
    found: dict[AnchorType, list[str]] = {}
    summary: list[str] | None = None
    current: list[str] | None = None
    anchor_level = 0  # the header level of the anchor being read (0: none)
    for line in (text or "").splitlines():
        h = _header(line)
        if h is not None:
            level, title = h
            kind = _header_type(title)
            if level >= 3 and kind is not None:
                current, anchor_level = found.setdefault(kind, []), level
                continue
            if level <= 2:
                if title.lower() == "summary":
                    summary = []
                    current = summary
                else:
                    current = None
                anchor_level = 0
                continue
            if anchor_level and level <= anchor_level:
                current, anchor_level = None, 0  # an unknown section: not part of an anchor
                continue
        if current is not None:
            current.append(line)
    anchors = [Anchor(type=t, content=normalise("\n".join(found.get(t, [])))) for t in ANCHOR_ORDER]
    return anchors, "\n".join(summary).strip() if summary is not None else ""


def merge_anchors(old: list[Anchor] | None, new: list[Anchor]) -> list[Anchor]:
    """Per type, a real (non-N/A) new value replaces the old; otherwise the old one is kept."""
    old_by = {a.type: a for a in old or []}
    new_by = {a.type: a for a in new}
    merged: list[Anchor] = []
    for t in ANCHOR_ORDER:
        n = new_by.get(t)
        o = old_by.get(t)
        if n is not None and not n.is_na:
            merged.append(Anchor(type=t, content=normalise(n.content)))
        elif o is not None and not o.is_na:
            merged.append(Anchor(type=t, content=normalise(o.content)))
        else:
            merged.append(Anchor(type=t, content=NA))
    return merged


def all_na(anchors: list[Anchor]) -> bool:
    return all(a.is_na for a in anchors)


def format_anchors(anchors: list[Anchor]) -> str:
    """Render the ``## Anchors`` block with the five ``### `` sections in order."""
    by = {a.type: a for a in anchors}
    lines = ["## Anchors", ""]
    for t in ANCHOR_ORDER:
        a = by.get(t)
        lines.append(f"### {ANCHOR_TITLES[t]}")
        lines.append(a.content if a is not None and not a.is_na else NA)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
