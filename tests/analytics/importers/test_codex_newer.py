"""Codex rollouts as newer versions write them (issue 30, item 2: importers current).

What Codex measured after a compaction is the ``token_count`` it writes right after, with a zero
prompt: its ``total_tokens`` is the size of the context left, read here from the raw lines of
the real rollouts. Newer rollouts (about 0.149 on, shapes from codex-rs ``rollout_payload.rs``
and ``models.rs``) carry the compaction call's own usage (``latest_token_usage_record``, when its
``response_id`` is the item's ``compaction_response_id``), may name the summary item
``context_compaction`` without ``encrypted_content``, and may list what was kept as
``replacement_history_entries``: built here line by line, as Codex writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analytics.importers import ImportedSession, import_path
from analytics.importers.codex_compactions import ENCRYPTED_PLACEHOLDER
from analytics.importers.session import NativeCompaction
from compactor import Message
from tests.transcripts import NATIVE

CODEX = sorted(NATIVE.glob("codex/.codex/sessions/**/*.jsonl")) if NATIVE.is_dir() else []
REQUEST = "fix the failing parser test in src/parse.rs"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]


def _after_reported(rows: list[dict[str, Any]], compacted: int) -> int | None:
    """The ``total_tokens`` of the first zero-prompt ``token_count`` after row ``compacted``,
    before any call that reported a prompt; None if Codex wrote none."""
    for row in rows[compacted + 1 :]:
        payload = row.get("payload") or {}
        info = payload.get("info") if payload.get("type") == "token_count" else None
        if row.get("type") == "compacted":
            return None
        if info:
            last = info["last_token_usage"]
            return int(last["total_tokens"]) if last["input_tokens"] == 0 else None
    return None


def _compactions(path: Path) -> list[NativeCompaction]:
    sessions, issues = import_path(path)
    assert issues == []
    return [c for s in sessions for c in s.compactions]


@pytest.mark.skipif(not CODEX, reason=f"no Codex rollouts under {NATIVE}")
@pytest.mark.parametrize("path", CODEX, ids=lambda p: p.name[:30])
def test_tokens_after_a_real_codex_compaction_are_codex_own_count(path: Path) -> None:
    rows = _lines(path)
    expected = [_after_reported(rows, i) for i, r in enumerate(rows) if r["type"] == "compacted"]
    assert expected and all(e for e in expected), "each dev rollout reports a size after"

    found = _compactions(path)

    assert [(c.tokens_after, c.tokens_after_source) for c in found] == [
        (e, "harness") for e in expected
    ]


def _event(kind: str, payload: dict[str, Any], second: int) -> dict[str, Any]:
    return {"timestamp": f"2026-11-20T10:00:{second:02d}.000Z", "type": kind, "payload": payload}


def _count(prompt: int, total: int, running: int) -> dict[str, Any]:
    usage = {"input_tokens": prompt, "cached_input_tokens": 0, "output_tokens": 10}
    return {
        "type": "token_count",
        "info": {
            "total_token_usage": {**usage, "input_tokens": running, "total_tokens": running},
            "last_token_usage": {**usage, "total_tokens": total},
            "model_context_window": 272_000,
        },
    }


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _rollout(tmp_path: Path, compacted: dict[str, Any]) -> Path:
    rows = [
        _event("session_meta", {"id": "019d-newer", "cwd": "/w", "cli_version": "0.155.1"}, 0),
        _event("turn_context", {"model": "gpt-5.2-codex"}, 1),
        _event("response_item", _user(REQUEST), 2),
        _event(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Looking."}],
            },
            3,
        ),
        _event("event_msg", _count(41_000, 41_200, 41_000), 4),
        _event("compacted", compacted, 5),
        _event("event_msg", _count(0, 2_345, 41_000), 6),
        _event("response_item", _user("and run the tests"), 7),
    ]
    path = tmp_path / "rollout-2026-11-20T10-00-00-019d-newer.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _newer_item(response_id: str) -> dict[str, Any]:
    return {
        "message": "",
        "replacement_history_entries": [
            {"type": "inline", "item": _user(REQUEST)},
            {"type": "reference", "item_id": "msg_earlier"},
            {"type": "inline", "item": {"type": "context_compaction", "id": "cmp_1"}},
        ],
        "window_number": 2,
        "compaction_response_id": "resp_9",
        "latest_token_usage_record": {
            "response_id": response_id,
            "usage": {"input_tokens": 52_000, "output_tokens": 321, "total_tokens": 52_321},
        },
    }


def test_a_newer_codex_compaction_reads_its_own_usage_entries_and_opaque_summary(
    tmp_path: Path,
) -> None:
    [session] = import_path(_rollout(tmp_path, _newer_item("resp_9")))[0]
    assert isinstance(session, ImportedSession)
    [found] = session.compactions

    assert (found.tokens_before, found.tokens_before_source) == (52_000, "harness")
    assert (found.tokens_after, found.tokens_after_source) == (2_345, "harness")
    assert (found.summary_text, found.summary_encrypted) == (None, True)
    request = next(i for i, m in enumerate(session.messages) if m.content == REQUEST)
    assert found.after == [request, Message(role="user", content=ENCRYPTED_PLACEHOLDER)]


def test_usage_of_another_call_is_not_taken_for_the_compaction_s(tmp_path: Path) -> None:
    [session] = import_path(_rollout(tmp_path, _newer_item("resp_other")))[0]
    [found] = session.compactions

    assert (found.tokens_before, found.tokens_before_source) == (41_000, "harness")
