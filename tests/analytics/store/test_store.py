"""The DuckDB event store: the names SPEC 5.2 guarantees, content-addressed messages, views
rebuilt from the store alone, metadata capture, and bad database files.

Every store here is a real DuckDB file in a tmp dir, filled by the projector from a spool that
synthetic sessions wrote through ``CompactionSession`` and ``SpoolSink``. A lock is held by a
real second process. Ingestion itself (idempotence, crashes, quarantine) is in
test_projector.py.
"""

from __future__ import annotations

import json
from collections import Counter
from importlib import metadata
from pathlib import Path

import polars as pl
import pytest

from analytics.replay.synthetic import generate_session
from analytics.store import (
    STORE_SCHEMA_VERSION,
    EventStore,
    open_store,
)
from analytics.store.sql import TABLES
from compactor import Message, SpoolSink, ToolCall
from compactor.events import sha256_of
from tests.analytics.spool_helpers import (
    SessionRun,
    ingest,
    run_session,
)

ROOT = Path(__file__).resolve().parents[3]
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
    with open_store(tmp_path) as store:
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
    with open_store(tmp_path) as store:
        meta = store.meta()
    assert meta["schema_version"] == str(STORE_SCHEMA_VERSION)
    assert meta["engine"] == "duckdb"
    assert meta["engine_version"] == metadata.version("duckdb")
    with open_store(tmp_path) as reopened:  # reopening checks, never rewrites
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
    with open_store(tmp_path) as store:
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
    with open_store(tmp_path) as store:
        dangling = store.query(
            """SELECT cv.status, count(*) AS n FROM compaction_views cv
               ANTI JOIN message_blobs b USING (sha256) GROUP BY cv.status"""
        )
    assert dangling.height == 0, dangling.rows()


def test_each_distinct_message_is_stored_once_and_views_reference_it_by_hash(
    tmp_path: Path, full_run: SessionRun
) -> None:
    with open_store(tmp_path) as store:
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
        uses = Counter(sha256_of(m) for m in full_run.messages[1:])
        contents = {sha256_of(m): m.content for m in full_run.messages[1:]}
        expected = sorted(
            ((sha, n, contents[sha]) for sha, n in uses.items() if n > 1), key=lambda r: r[2]
        )
        assert repeated.rows() == expected
        assert {(sha256_of(m), 2, m.content) for m in REPEATED} <= set(expected)
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
    with open_store(tmp_path) as store:
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
    for spool_file in (tmp_path / "spool").rglob("*"):  # the spool files and its seq index
        if spool_file.is_file():
            assert SECRET.encode() not in spool_file.read_bytes(), spool_file


def test_metadata_session_is_not_joinable_to_text_another_session_stored(tmp_path: Path) -> None:
    """The same conversation captured twice, once in full and once as metadata: no hash of the
    metadata session's rows may find the full session's text."""
    sink = SpoolSink(tmp_path / "spool")
    shared = _with_repeats(6)
    full = run_session(tmp_path, sink, 6, messages=shared)
    private = run_session(tmp_path, sink, 6, capture="metadata", messages=shared)
    ingest(tmp_path)
    bare = {sha256_of(m) for m in shared} | {
        sha256_of(m) for v in full.views.values() for m in v[1]
    }
    with open_store(tmp_path) as store:
        blobs = set(store.query("SELECT sha256 FROM message_blobs")["sha256"].to_list())
        assert {sha256_of(m) for m in shared} <= blobs  # the full session's text is stored
        hashes = store.query(
            """SELECT sha256 FROM messages WHERE session_id = $1
               UNION ALL SELECT sha256 FROM compaction_views WHERE session_id = $1
               UNION ALL SELECT sha256 FROM offloads WHERE session_id = $1
               UNION ALL SELECT system_prompt_sha256 FROM sessions WHERE session_id = $1""",
            [private.session_id],
        )["sha256"].to_list()
        assert len(hashes) > len(shared)
        assert set(hashes).isdisjoint(blobs | bare)
        repeats = store.query(
            "SELECT idx, sha256 FROM messages WHERE session_id = ? AND idx >= ? ORDER BY idx",
            [private.session_id, len(shared) - 1 - len(REPEATED)],
        )["sha256"].to_list()
        assert repeats[0] == repeats[2] and repeats[1] == repeats[3]  # equal within the session
        assert repeats[0] != repeats[1]
        full_refs = store.query(
            """SELECT count(*) AS n FROM compaction_views cv ANTI JOIN message_blobs b
               USING (sha256) WHERE cv.session_id = ?""",
            [full.session_id],
        ).item()
        assert full_refs == 0  # the full session still resolves every reference


def test_empty_compaction_error_and_fallback_are_null_not_empty_strings(
    tmp_path: Path, full_run: SessionRun
) -> None:
    with open_store(tmp_path) as store:
        records = [
            json.loads(p)["record"]
            for p in store.query(
                "SELECT CAST(payload AS VARCHAR) AS p FROM events "
                "WHERE type = 'compaction_recorded'"
            )["p"].to_list()
        ]
        rows = store.query("SELECT id, error, fallback FROM compactions").rows()
    expected = {r["id"]: (r.get("error") or None, r.get("fallback") or None) for r in records}
    assert {r[0]: (r[1], r[2]) for r in rows} == expected
    assert any(f is not None for _e, f in expected.values())  # an emergency names its fallback
    assert any(f is None for _e, f in expected.values())
    assert all(v != "" for row in rows for v in row[1:])
