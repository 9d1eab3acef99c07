"""Precision and recall of the audit's artifacts and of its kept/lost, on hand-labelled samples.

``tests/labels/artifacts.jsonl`` holds labels of artifacts that the audit of the dev native
sessions extracted (``native_audit.py``), read one by one in their context: is the text an
artifact at all (a real path, command or error line), and does the compacted view really keep
it. Each label names its transcript (relative to the shared transcripts folder), the
compaction's native id and the sha256 of the artifact's text, never the text: it is found again
among each audited artifact's forms by its hash. ``sample: random`` labels are a random sample
of what the extractor found (stratified by harness and compaction); ``sample: read`` labels
cover every artifact extracted from a few stretches of history read whole (``type: slice``),
and ``type: missed`` records what a reader sees there that the extractor did not take (message,
character offset and length in the stored content, and the sha256 of that text). The first
record states the labelling criteria.

Printed: precision of extraction (share of extracted, labelled artifacts that are real), of
kept and of lost; recall of lost and of kept; extraction recall on the read stretches. Required:
precision of extraction, kept and lost at least 0.95; no labelled real artifact stops being
extracted; extraction recall on the read stretches at least 0.9.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from analytics.jobs.artifacts import head_artifacts
from tests.analytics.jobs.native_audit import AuditedCompaction, NativeAudit

LABELS = Path(__file__).resolve().parents[2] / "labels" / "artifacts.jsonl"
MIN_PRECISION = 0.95
MIN_READ_RECALL = 0.9


def _records(kind: str) -> list[dict[str, Any]]:
    lines = LABELS.read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["type"] == kind]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Found:
    """One audited artifact: its compaction, kind, text, forms and the audit's ``kept``."""

    compaction: AuditedCompaction
    kind: str
    artifact: str
    kept: bool


def _by_hash(audit: NativeAudit) -> dict[tuple[str, str, str], Found]:
    """Every audited artifact by (file, native id, sha256 of its text or of any of its forms)."""
    out: dict[tuple[str, str, str], Found] = {}
    for c in audit.compactions:
        for row in c.rows.iter_rows(named=True):
            found = Found(c, row["kind"], row["artifact"], row["kept"])
            for text in {row["artifact"], *row["forms"]}:
                out.setdefault((c.raw.file, c.native_id, _sha(text)), found)
    return out


def _share(part: int, whole: int) -> float:
    return part / whole if whole else float("nan")


def _say(capsys: pytest.CaptureFixture[str], *lines: str) -> None:
    with capsys.disabled():
        print()
        for line in lines:
            print(f"  {line}")


def test_every_label_names_a_dev_native_compaction(native_audit: NativeAudit) -> None:
    known = {(c.raw.file, c.native_id) for c in native_audit.compactions}
    labels = _records("extracted") + _records("missed") + _records("slice")
    assert {(r["file"], r["compaction"]) for r in labels} <= known
    harnesses = Counter(r["file"].split("/")[1] for r in _records("extracted"))
    assert all(harnesses[h] >= 60 for h in ("claude-code", "codex")), harnesses
    assert harnesses["openhands-v0"] + harnesses["openhands-v1"] >= 60, harnesses


def test_extraction_precision_is_at_least_095_and_no_labelled_artifact_is_lost(
    native_audit: NativeAudit, capsys: pytest.CaptureFixture[str]
) -> None:
    found = _by_hash(native_audit)
    labels = [r for r in _records("extracted") if r["sample"] == "random"]
    seen = [r for r in labels if (r["file"], r["compaction"], r["sha256"]) in found]
    real = [r for r in seen if r["artifact"]]
    dropped_real = [r for r in labels if r["artifact"] and r not in seen]
    dropped_noise = [r for r in labels if not r["artifact"] and r not in seen]
    by_harness = Counter(
        r["file"].split("/")[1].removesuffix("-v0").removesuffix("-v1") for r in seen
    )
    precision = _share(len(real), len(seen))
    _say(
        capsys,
        f"extraction precision (random sample): {precision:.3f} ({len(real)} of {len(seen)} "
        f"extracted and labelled are artifacts; by harness {dict(sorted(by_harness.items()))})",
        f"labelled non-artifacts the extractor no longer takes: {len(dropped_noise)}",
    )
    assert dropped_real == [], "labelled real artifacts are no longer extracted"
    assert precision >= MIN_PRECISION


def test_kept_and_lost_precision_is_at_least_095(
    native_audit: NativeAudit, capsys: pytest.CaptureFixture[str]
) -> None:
    found = _by_hash(native_audit)
    judged = [
        (r, found[(r["file"], r["compaction"], r["sha256"])])
        for r in _records("extracted")
        if r["sample"] == "random" and r["artifact"] and r["kept"] is not None
        if (r["file"], r["compaction"], r["sha256"]) in found
    ]
    pairs = Counter((f.kept, r["kept"]) for r, f in judged)  # (audit, truth)
    kept_precision = _share(pairs[True, True], pairs[True, True] + pairs[True, False])
    lost_precision = _share(pairs[False, False], pairs[False, False] + pairs[False, True])
    lost_recall = _share(pairs[False, False], pairs[False, False] + pairs[True, False])
    kept_recall = _share(pairs[True, True], pairs[True, True] + pairs[False, True])
    agreement = _share(pairs[True, True] + pairs[False, False], len(judged))
    _say(
        capsys,
        f"kept/lost on {len(judged)} labelled artifacts: agreement {agreement:.3f}",
        f"  precision of lost {lost_precision:.3f} ({pairs[False, False]} of "
        f"{pairs[False, False] + pairs[False, True]}), of kept {kept_precision:.3f} "
        f"({pairs[True, True]} of {pairs[True, True] + pairs[True, False]})",
        f"  recall of lost {lost_recall:.3f}, of kept {kept_recall:.3f}",
    )
    assert lost_precision >= MIN_PRECISION
    assert kept_precision >= MIN_PRECISION


def _taken(audit: NativeAudit, compaction: AuditedCompaction, lo: int, hi: int) -> list[set[str]]:
    """The artifacts the extractor takes from history messages ``lo``..``hi`` of a
    compaction's head alone, each as the sha256s of its audited artifact's forms."""
    views = audit.views.filter(
        (pl.col("compaction_id") == compaction.entry["compaction_id"])
        & (pl.col("side") == "before")
        & (pl.col("status") == "summarized")
        & pl.col("history_index").is_between(lo, hi)
    )
    spellings = {
        text: frozenset(_sha(t) for t in {row["artifact"], *row["forms"]})
        for row in compaction.rows.iter_rows(named=True)
        for text in {row["artifact"], *row["forms"]}
    }
    return [
        set(s) for s in {spellings[a] for a in head_artifacts(views, audit.messages)["artifact"]}
    ]


def test_extraction_recall_on_the_stretches_read_whole(
    native_audit: NativeAudit, capsys: pytest.CaptureFixture[str]
) -> None:
    compactions = {(c.raw.file, c.native_id): c for c in native_audit.compactions}
    labels = [r for r in _records("extracted") if r["sample"] == "read"]
    lines, total_found, total_missed = [], 0, 0
    for piece in _records("slice"):
        where = (piece["file"], piece["compaction"])
        compaction = compactions[where]
        lo, hi = piece["messages"]
        mine = {r["sha256"]: r for r in labels if (r["file"], r["compaction"]) == where}
        real: set[str] = set()
        for shas in _taken(native_audit, compaction, lo, hi):
            label = next((mine[s] for s in shas if s in mine), None)
            assert label is not None, "every artifact taken from a read stretch is labelled"
            if label["artifact"]:
                real |= shas
        found = sum(1 for r in mine.values() if r["artifact"] and r["sha256"] in real)
        session = compaction.entry["session_id"]
        missed = 0
        for m in _records("missed"):
            if (m["file"], m["compaction"]) != where:
                continue
            content = native_audit.messages.filter(
                (pl.col("session_id") == session) & (pl.col("idx") == m["message"])
            )["content"][0]
            text = content[m["offset"] : m["offset"] + m["length"]]
            assert _sha(text) == m["sha256"], "the missed artifact is where its label says"
            if m["sha256"] in real:
                found += 1  # the extractor takes it now
            else:
                missed += 1
        total_found, total_missed = total_found + found, total_missed + missed
        lines.append(
            f"{piece['file']} messages {lo}-{hi}: {found} found, {missed} missed, "
            f"recall {_share(found, found + missed):.3f}"
        )
    recall = _share(total_found, total_found + total_missed)
    _say(capsys, f"extraction recall on stretches read whole: {recall:.3f}", *lines)
    assert recall >= MIN_READ_RECALL
