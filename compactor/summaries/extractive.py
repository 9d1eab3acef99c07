"""The offline ``ExtractiveSummarizer``: anchors and a summary derived from messages by rule.

It is the deterministic default summariser when no chat model is configured. One pass over the
transcript pairs tool calls with their results and fills: user intent (the task, i.e. the first
real user message of the session, kept from the previous compaction once known, plus later user
messages phrased as explicit requests), execution progress (calls that succeeded), tried
solutions (calls that failed, with the salient error line), key decisions (assistant sentences
in which the agent states a choice, "I'll use X", "the fix is to ...", not its analysis or its
descriptions of code), next steps (the plan in the latest assistant text), and a ``## Summary``
with counts, files touched and commands run. Given a previous compaction it merges, so earlier
items survive.

It does not call a model, use the network or randomness, or understand the conversation: it
copies sentences, it does not paraphrase them. It does not judge its own output (the compactor
parses it like any summariser's). Only a bounded prefix and suffix of each message is scanned, so
the cost is linear in the number of messages whatever their size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compactor.messages import Message, ToolCall
from compactor.summaries._message import is_compaction_message
from compactor.summaries._paths import add_path, add_text_paths
from compactor.summaries._tool_reading import (
    COMMAND_KEYS,
    HEAD_CHARS,
    PATH_KEYS,
    TAG_RE,
    WS_RE,
    clean,
    clip,
    describe,
    first_string,
    outcome,
    parse_arguments,
    unquoted,
    window,
)
from compactor.summaries.anchors import NA, Anchor, AnchorType, format_anchors
from compactor.summaries.summarize import PreviousCompaction, SummaryResult, TokenUsage
from compactor.tokens import estimate_tokens

MODEL_NAME = "extractive"

_INTENT_CHARS = 300
_REQUEST_CHARS = 600  # a later user message longer than this is material, not a request
_MAX_REQUESTS = 4
_ITEM_CHARS = 200
_MAX_PROGRESS = 12
_MAX_TRIED = 8
_MAX_DECISIONS = 8
_THIN_WORDS = 8
"""A decision of fewer words that names nothing concrete is kept with what led to it."""
_CONTEXT_SENTENCES = 2
_CONCRETE_RE = re.compile(r"`|\w[_./(]\w|[a-z][A-Z]|\d{2,}|\d\.\d")
_MAX_NEXT = 5
_MAX_FILES = 40
_MAX_COMMANDS = 10

_FENCE_RE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
# Key decisions are the agent's own choices, so every form needs a chooser: a first-person
# commitment to a change, a choice word, the fix it settles on, or an alternative it takes. Bare
# "instead of" / "rather than" mostly describe code or a symptom ("the query groups by id instead
# of email") and no longer count on their own; nor do verbs that only investigate (run, check).
_NO_CONTENT = (
    r"(?:it|this|that|these|those|them|the\s+code)(?:\s+(?:issues?|problems?|bugs?|errors?))?"
)
_INVESTIGATE = r"(?:see|check|test|find|look|inspect|verify|understand|investigate|explore|examine)"
_CHANGE = (
    r"(?:go with|switch|modify|change|replace|keep|add|remove|delete|update|catch|handle|adjust"
    r"|ensure|make sure|suppress|wrap|return|raise|pass|convert|skip|avoid|drop|revert|rename"
    r"|clean up|focus on|be using"
    r"|refactor|rewrite|override|stick with|set(?!\s+up\b)|move(?!\s+(?:on|forward|ahead)\b)"
    # a verb that names no choice when its object says nothing: "let's fix it", "I'll
    # implement the changes", "I'll use curl to see what it returns" (investigating)
    rf"|fix(?!\s+{_NO_CONTENT}\s*(?:[.:!]|$|and\b|by\s+editing\b))"
    r"|implement(?!\s+(?:(?:the|these|those|a|an)\s+)?(?:changes?|fix(?:es)?|them|it|this)\b)"
    rf"|use(?!\s.{{0,100}}?\bto\s+{_INVESTIGATE}\b))"
)
_ADVERB = r"(?:(?:also|first|just|now|instead|then|simply|still|only|not|probably)\s+)?"
_APOS = r"(?:'|’)"
_MAYBE = r"(?:could|might|can|may)\b"  # an option, not a choice
_DECISION_RES = (
    # a commitment: "I'll use", "we should catch", "we're going to keep", "let's modify"
    rf"\b(?:I|we)(?:{_APOS}ll|\s+will|\s+should|\s+need\s+to|\s+(?:am|are)\s+going\s+to"
    rf"|{_APOS}(?:m|re)\s+going\s+to)\s+{_ADVERB}{_CHANGE}\b",
    rf"\blet{_APOS}?s\s+{_ADVERB}{_CHANGE}\b",
    # a choice word with a chooser
    rf"\b(?:I|we)(?:{_APOS}ve|\s+have)?\s+(?:decided|chose|opted|settled on)\b"
    rf"|\b(?:I|we)(?:{_APOS}ll|\s+will)?\s+(?:choose|opt)\s+(?:to|for)\b|^going with\b",
    # the fix settled on: "the fix is to ...", "I think the simplest fix is that ..."
    r"\bthe\s+(?:\w+\s+)?(?:fix|solution|approach)\s+(?:is|will be)\s+(?:to\b|that\b|:)",
    # an alternative taken: "Instead of X, let me Y", "Used X instead of Y", "We pass X rather
    # than Y" (a sentence that starts with the chooser or the verb, not with the code)
    rf"^(?:instead of|rather than)\b[^,]*,\s*(?:let me|let{_APOS}s|(?:I|we)(?!\s+{_MAYBE}))\b",
    rf"^(?:(?:I|we)(?:{_APOS}ve|\s+have)?\s+)?(?:used?|pass(?:ed)?|call(?:ed)?|return(?:ed)?"
    r"|switch(?:ed)?|replaced?|keep|kept|stored?|chose|convert(?:ed)?|wrap(?:ped)?|raised?|moved?"
    r"|updated|changed|modified)\b"
    r".*?\b(?:instead of|rather than)\b",
    r"决定|改用|选择",
)
# A choice weighed but not made: "Maybe I should ...", "let me check whether we should ...".
_HEDGE_RE = re.compile(
    r"^(?:maybe|perhaps|possibly)\b|\b(?:if|whether)\s+(?:I|we)\s+(?:should|need\s+to)\b",
    re.IGNORECASE,
)
_DECISION_RE = re.compile("|".join(f"(?:{r})" for r in _DECISION_RES), re.IGNORECASE)
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
    requests: list[str] = field(default_factory=list)
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
    """Deterministic, offline ``Summarizer``: anchors and summary extracted from the messages.

    Its ``usage`` is what an LLM summariser would have read and written, so a replay bills the
    call as one: input ``estimate_tokens`` of the transcript plus the previous compaction's
    rendered text, output the estimate of the text written. ``model`` says ``extractive``, so
    nobody mistakes the figures for a real call's.
    """

    model_name = MODEL_NAME

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None = None
    ) -> SummaryResult:
        found = _scan(transcript)
        anchors = _anchors(found, previous)
        summary = _summary(found, len(transcript), previous)
        text = f"{format_anchors(anchors)}\n## Summary\n{summary}\n"
        return SummaryResult(
            text=text, usage=priced_as_llm(transcript, previous, text), model=MODEL_NAME
        )


def priced_as_llm(
    transcript: Sequence[Message], previous: PreviousCompaction | None, text: str
) -> TokenUsage:
    """The tokens an LLM summariser would have read (``transcript`` and ``previous`` rendered)
    and written (``text``), by ``estimate_tokens``."""
    read = estimate_tokens(transcript)
    if previous is not None:
        read += estimate_tokens([Message(role="user", content=previous.render())])
    wrote = estimate_tokens([Message(role="assistant", content=text)])
    return TokenUsage(input_tokens=read, output_tokens=wrote)


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
                ex = _Exchange(call=tc, args=parse_arguments(tc.arguments))
                _add_call_paths(found.acted, ex.args, tc.arguments)
                pending[tc.id] = ex
                exchanges.append(ex)
            if msg.content.strip():
                last_text = msg.content
                found.decisions.extend(_decisions(msg.content))
        elif msg.role == "user":
            found.users += 1
            if not is_compaction_message(msg):
                if not found.intent:
                    found.intent = _intent(msg.content)
                elif _is_request(msg.content):
                    found.requests.append(_intent(msg.content))
        if msg.role != "system":
            add_text_paths(found.mentioned, window(msg.content))
    for ex in exchanges:
        _record_exchange(found, ex)
    found.next_steps = _next_steps(last_text)
    return found


def _record_exchange(found: _Findings, ex: _Exchange) -> None:
    kind, desc = "other", f"tool call {ex.result.tool_call_id if ex.result else '?'}"
    if ex.call is not None:
        found.tool_calls += 1
        kind, desc = describe(ex.call, ex.args)
        command = first_string(ex.args, COMMAND_KEYS)
        if command and kind == "shell":
            found.commands.append(unquoted(command))
    if ex.result is None:
        return  # still pending: neither progress nor a failure yet
    failed, code, line = outcome(ex.result, kind)
    if code is not None:
        desc = f"{desc} (exit {code})"
    if failed:
        found.failures += 1
        found.tried.append(clip(f"{desc}: failed — {line}", _ITEM_CHARS))
    else:
        found.progress.append(clip(desc, _ITEM_CHARS))


# ---------------------------------------------------------------- text: intent, decisions, plan


def _intent(content: str) -> str:
    """The first meaningful line (lead-ins ending in ":" joined to what follows), one sentence."""
    lines = [
        clean(TAG_RE.sub(" ", raw).lstrip("#>*- ")) for raw in content[:HEAD_CHARS].split("\n")
    ]
    lines = [line for line in lines if line and not line.startswith("```")]
    if not lines:
        return ""
    text = lines[0]
    for line in lines[1:]:
        if not text.endswith(":") or len(text) >= _INTENT_CHARS:
            break
        text = f"{text} {line}"
    return clip(_sentences(text)[0], _INTENT_CHARS)


_REQUEST_RE = re.compile(
    r"^(?:please|can you|could you|would you|now\b|also\b|instead\b|actually\b|don'?t|do not"
    r"|stop\b|let'?s\b|make\b|add\b|fix\b|change\b|use\b|try\b|remove\b|update\b|implement"
    r"|write\b|run\b|rename\b|revert\b|undo\b|i want|i need|we need|请|帮我|改为|不要)",
    re.IGNORECASE,
)
_NOT_A_REQUEST_RE = re.compile(r"<returncode>|<output>|^\s*(?:observation|tool|\[|```|<)", re.I)


def _is_request(content: str) -> bool:
    """A later user message that asks for something (not tool output fed back as user text)."""
    text = content.strip()
    if not text or len(text) > _REQUEST_CHARS or _NOT_A_REQUEST_RE.search(text[:200]):
        return False
    return _REQUEST_RE.match(text) is not None


def _intent_anchor(found: _Findings, old: list[str]) -> str:
    """The task first (from the previous compaction once known: a new transcript's first user
    line is a follow-up, not the task), then the newest explicit requests."""
    first = old[:1] or ([found.intent] if found.intent else [])
    later = old[1:] + found.requests
    if not first:
        return NA
    items = first + _newest_unique(later, _MAX_REQUESTS)
    return items[0] if len(items) == 1 else _bullets(items)


def split_prose_sentences(content: str) -> list[str]:
    """The sentences the decision rule reads: a message's scanned window, code fences removed."""
    return _sentences(_FENCE_RE.sub(" ", window(content)))


def is_decision(sentence: str) -> bool:
    """Whether one sentence (from ``split_prose_sentences``) is phrased as a key decision."""
    text = _BULLET_RE.sub("", sentence)
    if text.endswith("?") or _HEDGE_RE.search(text):
        return False
    return _DECISION_RE.search(text) is not None


def _decisions(content: str) -> list[str]:
    # Sentence-start forms cannot be searched for in the whole text first: split the bounded window.
    sentences = split_prose_sentences(content)
    found = [_with_context(sentences, i) for i, s in enumerate(sentences) if is_decision(s)]
    return found[-_MAX_DECISIONS:]  # only the newest survive the cap anyway


def _with_context(sentences: list[str], i: int) -> str:
    """Decision ``i`` as an anchor item. A short one that names nothing ("We should return 0.")
    means nothing once its message is gone: it is kept with the sentences that led to it, back
    to the nearest of the ``_CONTEXT_SENTENCES`` before it that names something (a code span,
    an identifier, a path, a number), each clipped; alone when none does or a decision comes
    first."""
    decision = clip(sentences[i], _ITEM_CHARS)
    if len(decision.split()) >= _THIN_WORDS or _CONCRETE_RE.search(decision):
        return decision
    for k in range(i - 1, max(-1, i - 1 - _CONTEXT_SENTENCES), -1):
        if is_decision(sentences[k]):
            break  # a decision of its own, listed apart
        if _CONCRETE_RE.search(sentences[k]):
            return " ".join([*(clip(s, _ITEM_CHARS // 2) for s in sentences[k:i]), decision])
    return decision


def _next_steps(content: str) -> list[str]:
    prose = _FENCE_RE.sub(" ", window(content))
    items: list[str] = []
    for line in prose.splitlines():
        if _BULLET_RE.match(line):
            items.append(clean(_BULLET_RE.sub("", line)))
        else:
            items.extend(s for s in _sentences(line) if _PLAN_RE.search(s))
    if not items:
        items = _sentences(prose)[-1:]  # no plan stated: the last thing said is the best guess
    return _newest_unique([clip(i, _ITEM_CHARS) for i in items if i], len(items))[:_MAX_NEXT]


def _sentences(text: str) -> list[str]:
    return [s for s in (clean(part) for part in _SENTENCE_RE.split(text)) if s]


# ---------------------------------------------------------------- paths


def _add_call_paths(files: dict[str, None], args: dict[str, Any], raw: str) -> None:
    for key in PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip() and "\n" not in value:
            add_path(files, value.strip())
    command = first_string(args, COMMAND_KEYS)
    # Unparseable arguments are scanned as text; a parsed write's file body is not.
    add_text_paths(files, window(command) if args else window(raw))


# ---------------------------------------------------------------- assembling the output


def _anchors(found: _Findings, previous: PreviousCompaction | None) -> list[Anchor]:
    old = {a.type: a for a in previous.anchors} if previous is not None else {}

    def old_items(kind: AnchorType) -> list[str]:
        anchor = old.get(kind)
        return anchor.items if anchor is not None else []

    contents = {AnchorType.USER_INTENT: _intent_anchor(found, old_items(AnchorType.USER_INTENT))}
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
        key = WS_RE.sub(" ", item).strip().lower()
        if key and key not in seen:
            seen.add(key)
            kept.append(item)
            if len(kept) >= cap:
                break
    return kept[::-1]


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else NA
