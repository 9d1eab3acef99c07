"""A transcript followed as it grows costs the spool its size once (issue 30, item 2).

``compactlens watch`` used to store a grown transcript whole as a new version each pass: a
session followed over 20 passes left 8.8x its bytes in the spool (quadratic in its length). Now
a pass appends what the file added to the live version (``Tail``), and a last message that grew
(Claude Code writes an answer's blocks as separate lines, often seconds apart) is appended again
as a new revision of itself, which the store keeps over the earlier one. Each test compares
the watched store with a one-shot import of the same final file, made here, message by message;
the spool's size is compared with that import's spool.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from analytics.cli.commands import run_import
from analytics.importers.following import state_path
from analytics.store import open_store
from tests.cli import invoke_ok
from tests.transcripts import NATIVE

CLAUDE = NATIVE / "claude-code" / "a6" / "e4c2a0fbd1" / "0" / "full.jsonl"
"""A real Claude Code 2.0.76 session of 54 lines with one automatic compaction."""
STEPS = 20
SPOOL_BOUND = 2.0
"""How many times a one-shot import's spool bytes the watched spool may take (8.8 before)."""

pytestmark = pytest.mark.skipif(not CLAUDE.is_file(), reason=f"no transcript at {CLAUDE}")

LIVE_ROWS = """
SELECT m.idx, m.role, m.bytes, m.sha256, m.tool_call_id, m.tool_call_ids::VARCHAR
FROM messages m JOIN sessions s USING (session_id)
WHERE s.deleted_at IS NULL AND (s.session_id = ? OR s.session_id LIKE ? || '~%')
ORDER BY m.idx
"""
NATIVE_SQL = """
SELECT count(*) FROM compactions c JOIN sessions s USING (session_id)
WHERE s.deleted_at IS NULL AND c.origin = 'native'
"""


def _lines() -> list[str]:
    return [x for x in CLAUDE.read_text(encoding="utf-8").split("\n") if x]


def _identity(lines: list[str]) -> str:
    return str(next(json.loads(x)["sessionId"] for x in lines if '"sessionId"' in x))


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")


def _watch(folder: Path, home: Path) -> str:
    return invoke_ok("watch", str(folder), "--once", "--home", str(home))


def _stored(home: Path, identity: str) -> tuple[list[tuple[Any, ...]], int, int]:
    """(the live messages, native compactions, live sessions) of ``home``'s store."""
    with open_store(home, read_only=True) as store:
        rows = store.query(LIVE_ROWS, [identity, identity]).rows()
        native = int(store.query(NATIVE_SQL).item())
        live = int(store.query("SELECT count(*) FROM sessions WHERE deleted_at IS NULL").item())
    return rows, native, live


def _one_shot(tmp_path: Path, lines: list[str], identity: str) -> tuple[Path, Any]:
    """A plain import of ``lines`` in a home of its own: its home and what it stored."""
    folder = tmp_path / "one-shot" / "in"
    folder.mkdir(parents=True)
    _write(folder / f"{identity}.jsonl", lines)
    home = tmp_path / "one-shot" / "home"
    run_import([folder], home)
    return home, _stored(home, identity)


def _spool_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in (home / "spool").glob("*.jsonl"))


def _split_message(lines: list[str]) -> int:
    """The index of the last line that continues the assistant message of the line before it
    (the same ``message.id``): a pass that reads the file up to it sees that message half."""
    ids = [
        (json.loads(x).get("message") or {}).get("id") if '"assistant"' in x else None
        for x in lines
    ]
    found = [i for i in range(1, len(ids)) if ids[i] is not None and ids[i] == ids[i - 1]]
    assert found, "the transcript has no assistant message written in several lines"
    return found[-1]


def _followed(tmp_path: Path) -> tuple[list[str], str, Path, Path, Path]:
    """The session's lines and id, the folder a watcher follows, its home, the live file."""
    lines = _lines()
    identity = _identity(lines)
    folder, home = tmp_path / "projects", tmp_path / "home"
    folder.mkdir()
    return lines, identity, folder, home, folder / f"{identity}.jsonl"


def test_a_transcript_that_grows_in_twenty_passes_costs_the_spool_its_size_once(
    tmp_path: Path,
) -> None:
    lines, identity, folder, home, live = _followed(tmp_path)
    said = []
    for step in range(1, STEPS + 1):
        _write(live, lines[: max(1, round(len(lines) * step / STEPS))])
        said.append(_watch(folder, home))

    one_home, expected = _one_shot(tmp_path, lines, identity)
    rows, native, sessions = _stored(home, identity)
    assert (rows, native, sessions) == expected
    assert len(rows) > 20 and native == 1
    ratio = _spool_bytes(home) / _spool_bytes(one_home)
    assert ratio <= SPOOL_BOUND, f"the spool took {ratio:.2f}x a one-shot import's bytes"
    extended = sum("extended: only what was added" in out for out in said)
    assert extended >= STEPS // 2, said


def test_a_message_read_half_written_is_stored_whole_once_its_next_line_comes(
    tmp_path: Path,
) -> None:
    lines, identity, folder, home, live = _followed(tmp_path)
    split = _split_message(lines)
    _write(live, lines[: split - 2])
    _watch(folder, home)
    _write(live, lines[:split])  # the assistant message's first lines only
    _watch(folder, home)
    half, _, _ = _stored(home, identity)

    _write(live, lines[: split + 1])  # its next block
    out = _watch(folder, home)

    _, expected = _one_shot(tmp_path, lines[: split + 1], identity)
    rows, native, sessions = _stored(home, identity)
    assert (rows, native, sessions) == expected
    assert "extended: only what was added" in out and "superseding" not in out
    assert half[-1][0] == rows[-1][0] and half[-1][2] < rows[-1][2]  # the same message, grown
    with open_store(home, read_only=True) as store:
        revisions = store.query(
            "SELECT count(*) FROM events WHERE type = 'message_appended' "
            "AND (payload->>'index')::BIGINT = ? AND session_id LIKE ? || '%'",
            [rows[-1][0], identity],
        ).item()
    assert revisions == 2


def test_a_pass_whose_state_was_lost_in_a_crash_still_stores_each_message_once(
    tmp_path: Path,
) -> None:
    lines, identity, folder, home, live = _followed(tmp_path)
    third = len(lines) // 3
    _write(live, lines[:third])
    _watch(folder, home)
    kept = tmp_path / "watch.json"
    shutil.copy(state_path(home), kept)
    _write(live, lines[: 2 * third])
    _watch(folder, home)
    shutil.copy(kept, state_path(home))  # killed after writing the spool, before the state

    _write(live, lines)
    _watch(folder, home)

    _, expected = _one_shot(tmp_path, lines, identity)
    assert _stored(home, identity) == expected
    with open_store(home, read_only=True) as store:
        twice = store.query(
            "SELECT payload->>'index', coalesce(payload->>'revision', '0'), count(*) FROM events "
            "WHERE type = 'message_appended' AND session_id IN "
            "(SELECT session_id FROM sessions WHERE deleted_at IS NULL) "
            "GROUP BY ALL HAVING count(*) > 1"
        ).rows()
    assert twice == []


def test_an_earlier_line_that_changed_makes_a_new_version(tmp_path: Path) -> None:
    lines, identity, folder, home, live = _followed(tmp_path)
    half = len(lines) // 2
    _write(live, lines[:half])
    _watch(folder, home)
    edited = list(lines)
    user = next(i for i, x in enumerate(lines[:half]) if '"type":"user"' in x.replace(" ", ""))
    obj = json.loads(edited[user])
    obj["message"]["content"] = "an earlier message, rewritten"
    edited[user] = json.dumps(obj)

    _write(live, edited)
    out = _watch(folder, home)

    _, expected = _one_shot(tmp_path, edited, identity)
    assert _stored(home, identity) == expected
    assert "superseding the version before" in out
