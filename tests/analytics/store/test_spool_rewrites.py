"""Spool files that change under the projector: truncated and rewritten (logrotate's
``copytruncate``, a writer reopening with ``"w"``), re-read from the start, and two files whose
stored names could collide (SPEC 5; issue 16 items 2 and 4).

Each spool is a real file rewritten in place (same inode) or replaced; each store a real DuckDB
file. The projector keeps a fingerprint with every offset (the file's inode and a hash of the
bytes just before the offset), so new content at an old offset is read from the start; ids
deduplicate events, and a key deduplicates quarantined lines.
"""

from __future__ import annotations

import os
from pathlib import Path

from analytics.store import EventStore, open_store
from analytics.store.projector import Projector, source_name
from compactor.events import EventFactory, SessionStarted
from tests.analytics.spool_helpers import ingest, usage_lines, write_lines


def _started(session_id: str) -> str:
    return EventFactory(session_id).make(SessionStarted(context_window=8000)).to_json_line()


def _truncate(path: Path) -> None:
    """What ``copytruncate`` does after copying: the same inode, cut to nothing."""
    with path.open("r+b") as fh:
        fh.truncate(0)


def _session_events(store: EventStore, session_id: str) -> int:
    return int(store.query("SELECT count(*) FROM events WHERE session_id = ?", [session_id]).item())


def test_a_spool_file_truncated_and_rewritten_past_its_offset_is_read_from_the_start(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    agent = spool / "agent.jsonl"
    write_lines(agent, usage_lines("old", 20, start_seq=0))
    ingest(tmp_path)
    old_offset = agent.stat().st_size
    inode = agent.stat().st_ino

    _truncate(agent)  # the writer goes on appending: 41 new events, the start among them
    write_lines(agent, [_started("new"), *usage_lines("new", 40, start_seq=1)])
    assert agent.stat().st_ino == inode and agent.stat().st_size > old_offset

    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
        assert (result.new_events, result.duplicates) == (41, 0)
        assert _session_events(store, "new") == 41
        assert store.query("SELECT count(*) FROM sessions WHERE session_id = 'new'").item() == 1
        assert _session_events(store, "old") == 20  # what was read before stays
        assert store.offsets()["agent.jsonl"] == (agent.stat().st_size, 41)
        lines = store.query("SELECT line FROM events WHERE session_id = 'new' ORDER BY seq")
        assert lines["line"].to_list() == list(range(1, 42))


def test_a_spool_file_replaced_by_another_file_is_read_from_the_start(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    agent = spool / "agent.jsonl"
    write_lines(agent, usage_lines("first", 10))
    ingest(tmp_path)
    replacement = spool / "agent.jsonl.tmp"
    write_lines(replacement, [*usage_lines("second", 30)])
    os.replace(replacement, agent)  # a writer that renames a new file over the old one

    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
        assert result.new_events == 30
        assert _session_events(store, "second") == 30


def test_appending_to_a_spool_file_reads_only_the_new_bytes(tmp_path: Path) -> None:
    """The fingerprint costs no re-read: a file that only grew is read from its offset."""
    spool = tmp_path / "spool"
    agent = spool / "agent.jsonl"
    write_lines(agent, usage_lines("grows", 300))  # longer than the 4 KiB the fingerprint hashes
    ingest(tmp_path)
    before = agent.stat().st_size
    write_lines(agent, usage_lines("grows", 5, start_seq=300))
    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
        assert (result.new_events, result.duplicates) == (5, 0)
        assert result.bytes_read == agent.stat().st_size - before
        again = Projector(store, spool).ingest()
        assert (again.files, again.lines, again.bytes_read) == (0, 0, 0)


def test_quarantined_lines_of_a_spool_file_read_again_are_stored_once(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    agent = spool / "agent.jsonl"
    good = usage_lines("q", 6)
    write_lines(agent, [good[0], "this is not an event", good[1], "{", good[2]])
    ingest(tmp_path)

    _truncate(agent)  # rewritten shorter, then longer with other content: read twice more
    write_lines(agent, [good[0], "this is not an event"])
    ingest(tmp_path)
    _truncate(agent)
    write_lines(agent, [good[0], "this is not an event", good[3], "a new bad line", good[4]])
    with open_store(tmp_path) as store:
        result = Projector(store, spool).ingest()
        assert (result.new_events, result.quarantined) == (2, 1)
        rows = store.query("SELECT line, raw FROM quarantine ORDER BY line, raw").rows()
    assert rows == [(2, "this is not an event"), (4, "a new bad line"), (4, "{")]


def test_two_spool_files_whose_escaped_names_collide_keep_their_own_offsets(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    odd = os.fsdecode(b"run-\xff.jsonl")  # not UTF-8: stored with the byte escaped as \xff
    literal = "run-\\xff.jsonl"  # a real backslash, x, f, f
    write_lines(spool / odd, usage_lines("odd", 3))
    write_lines(spool / literal, usage_lines("literal", 5))

    with open_store(tmp_path) as store:
        first = Projector(store, spool).ingest()
        again = Projector(store, spool).ingest()
        assert first.new_events == 8
        assert (again.lines, again.new_events) == (0, 0)
        offsets = store.offsets()
        sources = store.query(
            "SELECT session_id, any_value(source) AS source FROM events GROUP BY session_id "
            "ORDER BY session_id"
        ).rows()
    assert offsets == {
        source_name(spool / odd): ((spool / odd).stat().st_size, 3),
        source_name(spool / literal): ((spool / literal).stat().st_size, 5),
    }
    assert sources == [
        ("literal", source_name(spool / literal)),
        ("odd", source_name(spool / odd)),
    ]
