"""Native compactions in the dev native set: each one is exactly one ``compaction_recorded``.

Every expected figure is read here from the raw files with plain ``json``, never from the
importers: Claude Code's ``compact_boundary`` lines and their ``preTokens``, Codex's
``compacted`` items and the last ``token_count`` before each, OpenHands' condensation events.
The Claude Code history is checked against a chain walked from the raw lines (``parentUuid``,
across each boundary by ``logicalParentUuid``), and each summary's user-intent anchor against its
"Primary Request and Intent" section.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from analytics.importers import ImportedSession, import_path
from analytics.importers.events import session_events
from compactor import AnchorType, CompactionRecord
from compactor.events import CompactionRecorded, parse_event
from tests.transcripts import NATIVE

needs_native = pytest.mark.skipif(not NATIVE.is_dir(), reason=f"{NATIVE} not present")
CLAUDE = sorted(NATIVE.glob("claude-code/**/*.jsonl")) if NATIVE.is_dir() else []
CODEX = sorted(NATIVE.glob("codex/.codex/sessions/**/*.jsonl")) if NATIVE.is_dir() else []
OPENHANDS_V0 = sorted(NATIVE.glob("openhands-v0/*.json")) if NATIVE.is_dir() else []
OPENHANDS_SDK = (
    sorted(p for p in NATIVE.glob("openhands-v1/*") if p.is_dir()) if NATIVE.is_dir() else []
)


@pytest.fixture(scope="module")
def imported() -> dict[str, ImportedSession]:
    """Every native session, by source path (each file or folder is one main session)."""
    sessions, issues = import_path(NATIVE)
    unexpected = [
        str(i) for i in issues if Path(i.path).name not in ("manifest.json", "SOURCES.md")
    ]
    assert unexpected == []
    return {s.source_path: s for s in sessions if s.parent_session_id is None}


def _records(session: ImportedSession) -> list[CompactionRecorded]:
    """The compaction payloads the import emits, each read back from its JSON line."""
    out = []
    for event in session_events(session, "full"):
        if event.type == "compaction_recorded":
            parsed = parse_event(event.to_json_line()).payload
            assert isinstance(parsed, CompactionRecorded)
            out.append(parsed)
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _native(record: CompactionRecord, harness: str) -> None:
    assert (record.origin, record.harness, record.effective) == ("native", harness, True)


# ---------------------------------------------------------------- one event per compaction


@needs_native
@pytest.mark.parametrize("path", CLAUDE, ids=lambda p: p.parts[-4])
def test_every_claude_code_boundary_is_one_compaction_with_its_pre_tokens(
    path: Path, imported: dict[str, ImportedSession]
) -> None:
    boundaries = [r for r in _lines(path) if r.get("subtype") == "compact_boundary"]
    records = [p.record for p in _records(imported[str(path)])]
    assert boundaries, "the dev set's Claude Code files all compacted"
    assert [r.tokens_before for r in records] == [
        b["compactMetadata"]["preTokens"] for b in boundaries
    ]
    assert [r.trigger for r in records] == [b["compactMetadata"]["trigger"] for b in boundaries]
    for record in records:
        _native(record, "claude-code")
        assert record.tokens_before_source == "harness"
        assert 0 < record.tokens_after < record.tokens_before


def _last_prompt_before(rows: list[dict[str, Any]], end: int) -> int:
    """The prompt of the last ``token_count`` before row ``end`` that reported one."""
    for row in reversed(rows[:end]):
        info = row.get("payload", {}).get("info") if row.get("type") == "event_msg" else None
        if row.get("payload", {}).get("type") == "token_count" and info:
            prompt = info["last_token_usage"]["input_tokens"]
            if prompt:
                return int(prompt)
    raise AssertionError("no token_count before the compaction")


@needs_native
@pytest.mark.parametrize("path", CODEX, ids=lambda p: p.name[:30])
def test_every_codex_compacted_item_is_one_compaction_with_the_last_token_count(
    path: Path, imported: dict[str, ImportedSession]
) -> None:
    rows = _lines(path)
    compacted = [i for i, r in enumerate(rows) if r["type"] == "compacted"]
    records = [p.record for p in _records(imported[str(path)])]
    assert compacted
    assert [r.tokens_before for r in records] == [_last_prompt_before(rows, i) for i in compacted]
    for record, i in zip(records, compacted, strict=True):
        _native(record, "codex")
        assert record.tokens_before_source == "harness"
        remote = "replacement_history" in rows[i]["payload"]
        assert record.summary_encrypted is remote
        if not remote:
            assert record.summary_text == rows[i]["payload"]["message"]


@needs_native
def test_codex_remote_compaction_is_encrypted_with_a_null_summary(
    imported: dict[str, ImportedSession],
) -> None:
    remote = [
        (path, i)
        for path in CODEX
        for i, r in enumerate(_lines(path))
        if r["type"] == "compacted" and "replacement_history" in r["payload"]
    ]
    assert remote, "the dev set has one remote Codex compaction"
    for path, i in remote:
        session = imported[str(path)]
        [event] = [e for e in session_events(session, "full") if e.type == "compaction_recorded"]
        assert '"summary_text":null' in event.to_json_line()
        payload = parse_event(event.to_json_line()).payload
        assert isinstance(payload, CompactionRecorded)
        assert (payload.record.summary_text, payload.record.summary_encrypted) == (None, True)
        kept_texts = [
            "\n".join(b["text"] for b in item["content"])
            for item in _lines(path)[i]["payload"]["replacement_history"]
            if item["type"] == "message"
        ]
        kept = [v for v in payload.after if v.status == "kept"]
        assert [
            session.messages[v.index].content for v in kept if v.index is not None
        ] == kept_texts


def _condensations_v0(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    events = doc["trajectory"] if isinstance(doc, dict) else doc
    return [e for e in events if e.get("action") == "condensation"]


def _condensations_sdk(folder: Path) -> list[dict[str, Any]]:
    files = sorted((folder / "event_service" / "events").glob("event-*.json"))
    events = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    return [e for e in events if e.get("kind") == "Condensation"]


@needs_native
@pytest.mark.parametrize(
    ("source", "condensations"),
    [(p, _condensations_v0) for p in OPENHANDS_V0]
    + [(p, _condensations_sdk) for p in OPENHANDS_SDK],
    ids=lambda x: x.name if isinstance(x, Path) else "",
)
def test_every_openhands_condensation_is_one_compaction_with_its_summary(
    source: Path, condensations: Any, imported: dict[str, ImportedSession]
) -> None:
    raw = condensations(source)
    payloads = _records(imported[str(source)])
    assert raw
    summaries = [e.get("summary", e.get("args", {}).get("summary")) for e in raw]
    assert [p.record.summary_text for p in payloads] == summaries
    for payload in payloads:
        _native(payload.record, "openhands")
        assert payload.record.tokens_before_source == "estimated"
        assert payload.record.tokens_before > payload.record.tokens_after > 0
        [summary] = [v for v in payload.after if v.status == "synthetic"]
        assert [s.content for s in payload.synthetic] == [payload.record.summary_text]
        assert summary.index is None
        assert payload.record.summarized == sum(
            1 for v in payload.before if v.status == "summarized"
        )


# ---------------------------------------------------------------- the Claude Code history


def _raw_chain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user, assistant and boundary lines of the last line's tree, in file order: every
    line whose ``parentUuid`` links (``logicalParentUuid`` at a compact boundary) lead to the
    root the last user or assistant line leads to. (The dev files have no abandoned branches,
    so the tree is the chain; parallel tool results hang off the line holding their call.)"""
    by_uuid = {r["uuid"]: r for r in rows if "uuid" in r}

    def root(row: dict[str, Any]) -> str:
        while True:
            parent = row.get("parentUuid") or row.get("logicalParentUuid")
            if parent not in by_uuid:
                return str(row["uuid"])
            row = by_uuid[parent]

    last = next(r for r in reversed(rows) if r.get("type") in ("user", "assistant"))
    wanted = root(last)
    kept = [r for r in rows if r.get("type") in ("user", "assistant") or _boundary(r)]
    return [r for r in kept if "uuid" in r and root(r) == wanted]


def _boundary(row: dict[str, Any]) -> bool:
    return row.get("subtype") == "compact_boundary"


def _message_count(lines: list[dict[str, Any]]) -> int:
    """Messages the lines make: one per assistant ``message.id``; per user line, each tool
    result and each run of text blocks (a plain string is one); compact summaries none."""
    responses = {r["message"]["id"] for r in lines if r["type"] == "assistant"}
    count = len(responses)
    for row in lines:
        if row["type"] != "user" or row.get("isCompactSummary"):
            continue
        content = row["message"]["content"]
        if isinstance(content, str):
            count += 1
            continue
        kinds = [b["type"] for b in content if b["type"] in ("text", "tool_result")]
        runs = sum(
            1 for i, k in enumerate(kinds) if k == "text" and (i == 0 or kinds[i - 1] != "text")
        )
        count += runs + kinds.count("tool_result")
    return count


@needs_native
@pytest.mark.parametrize("path", CLAUDE, ids=lambda p: p.parts[-4])
def test_the_claude_code_history_is_the_original_one_without_the_summaries(
    path: Path, imported: dict[str, ImportedSession]
) -> None:
    rows = _lines(path)
    chain = _raw_chain(rows)
    cuts = [i for i, r in enumerate(chain) if _boundary(r)]
    spans = [chain[a:b] for a, b in zip([0, *cuts], [*cuts, len(chain)], strict=True)]
    session = imported[str(path)]
    assert session.metadata["off_branch_lines"] == 0
    assert len(session.messages) == sum(_message_count(span) for span in spans)
    positions = [sum(_message_count(span) for span in spans[: k + 1]) for k in range(len(cuts))]
    assert [c.at for c in session.compactions] == positions
    summaries = [r["message"]["content"] for r in chain if r.get("isCompactSummary")]
    assert len(summaries) == len(cuts)
    texts = {m.content for m in session.messages if m.role == "user"}
    assert not texts & set(summaries), "a compact summary became a user message"
    assert not any(t.startswith("This session is being continued") for t in texts)
    for payload, summary in zip(_records(session), summaries, strict=True):
        assert [s.content for s in payload.synthetic] == [summary]
        assert [v.status for v in payload.after] == ["synthetic"]
    titles = [r["summary"] for r in rows if r.get("type") == "summary"]
    assert session.metadata["summaries"] == titles, "title lines stay titles"


def _primary_request(summary: str) -> str:
    """The text of the "Primary Request and Intent" section after the summary's Summary line."""
    body = summary[summary.index("\nSummary:") :]
    start = re.search(r"(?m)^(?:#+ )?1\. Primary Request and Intent:.*$", body)
    assert start is not None
    end = re.search(r"(?m)^(?:#+ )?2\. ", body[start.end() :])
    assert end is not None
    return body[start.start() : start.end() + end.start()]


@needs_native
@pytest.mark.parametrize("path", CLAUDE, ids=lambda p: p.parts[-4])
def test_claude_code_user_intent_anchor_comes_from_primary_request_and_intent(
    path: Path, imported: dict[str, ImportedSession]
) -> None:
    summaries = [r["message"]["content"] for r in _lines(path) if r.get("isCompactSummary")]
    payloads = _records(imported[str(path)])
    assert len(payloads) == len(summaries)
    for payload, summary in zip(payloads, summaries, strict=True):
        section = _primary_request(summary)
        [intent] = [a for a in payload.record.anchors if a.type == AnchorType.USER_INTENT]
        assert intent.items, "the user intent anchor is empty"
        assert all(item in section for item in intent.items)
        items = [i.item for i in payload.anchor_items if i.anchor_type == "user_intent"]
        assert items == intent.items


@needs_native
def test_reimporting_gives_the_same_event_ids_and_record_ids(
    imported: dict[str, ImportedSession],
) -> None:
    again, _issues = import_path(NATIVE)
    for session in again:
        if session.parent_session_id is not None:
            continue
        first = list(session_events(imported[session.source_path], "full"))
        second = list(session_events(session, "full"))
        assert [e.event_id for e in first] == [e.event_id for e in second]
        records = [e.payload.record.id for e in second if isinstance(e.payload, CompactionRecorded)]
        assert len(set(records)) == len(session.compactions)


@needs_native
def test_metadata_capture_writes_no_native_summary_or_anchor_text(
    imported: dict[str, ImportedSession],
) -> None:
    for session in imported.values():
        summaries = [c.summary_text[:80] for c in session.compactions if c.summary_text]
        for event in session_events(session, "metadata"):
            if isinstance(event.payload, CompactionRecorded):
                line = event.to_json_line()
                assert event.payload.record.summary_text in ("", None)
                assert all(s.content is None for s in event.payload.synthetic)
                assert event.payload.anchor_items == []
                assert not any(summary in line for summary in summaries)
