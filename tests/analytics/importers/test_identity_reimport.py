"""Re-importing a transcript whose content changed ends as a clean import of its final state.

The store keeps every version's events (the spool is append-only); the *live* sessions (those
not superseded) must hold exactly what a clean import of the final file gives in a fresh home.
Expected figures come from that separate clean import, never from the implementation.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from analytics.cli.commands import run_import
from analytics.importers import import_path
from analytics.importers.events import session_events
from analytics.store import open_store
from tests.analytics.cli_helpers import TRANSCRIPTS, run, spool_bytes

CLAUDE_FILE = (
    TRANSCRIPTS / "claude-code-viewer/mock-global-claude-dir/projects/sample-project"
    "/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"
)
Messages = dict[str, list[tuple[int, str, str]]]


def _live_messages(home: Path) -> Messages:
    """Per identity (the id the importer gave), the live version's (index, role, sha256)."""
    sql = """
        SELECT coalesce(s.metadata->>'identity', s.session_id), m.idx, m.role, m.sha256
        FROM messages m JOIN sessions s USING (session_id)
        WHERE s.deleted_at IS NULL ORDER BY 1, 2"""
    out: Messages = {}
    with open_store(home, read_only=True) as store:
        for sid, idx, role, sha in store.query(sql).iter_rows():
            out.setdefault(str(sid), []).append((int(idx), str(role), str(sha)))
    return out


def _break_line(src: Path, dst: Path, line: int) -> None:
    lines = src.read_text(encoding="utf-8").split("\n")
    lines[line] = lines[line][:50]  # a torn JSON line in the middle of the file
    dst.write_text("\n".join(lines), encoding="utf-8")


def test_reimporting_a_repaired_transcript_leaves_exactly_the_clean_import(tmp_path: Path) -> None:
    work = tmp_path / "session.jsonl"
    _break_line(CLAUDE_FILE, work, 100)
    home, clean = tmp_path / "home", tmp_path / "clean"
    assert run("import", work, "--home", home).exit_code == 1  # the broken line is rejected
    broken = _live_messages(home)
    spool_after_broken = spool_bytes(home)

    shutil.copyfile(CLAUDE_FILE, work)
    report = run_import([work], home)
    assert run("import", work, "--home", clean).exit_code == 0
    expected = _live_messages(clean)

    assert broken != expected, "the broken line must have changed what was imported"
    assert _live_messages(home) == expected
    unchanged = {sid for sid, msgs in expected.items() if broken.get(sid) == msgs}
    assert report.skipped == len(unchanged)
    changed = {old.split("~")[0] for old, _new in report.replaced}
    assert changed == {sid for sid in expected if sid not in unchanged and sid in broken}
    gone = {sid for sid, _file in report.retired}
    assert gone == set(broken) - set(expected)
    notes = "\n".join(report.notes())
    assert all(f"replaced {old} by {new}" in notes for old, new in report.replaced)
    assert all(f"superseded {sid}: no longer in" in notes for sid in gone)
    for name, data in spool_after_broken.items():  # events are appended, never rewritten
        assert spool_bytes(home)[name] == data


def test_reimporting_an_unchanged_transcript_writes_no_new_events(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = run_import([CLAUDE_FILE], home)
    sessions = len(import_path(CLAUDE_FILE)[0])
    assert first.sessions == sessions and first.skipped == 0
    again = run_import([CLAUDE_FILE], home)
    assert again.sessions == 0 and again.skipped == sessions
    assert again.ingest.new_events == 0 and not again.replaced and not again.retired
    assert f"{sessions} session(s) unchanged" in "\n".join(again.notes())


def test_an_interrupted_import_is_completed_not_skipped(tmp_path: Path) -> None:
    """A spool holding only the first events of a session (the importing process was killed)
    is completed by the next import, under the same session id."""
    (imported,), _ = import_path(CLAUDE_FILE.parent / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl")
    home, clean = tmp_path / "home", tmp_path / "clean"
    assert run("import", imported.source_path, "--home", clean).exit_code == 0
    (clean_spool,) = (clean / "spool").glob("*.jsonl")
    lines = clean_spool.read_text(encoding="utf-8").splitlines(keepends=True)
    (home / "spool").mkdir(parents=True)
    (home / "spool" / "killed.jsonl").write_text("".join(lines[:5]), encoding="utf-8")

    report = run_import([imported.source_path], home)
    assert report.resumed == 1 and report.skipped == 0 and not report.replaced
    assert _live_messages(home) == _live_messages(clean)
    assert len(list(session_events(imported, "full"))) == len(lines)


def _chat(path: Path, *texts: str) -> None:
    msgs = [{"role": "system", "content": "You help."}]
    for i, text in enumerate(texts):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    path.write_text(json.dumps({"id": "chat-1", "messages": msgs}), encoding="utf-8")


def test_a_source_changing_back_and_forth_always_ends_as_its_latest_state(tmp_path: Path) -> None:
    chat, home = tmp_path / "chat.json", tmp_path / "home"
    states = [
        ("fix the bug", "done"),
        ("fix the bug", "done", "thanks", "ok"),
        ("fix the bug", "done"),
    ]
    seen: list[str] = []
    for k, state in enumerate([*states, states[1]]):
        _chat(chat, *state)
        report = run_import([chat], home)
        clean = tmp_path / f"clean-{k}"
        run_import([chat], clean)
        assert _live_messages(home) == _live_messages(clean), f"state {k}"
        assert report.sessions == 1 and len(report.replaced) == (k > 0)
        seen += [new for _old, new in report.replaced] or ["chat-1"]
    assert len(set(seen)) == 4, "each version gets its own session id"
