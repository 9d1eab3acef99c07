"""Anchors from the summaries harnesses write: each harness's summary sections → the five anchors.

So that retention and silent drops run across consecutive native compactions as across ours,
every native summary is read into the five anchors (``compactor.AnchorType``) by this table:

| harness | summary section | anchor |
|---|---|---|
| claude-code | Primary Request and Intent | user_intent |
| claude-code | Current Work | execution_progress |
| claude-code | Key Technical Concepts | key_decision |
| claude-code | Errors and fixes; Problem Solving | tried_solution |
| claude-code | Pending Tasks; Optional Next Step | next_step |
| openhands | USER_CONTEXT | user_intent |
| openhands | COMPLETED; CURRENT_STATE; CHANGES | execution_progress |
| openhands | (none: the condenser's prompt asks for no decisions) | key_decision |
| openhands | TESTS | tried_solution |
| openhands | PENDING; TASK_TRACKING | next_step |
| codex | a heading naming next / todo / pending / remaining | next_step |
| codex | a heading naming progress / status / done / completed / current | execution_progress |
| codex | a heading naming error / issue / problem / tried / fix / blocker | tried_solution |
| codex | a heading naming decision / constraint / preference | key_decision |
| codex | a heading naming request / goal / intent / objective / task | user_intent |

Claude Code sections are the numbered ones after the summary's ``Summary:`` line (the
``Analysis:`` before it is the model's scratch work); Files and Code Sections and All user
messages are quotes and artifacts, not anchors, and end the section before them, as OpenHands'
CODE_STATE, DEPS and VERSION_CONTROL_STATUS do. A section's text is kept as written (fenced code
dropped), one anchor item per line. Codex writes free text: its headings are matched by the
words above (the first row that matches wins), and what is still missing comes from the
extractive reader (``compactor.ExtractiveSummarizer``) over the user's requests and the summary.
An encrypted summary gives only what the extractive reader finds in the requests. Nothing here
reads files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from compactor import (
    Anchor,
    AnchorType,
    ExtractiveSummarizer,
    Message,
    merge_anchors,
    parse_anchors_and_summary,
)

_NA = "N/A"
Section = tuple[str, str]
"""A section heading's key (its letters, lower-cased) and the text after it on its line."""

_CLAUDE_CODE: dict[str, AnchorType | None] = {
    "primaryrequestandintent": AnchorType.USER_INTENT,
    "currentwork": AnchorType.EXECUTION_PROGRESS,
    "keytechnicalconcepts": AnchorType.KEY_DECISION,
    "errorsandfixes": AnchorType.TRIED_SOLUTION,
    "problemsolving": AnchorType.TRIED_SOLUTION,
    "pendingtasks": AnchorType.NEXT_STEP,
    "optionalnextstep": AnchorType.NEXT_STEP,
    "filesandcodesections": None,
    "allusermessages": None,
}
_OPENHANDS: dict[str, AnchorType | None] = {
    "usercontext": AnchorType.USER_INTENT,
    "completed": AnchorType.EXECUTION_PROGRESS,
    "currentstate": AnchorType.EXECUTION_PROGRESS,
    "changes": AnchorType.EXECUTION_PROGRESS,
    "tests": AnchorType.TRIED_SOLUTION,
    "pending": AnchorType.NEXT_STEP,
    "tasktracking": AnchorType.NEXT_STEP,
    "codestate": None,
    "deps": None,
    "versioncontrolstatus": None,
}
_CODEX_WORDS: tuple[tuple[re.Pattern[str], AnchorType], ...] = (
    (re.compile(r"next|todo|pending|remaining", re.I), AnchorType.NEXT_STEP),
    (re.compile(r"progress|status|done|completed|current", re.I), AnchorType.EXECUTION_PROGRESS),
    (re.compile(r"error|issue|problem|tried|fix|blocker", re.I), AnchorType.TRIED_SOLUTION),
    (re.compile(r"decision|constraint|preference", re.I), AnchorType.KEY_DECISION),
    (re.compile(r"request|goal|intent|objective|task", re.I), AnchorType.USER_INTENT),
)

_CC_HEADING = re.compile(
    r"^\s*(?:#{1,6}\s+)?(?:\d+\.\s+)?\**([A-Za-z][A-Za-z &/-]*?)\**\s*:\**\s*(.*)$"
)
_CC_SUMMARY_START = re.compile(r"^\s*(?:#{1,6}\s+)?\**summary\b", re.I)
_OH_HEADING = re.compile(r"^\s*([A-Z][A-Z_]{2,}):\s*(.*)$")
_MD_HEADING = re.compile(r"^\s*(?:#{1,6}\s+(.+?)|\*\*(.+?)\*\*:?)\s*:?\s*$")
_FENCE = re.compile(r"^\s*```")


def claude_code_anchors(summary: str | None) -> list[Anchor]:
    """The five anchors of a Claude Code compact summary (see the table)."""
    if not summary:
        return _empty()
    lines = summary.splitlines()
    start = next((i for i, ln in enumerate(lines) if _CC_SUMMARY_START.match(ln)), -1)
    return _mapped(lines[start + 1 :], _heading(_CC_HEADING), _CLAUDE_CODE)


def openhands_anchors(summary: str | None) -> list[Anchor]:
    """The five anchors of an OpenHands condensation summary (see the table)."""
    if not summary:
        return _empty()
    return _mapped(summary.splitlines(), _heading(_OH_HEADING), _OPENHANDS)


def codex_anchors(summary: str | None, requests: Sequence[str]) -> list[Anchor]:
    """The five anchors of a Codex compaction: its headings by word, the rest from the
    extractive reader over ``requests`` (the user's requests it replaced) and the summary."""
    transcript = [Message(role="user", content=text) for text in requests if text.strip()]
    if summary:
        transcript.append(Message(role="assistant", content=summary))
    read = ExtractiveSummarizer().summarize(transcript, None) if transcript else None
    extracted = parse_anchors_and_summary(read.text)[0] if read is not None else _empty()
    if not summary:
        return extracted
    return merge_anchors(extracted, _mapped(summary.splitlines(), _codex_heading, {}))


# ---------------------------------------------------------------- reading sections

HeadingReader = Callable[[str], Section | None]


def _heading(pattern: re.Pattern[str]) -> HeadingReader:
    def read(line: str) -> Section | None:
        m = pattern.match(line)
        return (_key(m.group(1)), m.group(2)) if m else None

    return read


def _codex_heading(line: str) -> Section | None:
    m = _MD_HEADING.match(line)
    if not m:
        return None
    title = m.group(1) or m.group(2) or ""
    kind = next((k for word, k in _CODEX_WORDS if word.search(title)), None)
    return (kind.value if kind is not None else "", "")


def _key(title: str) -> str:
    return re.sub(r"[^a-z]", "", title.lower())


def _mapped(
    lines: Sequence[str], heading: HeadingReader, table: dict[str, AnchorType | None]
) -> list[Anchor]:
    """Anchors from the sections the table maps (an empty table maps keys that are anchor
    type names, as ``_codex_heading`` gives); a heading of any known section ends the one
    before it, other lines belong to the section they are in."""
    found: dict[AnchorType, list[str]] = {}
    current: list[str] | None = None
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
            continue
        section = None if fenced else heading(line)
        if section is not None and (section[0] in table or not table):
            kind = _kind(section[0], table)
            current = None if kind is None else found.setdefault(kind, [])
            line = section[1]
        if current is not None and not fenced and line.strip():
            current.append(line.strip())
    return [Anchor(type=t, content="\n".join(found.get(t, [])) or _NA) for t in AnchorType]


def _kind(key: str, table: dict[str, AnchorType | None]) -> AnchorType | None:
    if table:
        return table[key]
    return AnchorType(key) if key in {t.value for t in AnchorType} else None


def _empty() -> list[Anchor]:
    return [Anchor(type=t, content=_NA) for t in AnchorType]
