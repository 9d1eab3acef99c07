"""Precision and recall of the offline summariser's key-decision rule on hand-labelled sentences.

``decision_labels.json`` holds, per labelled assistant sentence of the shared dev transcripts,
where it is (file relative to the transcripts folder, session id, message index), the sha256 of
its text as ``split_prose_sentences`` gives it, and the hand label; never the text, which is read
from the transcripts at run time. A sentence that can no longer be found by its hash fails the
test, so the labels cannot silently drift from what the rule is measured on. The fixture's own
``criterion`` says what counts as a decision. This module does not label anything itself or
judge the summary as a whole (``test_extractive.py`` does that).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from analytics.importers import ImportedSession, import_path
from compactor.summaries.extractive import is_decision, split_prose_sentences
from tests.transcripts import TRANSCRIPTS

FIXTURE = Path(__file__).with_name("decision_labels.json")

# The rule before issue 17, kept as the baseline the samples were drawn with.
OLD_DECISION_RE = re.compile(
    r"\b(?:I(?:'|’|\s+wi)ll\s+(?:use|go with|switch|implement|modify|change|replace|keep|fix)"
    r"|let'?s\s+(?:use|go with)|we(?:'|’)ll use|decided|decide to|instead of|rather than"
    r"|we should|should use|going with|chose|choose to|opted|opt for|the fix is"
    r"|the solution is|the approach is|switch(?:ed|ing)? to)\b|决定|改用|选择",
    re.IGNORECASE,
)

# Reached on the 319 labels (before -> after): precision 0.436 -> 0.922 over every labelled
# sentence; recall 0.983 -> 0.862 over the decisions in the samples drawn from the old rule's
# picks and non-picks (its dropped picks are over-sampled there, so this is the pessimistic
# figure; 0.977 -> 0.955 in the first, plain random sample); recall 0.638 -> 0.942 over every
# labelled decision, most of which the old rule missed.
MIN_PRECISION = 0.90
MIN_RECALL_OF_OLD_SAMPLES = 0.85
MIN_RECALL = 0.90
# Samples drawn from the old rule's picks or non-picks (not from the new rule's picks, whose
# recall is 1 by construction).
OLD_DRAWS = ("old_rule_picked", "old_rule_not_picked", "r2_old_only", "r3_old_only", "r4_old_only")


@dataclass(frozen=True)
class Labelled:
    sample: str
    format: str
    decision: bool
    text: str = field(repr=False)  # transcript text stays out of test reports


@dataclass(frozen=True)
class Resolved:
    labelled: list[Labelled]
    missing: list[str]


def _entries() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))["labels"]
    return entries


def _sentence_by_hash(content: str, sha256: str) -> str | None:
    for sentence in split_prose_sentences(content):
        if hashlib.sha256(sentence.encode("utf-8")).hexdigest() == sha256:
            return sentence
    return None


def _find(sessions: list[ImportedSession], entry: dict[str, Any]) -> str | None:
    """The labelled sentence: at its session and message first, else anywhere in the file's
    assistant messages (an importer that renumbers messages or renames a side chain does not
    lose it; a changed sentence or splitter does)."""
    ordered = sorted(sessions, key=lambda s: s.session_id != entry["session_id"])
    for session in ordered:
        index = entry["message_index"]
        hinted = session.messages[index : index + 1] if session is ordered[0] else []
        for message in [*hinted, *session.messages]:
            if message.role == "assistant":
                text = _sentence_by_hash(message.content, entry["sha256"])
                if text is not None:
                    return text
    return None


def _resolve(entries: list[dict[str, Any]]) -> Resolved:
    labelled: list[Labelled] = []
    missing: list[str] = []
    for path in sorted({e["path"] for e in entries}):
        sessions, _issues = import_path(TRANSCRIPTS / path)
        for entry in (e for e in entries if e["path"] == path):
            text = _find(sessions, entry)
            if text is None:
                missing.append(
                    f"{path} session {entry['session_id']!r} message {entry['message_index']}: "
                    f"no assistant sentence with sha256 {entry['sha256']}"
                )
                continue
            labelled.append(Labelled(entry["sample"], entry["format"], entry["decision"], text))
    return Resolved(labelled, missing)


@pytest.fixture(scope="module")
def resolved() -> Resolved:
    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"shared transcripts not present at {TRANSCRIPTS}")
    return _resolve(_entries())


def _precision_recall(labelled: list[Labelled], rule: Callable[[str], bool]) -> tuple[float, float]:
    picked = [item for item in labelled if rule(item.text)]
    positives = [item for item in labelled if item.decision]
    true_picks = sum(item.decision for item in picked)
    return true_picks / max(len(picked), 1), true_picks / max(len(positives), 1)


def _old_rule(sentence: str) -> bool:
    return OLD_DECISION_RE.search(sentence) is not None


def test_every_labelled_sentence_is_found_in_the_transcripts_by_its_hash(
    resolved: Resolved,
) -> None:
    assert resolved.missing == [], (
        f"{len(resolved.missing)} labelled sentences of {FIXTURE.name} are not in the transcripts "
        f"(first: {resolved.missing[0]}); the transcripts or the sentence splitter changed: "
        "relabel a fresh sample rather than dropping entries"
    )


def test_the_samples_are_the_sizes_and_draws_the_fixture_says(resolved: Resolved) -> None:
    by_sample = Counter(item.sample for item in resolved.labelled)
    old_picked = [item for item in resolved.labelled if item.sample == "old_rule_picked"]
    not_picked = [item for item in resolved.labelled if item.sample == "old_rule_not_picked"]

    assert by_sample["old_rule_picked"] >= 80
    assert by_sample["old_rule_not_picked"] >= 40
    assert {item.format for item in old_picked} == {
        "aider",
        "claude-code",
        "mini-swe-agent",
        "openai",
        "swe-agent",
    }
    old_only = [item for item in resolved.labelled if item.sample.endswith("_old_only")]
    assert all(_old_rule(item.text) for item in old_picked + old_only)
    assert not any(_old_rule(item.text) for item in not_picked)


def test_the_old_rule_was_below_the_precision_now_required(resolved: Resolved) -> None:
    precision, _recall = _precision_recall(resolved.labelled, _old_rule)
    assert precision < MIN_PRECISION


def test_the_decision_rule_is_precise_on_the_labelled_sample(resolved: Resolved) -> None:
    precision, _recall = _precision_recall(resolved.labelled, is_decision)
    assert precision >= MIN_PRECISION, f"precision {precision:.3f} < {MIN_PRECISION}"


def test_the_decision_rule_keeps_the_decisions_the_old_rule_was_sampled_on(
    resolved: Resolved,
) -> None:
    drawn = [item for item in resolved.labelled if item.sample in OLD_DRAWS]
    _precision, recall = _precision_recall(drawn, is_decision)
    assert recall >= MIN_RECALL_OF_OLD_SAMPLES, f"recall {recall:.3f} < {MIN_RECALL_OF_OLD_SAMPLES}"


def test_the_decision_rule_finds_most_labelled_decisions(resolved: Resolved) -> None:
    _precision, old_recall = _precision_recall(resolved.labelled, _old_rule)
    _precision, recall = _precision_recall(resolved.labelled, is_decision)
    assert recall >= MIN_RECALL > old_recall, f"recall {recall:.3f} < {MIN_RECALL}"
