"""The DuckDB event store: the names SPEC 5.2 guarantees, content-addressed messages, views
rebuilt from the store alone, metadata capture, and bad database files.

Every store here is a real DuckDB file in a tmp dir, filled by the projector from a spool that
synthetic sessions wrote through ``CompactionSession`` and ``SpoolSink``. A lock is held by a
real second process. Ingestion itself (idempotence, crashes, quarantine) is in
test_projector.py.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import polars as pl
import pytest

from analytics.projector import rebuild
from analytics.store import (
    DB_NAME,
    STORE_SCHEMA_VERSION,
    EventStore,
    StoreLockedError,
    StoreVersionError,
)
from analytics.store_sql import TABLES
from analytics.synthetic import generate_session
from compactor import Message, SpoolSink, ToolCall, sha256_of
from tests.analytics.spool_helpers import (
    SessionRun,
    assert_same_tables,
    ingest,
    run_session,
    snapshot,
    snapshot_home,
    write_lines,
)

ROOT = Path(__file__).resolve().parents[2]
SECRET = "ZEBRA-7731-do-not-store"

GUARANTEED_COLUMNS = {
    "events": (
        "event_id",
        "type",
        "schema_version",
        "session_id",
        "seq",
        "occurred_at",
        "payload",
    ),
    "sessions": ("session_id",),
    "compactions": (
        "id",
        "session_id",
        "tier",
        "tokens_before",
        "tokens_after",
        "msgs_before",
        "msgs_after",
        "summarized",
        "preserved_tail",
        "compression_ratio",
        "error",
    ),
    "anchor_items": (),
    "offloads": (),
    "usage": (),
    "quarantine": ("source", "line", "reason", "raw"),
}

REPEATED = [
    Message(role="user", content="Thanks. Please also run the linter."),
    Message(role="assistant", content="Done, the linter is clean."),
    Message(role="user", content="Thanks. Please also run the linter."),
    Message(role="assistant", content="Done, the linter is clean."),
]
"""Two messages sent twice each: same role and content, so the same sha256."""


@pytest.fixture
def full_run(tmp_path: Path) -> SessionRun:
    """One full-capture session through every tier, ingested into tmp_path."""
    run = run_session(tmp_path, SpoolSink(tmp_path / "spool"), 1, messages=_with_repeats(1))
    assert len(run.views) >= 5
    ingest(tmp_path)
    return run


def _with_repeats(seed: int) -> list[Message]:
    return [*generate_session(seed), *REPEATED]


def _columns(store: EventStore, table: str) -> dict[str, str]:
    rows = store.query(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ?",
        [table],
    ).rows()
    return {str(name): str(kind) for name, kind in rows}


# ---------------------------------------------------------------- names and meta


def test_store_has_the_tables_and_columns_spec_5_2_guarantees(tmp_path: Path) -> None:
    with EventStore.for_home(tmp_path) as store:
        for table, columns in GUARANTEED_COLUMNS.items():
            found = _columns(store, table)
            assert found, f"table {table} is missing"
            missing = set(columns) - set(found)
            assert not missing, f"{table} lacks {missing}"
        events = _columns(store, "events")
        assert events["payload"] == "JSON"
        assert (events["seq"], events["schema_version"]) == ("BIGINT", "INTEGER")
        assert events["occurred_at"] == "TIMESTAMP WITH TIME ZONE"
        keys = store.query(
            "SELECT constraint_column_names FROM duckdb_constraints() "
            "WHERE table_name = 'events' AND constraint_type = 'PRIMARY KEY'"
        )
        assert keys["constraint_column_names"].to_list() == [["event_id"]]
        assert set(store.counts()) == set(TABLES)


def test_meta_records_schema_and_engine_versions(tmp_path: Path) -> None:
    with EventStore.for_home(tmp_path) as store:
        meta = store.meta()
    assert meta["schema_version"] == str(STORE_SCHEMA_VERSION)
    assert meta["engine"] == "duckdb"
    assert meta["engine_version"] == metadata.version("duckdb")
    with EventStore.for_home(tmp_path) as reopened:  # reopening checks, never rewrites
        assert reopened.meta() == meta


# ---------------------------------------------------------------- views and content


def _view_rows(store: EventStore, compaction_id: str, side: str) -> pl.DataFrame:
    return store.query(
        """SELECT cv.position, cv.history_index, cv.sha256, cv.status, b.role, b.content,
                  m.tool_calls
           FROM compaction_views cv
           LEFT JOIN message_blobs b USING (sha256)
           LEFT JOIN messages m ON m.session_id = cv.session_id AND m.idx = cv.history_index
           WHERE cv.compaction_id = ? AND cv.side = ? ORDER BY cv.position""",
        [compaction_id, side],
    )


def _system_prompt(store: EventStore, session_id: str) -> tuple[str, str]:
    """(sha256, content) of the session's system prompt, from the store alone."""
    row = store.query(
        """SELECT s.system_prompt_sha256, e.payload->>'system_prompt'
           FROM sessions s JOIN events e
             ON e.session_id = s.session_id AND e.type = 'session_started'
           WHERE s.session_id = ?""",
        [session_id],
    ).row(0)
    return str(row[0]), str(row[1])


def test_compaction_views_rebuilt_from_the_store_equal_the_views_the_session_used(
    tmp_path: Path, full_run: SessionRun
) -> None:
    with EventStore.for_home(tmp_path) as store:
        system_sha, system_text = _system_prompt(store, full_run.session_id)
        for compaction_id, (before, after) in full_run.views.items():
            for side, view in (("before", before), ("after", after)):
                rows = _view_rows(store, compaction_id, side)
                assert rows["position"].to_list() == list(range(len(view))), (compaction_id, side)
                for row, msg in zip(rows.iter_rows(named=True), view, strict=True):
                    where = (compaction_id, side, row["position"], row["status"])
                    assert row["sha256"] == sha256_of(msg), where
                    if row["status"] == "system":
                        assert (system_sha, system_text) == (row["sha256"], msg.content), where
                        continue
                    assert (row["role"], row["content"]) == (msg.role, msg.content), where
                    if row["history_index"] is not None:
                        calls = [ToolCall.model_validate(c) for c in json.loads(row["tool_calls"])]
                        assert tuple(calls) == msg.tool_calls, where


def test_every_view_reference_of_a_full_capture_session_resolves_to_a_stored_message(
    tmp_path: Path, full_run: SessionRun
) -> None:
    with EventStore.for_home(tmp_path) as store:
        dangling = store.query(
            """SELECT cv.status, count(*) AS n FROM compaction_views cv
               ANTI JOIN message_blobs b USING (sha256) GROUP BY cv.status"""
        )
    assert dangling.height == 0, dangling.rows()


def test_each_distinct_message_is_stored_once_and_views_reference_it_by_hash(
    tmp_path: Path, full_run: SessionRun
) -> None:
    with EventStore.for_home(tmp_path) as store:
        assert "content" not in _columns(store, "compaction_views")
        assert "content" not in _columns(store, "messages")
        blobs = store.query(
            "SELECT sha256, count(*) OVER (PARTITION BY sha256) AS n FROM message_blobs"
        )
        assert blobs["n"].max() == 1
        history = {sha256_of(m) for m in full_run.messages[1:]}
        synthetic = {
            sha256_of(m)
            for _before, after in full_run.views.values()
            for m in after
            if m.role != "system"
        }
        system = {sha256_of(full_run.messages[0])}  # the system prompt is a blob too
        assert set(blobs["sha256"].to_list()) == history | synthetic | system
        repeated = store.query(
            """SELECT m.sha256, count(*) AS uses, any_value(b.content) AS content
               FROM messages m JOIN message_blobs b USING (sha256)
               GROUP BY m.sha256 HAVING count(*) > 1 ORDER BY content"""
        )
        assert repeated.rows() == [
            (sha256_of(REPEATED[1]), 2, REPEATED[1].content),
            (sha256_of(REPEATED[0]), 2, REPEATED[0].content),
        ]
        referenced = store.query(
            """SELECT count(*) AS refs, count(DISTINCT sha256) AS distinct_refs
               FROM compaction_views WHERE status <> 'system'"""
        ).row(0)
        assert referenced[0] > 2 * referenced[1]  # many references, each content once


def _secret_messages(seed: int) -> list[Message]:
    """The synthetic session with SECRET in the system prompt, every message's text and every
    tool call's arguments (including the results large enough to be offloaded)."""
    out = []
    for msg in _with_repeats(seed):
        calls = tuple(
            tc.model_copy(update={"arguments": json.dumps({"path": f"{SECRET}/{tc.name}"})})
            for tc in msg.tool_calls
        )
        content = f"{msg.content}\nDecided: keep {SECRET} in mind. Next step: grep {SECRET}."
        out.append(msg.model_copy(update={"content": content, "tool_calls": calls}))
    return out


def test_metadata_capture_stores_no_message_content_anywhere(tmp_path: Path) -> None:
    run = run_session(
        tmp_path, SpoolSink(tmp_path / "spool"), 2, capture="metadata", messages=_secret_messages(2)
    )
    assert len(run.views) >= 3
    ingest(tmp_path)
    with EventStore.for_home(tmp_path) as store:
        effective = store.query("SELECT count(*) AS n FROM compactions WHERE effective").item()
        assert effective == len(run.views)
        assert store.counts()["offloads"] > 0  # the secret was in offloaded results too
        assert store.counts()["messages"] == len(run.messages) - 1
        text_columns = store.query(
            """SELECT table_name, column_name FROM information_schema.columns
               WHERE data_type IN ('VARCHAR', 'JSON') AND table_schema = 'main'"""
        ).rows()
        assert {t for t, _c in text_columns} >= {"events", "message_blobs", "compactions"}
        leaks = {
            f"{table}.{column}": n
            for table, column in text_columns
            if (
                n := store.query(
                    f'SELECT count(*) AS n FROM "{table}" '
                    f'WHERE contains(CAST("{column}" AS VARCHAR), ?)',
                    [SECRET],
                ).item()
            )
        }
    assert leaks == {}
    for spool_file in (tmp_path / "spool").iterdir():
        assert SECRET.encode() not in spool_file.read_bytes(), spool_file


# ---------------------------------------------------------------- bad store states


def _good_home(home: Path) -> dict[str, pl.DataFrame]:
    """A store ingested from a spool of two sessions and one bad line; its snapshot."""
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 3)
    run_session(home, sink, 4, capture="metadata")
    write_lines(home / "spool" / "zz-bad.jsonl", ["not an event"])
    ingest(home)
    reference = snapshot_home(home)
    assert reference["events"].height > 0 and reference["quarantine"].height == 1
    return reference


def _assert_rebuild_restores(home: Path, reference: dict[str, pl.DataFrame]) -> Path:
    """rebuild(home) recreates every table from the spool; returns the single backup."""
    result = rebuild(home)
    assert result.ingest.new_events == reference["events"].height
    assert_same_tables(reference, snapshot_home(home))
    backups = sorted(home.glob(f"{DB_NAME}.bak-*"))
    assert len(backups) == 1, backups
    assert result.backup == backups[0]
    return backups[0]


_HOLD_STORE = """
import sys, time
from analytics.store import EventStore

store = EventStore(sys.argv[1])
print("holding", flush=True)
time.sleep(120)
"""


@contextlib.contextmanager
def _held(db: Path) -> Iterator[subprocess.Popen[str]]:
    """A second process that opened ``db`` read-write and keeps it open until killed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_STORE, str(db)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "holding"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_store_held_by_another_process_raises_locked_error_saying_what_to_do(
    tmp_path: Path,
) -> None:
    reference = _good_home(tmp_path)
    with _held(tmp_path / DB_NAME) as holder:
        for read_only in (False, True):
            with pytest.raises(StoreLockedError) as caught:
                EventStore.for_home(tmp_path, read_only=read_only)
            message = str(caught.value)
            assert str(tmp_path / DB_NAME) in message
            assert f"held by PID {holder.pid}" in message
            assert "another process" in message and "one writer" in message
            assert "Stop that process" in message and "spool" in message
    backup = _assert_rebuild_restores(tmp_path, reference)
    with EventStore(backup, read_only=True) as old:
        assert_same_tables(reference, snapshot(old))


def test_garbage_database_file_raises_version_error_pointing_to_rebuild(tmp_path: Path) -> None:
    reference = _good_home(tmp_path)
    garbage = b"this is not a duckdb database\x00\xff" * 2048
    (tmp_path / DB_NAME).write_bytes(garbage)
    with pytest.raises(StoreVersionError) as caught:
        EventStore.for_home(tmp_path)
    message = str(caught.value)
    assert str(tmp_path / DB_NAME) in message
    assert "`compactlens rebuild`" in message and "backup" in message
    backup = _assert_rebuild_restores(tmp_path, reference)
    assert backup.read_bytes() == garbage


def test_store_of_another_schema_version_raises_version_error(tmp_path: Path) -> None:
    reference = _good_home(tmp_path)
    with EventStore.for_home(tmp_path) as store:
        store.con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreVersionError) as caught:
        EventStore.for_home(tmp_path)
    message = str(caught.value)
    assert "schema 99" in message and f"uses {STORE_SCHEMA_VERSION}" in message
    assert "`compactlens rebuild`" in message
    backup = _assert_rebuild_restores(tmp_path, reference)
    with pytest.raises(StoreVersionError):
        EventStore(backup, read_only=True)
