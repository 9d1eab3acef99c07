"""Is what a summary says in the history it replaced? (issue 31, item 3)

Each *claim* of an effective compaction (each anchor item, and each sentence of its summary
text outside headings and fences) is checked against the *source*: the text and tool-call
arguments of the session's history up to the compaction (the last message its before view
refers to; anchors merged from earlier compactions came from that history too). A claim is
``grounded`` when

- every *fact* it names occurs verbatim in the source: paths (``text_paths``), numbers of two or
  more digits or with a decimal point, and `backticked` spans; and
- at least ``WORD_SHARE`` of its content words (lowercase, three letters or more, no stop word)
  occur in the source; and
- when fewer than ``SURE_WORD_SHARE`` of its words occur and it has two or more content-word
  pairs (neighbours once stop words are dropped), at least ``PAIR_SHARE`` of them occur as
  neighbours in the source: a constraint the user never gave ("tabs are mandatory for
  indentation") brings a word or two of its own, and its pairs are not in the history.

An extractive summary copies sentences, so its claims are grounded by construction; an LLM's
paraphrase is held to the same test and may fail the pairs where it rewords. ``missing`` says
what was not found. Sessions captured as metadata have no text and no claims. Pure: frames in,
frames out.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analytics.jobs.artifacts import PATH_PATTERN
from analytics.jobs.common import conform, is_effective

WORD_SHARE = 0.75
SURE_WORD_SHARE = 0.9
"""A claim whose words are nearly all in the history passes without the pair test: a
paraphrase rewords, it does not invent vocabulary."""
MAX_FACT_CHARS = 80
"""A backticked span longer than this (a script, a heredoc) is checked by its words, not
verbatim: summaries condense them (comment lines dropped, lines joined)."""
PAIR_SHARE = 0.5
_WORD = re.compile(r"[a-z0-9_]+(?:[.'-][a-z0-9_]+)*")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?![\w.])|(?<![\w.])\d{2,}(?![\w.])")
_BACKTICK = re.compile(r"`([^`\n]{2,})`")
_PATH = re.compile(PATH_PATTERN)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "was",
        "were",
        "that",
        "this",
        "with",
        "from",
        "into",
        "onto",
        "have",
        "has",
        "had",
        "not",
        "but",
        "its",
        "it's",
        "they",
        "them",
        "their",
        "there",
        "then",
        "than",
        "you",
        "your",
        "our",
        "out",
        "all",
        "any",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "been",
        "being",
        "also",
        "only",
        "just",
        "more",
        "most",
        "some",
        "such",
        "each",
        "per",
        "via",
        "use",
        "used",
        "using",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "how",
        "why",
        "let",
        "lets",
        "did",
        "does",
        "done",
        "doing",
        "get",
        "got",
        "one",
        "two",
        "yes",
    ]
)
FRAMING = frozenset(
    [
        "ran",
        "run",
        "runs",
        "exit",
        "extractive",
        "summary",
        "summarised",
        "summarized",
        "messages",
        "message",
        "user",
        "assistant",
        "tool",
        "tools",
        "result",
        "results",
        "call",
        "calls",
        "failed",
        "files",
        "file",
        "touched",
        "commands",
        "command",
        "read",
        "edited",
        "wrote",
        "error",
        "errors",
        "next",
        "steps",
        "step",
        "progress",
        "decisions",
        "decision",
        "tried",
        "intent",
        "original",
        "request",
        "active",
        "tasks",
        "offloaded",
        "references",
        "kept",
        "earlier",
    ]
)
"""The words summaries frame their content with ("ran `x` (exit 0)", "Files touched: …"): not
claims about the history, so not looked for in it."""
_HEADER = re.compile(
    r"^(?:Extractive summary of \d+ messages|\d+ earlier messages|Continues a previous compaction)",
    re.I,
)
"""Our summariser's first line counts the messages it summarised: a figure about the history's
shape, true by construction, that the history's text does not hold."""
_OWN_FILES = ".compactlens/"
"""Offload references point at files the compactor wrote, not at anything in the history."""

GROUNDING_COLUMNS: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "compaction_id": pl.String(),
    "kind": pl.String(),
    "anchor_type": pl.String(),
    "position": pl.Int64(),
    "claim": pl.String(),
    "grounded": pl.Boolean(),
    "missing": pl.String(),
}
_COMPACTIONS = {
    "id": pl.String(),
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "tier": pl.Int64(),
    "effective": pl.Boolean(),
    "error": pl.String(),
    "summary_text": pl.String(),
}
_ITEMS = {
    "compaction_id": pl.String(),
    "anchor_type": pl.String(),
    "position": pl.Int64(),
    "item": pl.String(),
}
_VIEWS = {
    "compaction_id": pl.String(),
    "side": pl.String(),
    "history_index": pl.Int64(),
}
_MESSAGES = {
    "session_id": pl.String(),
    "idx": pl.Int64(),
    "content": pl.String(),
    "tool_calls": pl.String(),
}


def content_words(text: str) -> list[str]:
    """The words of ``text`` that carry content: lowercase, three letters or more, no stop word."""
    return [
        w
        for w in _WORD.findall(text.lower())
        if len(w) >= 3 and w not in _STOP and w not in FRAMING
    ]


def without_own_files(text: str) -> str:
    """``text`` less the words that name files the compactor wrote (offload references)."""
    return " ".join(w for w in text.split() if _OWN_FILES not in w)


def facts(text: str) -> list[str]:
    """The verbatim facts a claim names: paths, numbers, backticked spans (in order, once)."""
    text = without_own_files(text)
    spans = [b for b in _BACKTICK.findall(text) if len(b) <= MAX_FACT_CHARS]
    found = [*_PATH.findall(text), *_NUMBER.findall(text), *spans]
    cut = (f.strip().removesuffix("…").strip() for f in found)  # a cut item: its kept part
    return list(dict.fromkeys(f for f in cut if f))


@dataclass
class Source:
    """What the history up to a point says: its text, its words and its neighbouring pairs."""

    words: set[str] = field(default_factory=set)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    _joined: str = ""
    _pending: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self._pending.append(" ".join(text.split()))  # each message normalised once
        words = content_words(text)
        self.words.update(words)
        self.pairs.update(itertools.pairwise(words))

    def holds(self, fact: str) -> bool:
        """``fact`` occurs in the source, whitespace runs counted as one space (a summary
        puts a multi-line command on one line)."""
        if self._pending:  # the messages added since the last look, joined on once
            self._joined = " ".join(filter(None, [self._joined, *self._pending]))
            self._pending.clear()
        return " ".join(fact.split()) in self._joined


def check(claim: str, source: Source) -> list[str]:
    """What of ``claim`` the source does not hold (empty: grounded)."""
    named = facts(claim)
    missing = [f for f in named if not source.holds(f)]
    prose = without_own_files(claim)
    # a list of files is checked by its facts, not by pairs of file names (longest first: a
    # backticked command holds the paths it names)
    for fact in sorted(named, key=len, reverse=True):
        prose = prose.replace(fact, " ")
    words = content_words(prose)
    absent = [w for w in dict.fromkeys(words) if w not in source.words]
    share = 1 - len(absent) / len(set(words)) if words else 1.0
    if share < WORD_SHARE:
        missing += absent
    pairs = list(itertools.pairwise(words))
    if share < SURE_WORD_SHARE and len(pairs) >= 2:
        held = sum(1 for p in pairs if p in source.pairs)
        if held / len(pairs) < PAIR_SHARE:
            missing += [] if share < WORD_SHARE else absent
            missing.append(f"{len(pairs) - held} of {len(pairs)} word pairs")
    return missing


def summary_sentences(text: str | None) -> list[str]:
    """The sentences of a summary's prose: headings, fences and bare markup left out."""
    if not text:
        return []
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("~~~", "```")):
            fenced = not fenced
            continue
        if fenced or not stripped or stripped.startswith(("#", "[Context Compaction")):
            continue
        if _HEADER.match(stripped):
            continue
        out += [s.strip(" -*") for s in _SENTENCE.split(stripped) if len(content_words(s)) >= 2]
    return out


def summary_grounding(
    compactions: pl.DataFrame,
    anchor_items: pl.DataFrame,
    views: pl.DataFrame,
    messages: pl.DataFrame,
) -> pl.DataFrame:
    """One row per claim of every effective compaction (``GROUNDING_COLUMNS``)."""
    done = conform(compactions, _COMPACTIONS).filter(
        is_effective() & (pl.col("tier") > 0) & pl.col("id").is_not_null()
    )
    items = conform(anchor_items, _ITEMS).filter(pl.col("item").is_not_null())
    by_compaction = {str(k[0]): g for k, g in items.group_by("compaction_id")}
    ends = _history_ends(conform(views, _VIEWS))
    texts = {
        str(k[0]): g.sort("idx")
        for k, g in conform(messages, _MESSAGES)
        .filter(pl.col("idx").is_not_null())
        .group_by("session_id")
    }
    rows: list[dict[str, Any]] = []
    for (sid,), group in done.sort("session_id", "seq").group_by("session_id", maintain_order=True):
        history = texts.get(str(sid))
        if history is None:
            continue
        rows += _session_rows(str(sid), group, history, by_compaction, ends)
    return pl.DataFrame(rows, schema=GROUNDING_COLUMNS)


def _history_ends(views: pl.DataFrame) -> dict[str, int]:
    """Per compaction: how many history messages its before view covers (last index + 1)."""
    before = views.filter((pl.col("side") == "before") & pl.col("history_index").is_not_null())
    ends = before.group_by("compaction_id").agg(pl.col("history_index").max() + 1)
    return {str(c): int(e) for c, e in ends.iter_rows()}


def _message_text(row: dict[str, Any]) -> str:
    """A message's content and its tool calls' argument values, decoded (a command quoted in a
    summary is looked for as written, not as JSON escapes it)."""
    parts = [row["content"] or ""]
    for call in _json_list(row["tool_calls"]):
        arguments = call.get("arguments") if isinstance(call, dict) else None
        parts.append(str(arguments or ""))
        decoded = _json_object(arguments)
        parts += [str(v) for v in decoded.values()]
    return "\n".join(p for p in parts if p)


def _json_list(text: str | None) -> list[Any]:
    try:
        found = json.loads(text) if text else []
    except ValueError:
        return []
    return found if isinstance(found, list) else []


def _json_object(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        found = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _session_rows(
    sid: str,
    compactions: pl.DataFrame,
    history: pl.DataFrame,
    items: dict[str, pl.DataFrame],
    ends: dict[str, int],
) -> list[dict[str, Any]]:
    source, rows, seen = Source(), [], 0
    messages = list(history.iter_rows(named=True))
    for record in compactions.iter_rows(named=True):
        end = ends.get(record["id"], len(messages))
        for message in messages[seen:end]:
            source.add(_message_text(message))
        seen = max(seen, end)
        for kind, anchor, position, claim in _claims(record, items.get(record["id"])):
            missing = check(claim, source)
            rows.append(
                {
                    "session_id": sid,
                    "compaction_id": record["id"],
                    "kind": kind,
                    "anchor_type": anchor,
                    "position": position,
                    "claim": claim,
                    "grounded": not missing,
                    "missing": ", ".join(missing) or None,
                }
            )
    return rows


def _claims(
    record: dict[str, Any], items: pl.DataFrame | None
) -> Iterator[tuple[str, str | None, int, str]]:
    anchored: Iterable[dict[str, Any]] = items.iter_rows(named=True) if items is not None else ()
    for item in anchored:
        yield "anchor", item["anchor_type"], int(item["position"] or 0), str(item["item"])
    for position, sentence in enumerate(summary_sentences(record["summary_text"])):
        yield "sentence", None, position, sentence


def grounded_share(grounding: pl.DataFrame) -> pl.DataFrame:
    """Per compaction: its claims, how many are grounded, and the share (null without claims)."""
    return grounding.group_by("session_id", "compaction_id", maintain_order=True).agg(
        claims=pl.len(),
        grounded_claims=pl.col("grounded").sum(),
        grounded_share=pl.col("grounded").mean(),
    )
