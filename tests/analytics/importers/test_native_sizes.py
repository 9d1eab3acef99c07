"""Hostile native transcripts cost work and memory in proportion to their size.

Measured in operations and bytes, never in seconds: the number of Python function calls an
import makes (``sys.setprofile``) for an input and for one four times its size, and the peak of
memory Python allocates (``tracemalloc``) against the file's size. What they guard:

- a Codex ``compacted`` item whose kept messages match nothing was matched by a linear search
  per message (quadratic: 8,000 of them took 181 s);
- an OpenHands V0 condensation of the event range 0..10**9 built the set of every id in it;
- a harness's summary of many megabytes became many times its size in memory (a 14 MB file
  took 2.2 GB): its text was kept whole, in the record, in the view after and one anchor item
  per line. A summary is now kept up to ``MAX_SUMMARY_CHARS`` with a note of the cut, its full
  size still counted in ``tokens_after``.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from analytics.importers import ImportedSession, import_path
from analytics.importers.events import session_events
from analytics.importers.native import MAX_SUMMARY_CHARS
from tests.analytics.cli.test_cli_hostile_text import write_claude_code
from tests.analytics.importers.test_native_bad_input import _conversation

# ---------------------------------------------------------------- measuring


def _calls(work: Callable[[], object]) -> int:
    """Python function calls ``work`` makes (C functions not counted)."""
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls


def _peak(work: Callable[[], object]) -> int:
    """The most memory Python held at once while ``work`` ran, above what it held before."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        work()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _stored(path: Path) -> list[ImportedSession]:
    """Import ``path`` and write every event as the spool does (one JSON line each)."""
    sessions, _ = import_path(path)
    for session in sessions:
        for event in session_events(session, "full"):
            event.model_dump_json()
    return sessions


# ---------------------------------------------------------------- Codex kept messages


def _item(kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": "2026-02-04T17:12:33.000Z", "type": kind, "payload": payload})


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _codex_kept(path: Path, n: int) -> Path:
    """``n`` user requests, then a remote compaction keeping ``n`` messages that match none of
    them and the ``n`` requests themselves, in reverse order (each found last in a search)."""
    lines = [_item("session_meta", {"id": "r1", "cwd": "/w"})]
    lines += [_item("response_item", _user(f"request {k}")) for k in range(n)]
    kept = [_user(f"note {k}") for k in range(n)] + [
        _user(f"request {k}") for k in reversed(range(n))
    ]
    summary = {"type": "compaction", "encrypted_content": "gAAAAA" + "x" * 200}
    lines.append(_item("compacted", {"message": "", "replacement_history": [*kept, summary]}))
    lines.append(_item("response_item", _user("go on")))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_codex_kept_messages_are_matched_in_work_linear_in_their_number(tmp_path: Path) -> None:
    small, large = (_codex_kept(tmp_path / f"r{n}.jsonl", n) for n in (300, 1200))
    [session] = _stored(small)  # the first run imports every module: not counted
    [compaction] = session.compactions
    assert sorted(r for r in compaction.after if isinstance(r, int)) == list(range(300))

    ratio = _calls(lambda: import_path(large)) / _calls(lambda: import_path(small))

    assert ratio < 6, f"4x the kept messages cost {ratio:.1f}x the calls (linear: 4x)"


# ---------------------------------------------------------------- OpenHands V0 id range


def test_an_openhands_v0_condensation_of_a_huge_id_range_costs_no_memory(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
        {"id": 2, "source": "agent", "action": "message", "args": {"content": "looking"}},
        {"id": 3, "source": "agent", "action": "condensation"}
        | {"args": {"forgotten_events_start_id": 2, "forgotten_events_end_id": 10**6}},
        {"id": 4, "source": "user", "action": "message", "args": {"content": "go on"}},
    ]
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    _stored(path)

    sessions: list[ImportedSession] = []
    peak = _peak(lambda: sessions.extend(_stored(path)))

    assert peak < 2_000_000, f"{peak:,} bytes for a {path.stat().st_size:,}-byte file"
    [session] = sessions
    [compaction] = session.compactions
    assert compaction.replaced == [1]  # event 2 forgotten, event 1 kept
    assert compaction.after == [0]


def test_an_openhands_v0_id_range_forgets_exactly_the_ids_in_it(tmp_path: Path) -> None:
    def message(n: int) -> dict[str, Any]:
        return {"id": n, "source": "user", "action": "message", "args": {"content": f"m{n}"}}

    args = {"forgotten_events_start_id": 3, "forgotten_events_end_id": 10**5, "summary": "s"}
    events = [message(n) for n in range(1, 6)]
    events.append(message(6) | {"id": "007"})  # an id written otherwise is no id of the range
    events.append({"id": 8, "source": "agent", "action": "condensation", "args": args})
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(events), encoding="utf-8")

    [session] = _stored(path)

    [compaction] = session.compactions
    assert compaction.replaced == [2, 3, 4]  # the events with ids 3, 4, 5
    assert 5 in compaction.after


# ---------------------------------------------------------------- long summaries

SUMMARY_BYTES = 4_000_000
LINE = "- fix src/app.py and rerun the failing cache test\n"
HEADS = {
    "claude-code": "Summary:\n1. Primary Request and Intent:\n",
    "codex": "## Request\n",
    "openhands": "USER_CONTEXT:\n",
}


def _long_summary(harness: str) -> str:
    """A summary of ``SUMMARY_BYTES`` under the heading of the user's intent in ``harness``'s
    summaries: every line one anchor item (before the cut)."""
    return HEADS[harness] + LINE * (SUMMARY_BYTES // len(LINE))


def _claude_code(root: Path) -> Path:
    path = root / "cc.jsonl"
    write_claude_code(path, "s1", "m", turns=2)
    lines = path.read_text(encoding="utf-8").splitlines()
    at = next(i for i, text in enumerate(lines) if '"isCompactSummary": true' in text)
    row = json.loads(lines[at])
    row["message"]["content"] = _long_summary("claude-code")
    lines[at] = json.dumps(row)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _codex(root: Path) -> Path:
    path = root / "rollout.jsonl"
    lines = [
        _item("session_meta", {"id": "r1", "cwd": "/w"}),
        _item("response_item", _user("fix the cache test")),
        _item("compacted", {"message": _long_summary("codex")}),
        _item("response_item", _user("go on")),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _openhands(root: Path) -> Path:
    _conversation(root / "conv")
    [file] = (root / "conv" / "event_service" / "events").glob("event-00008-*.json")
    event = json.loads(file.read_text(encoding="utf-8"))
    event["summary"] = _long_summary("openhands")
    file.write_text(json.dumps(event), encoding="utf-8")
    return root / "conv"


@pytest.mark.parametrize("write", [_claude_code, _codex, _openhands], ids=lambda f: f.__name__)
def test_a_long_summary_is_kept_cut_with_a_note_and_costs_memory_near_its_size(
    tmp_path: Path, write: Callable[[Path], Path]
) -> None:
    path = write(tmp_path)
    _stored(path)
    sessions: list[ImportedSession] = []

    peak = _peak(lambda: sessions.extend(_stored(path)))

    assert peak < 4 * SUMMARY_BYTES, f"{peak:,} bytes for a {SUMMARY_BYTES:,}-byte summary"
    [compaction] = sessions[0].compactions
    text = compaction.summary_text or ""
    assert text.startswith(HEADS[compaction.harness] + LINE)
    assert MAX_SUMMARY_CHARS < len(text) < MAX_SUMMARY_CHARS + 200
    whole = len(_long_summary(compaction.harness))
    assert f"of {whole:,} characters are kept" in text.splitlines()[-1]
    assert compaction.tokens_after >= SUMMARY_BYTES // 4  # the harness's view held it all
    items = sum(len(a.items) for a in compaction.anchors)
    assert 0 < items <= MAX_SUMMARY_CHARS // 40
