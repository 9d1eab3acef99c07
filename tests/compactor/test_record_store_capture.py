"""Metadata capture keeps content out of the record store too (issue 28, item 6.12).

A session with ``capture="metadata"`` must keep no message content anywhere it writes: its
events carry none (``redact_record``), and neither may the harness9-compatible record files of a
``JsonlRecordStore``, which held the full summary, the anchors quoting the user and the error
text. A marker in every user and tool message must appear in no record file, and each record's
summary and anchors must be redacted as the event's are.
"""

from __future__ import annotations

from pathlib import Path

from analytics.replay.synthetic import generate_session
from compactor import (
    CompactionOffloader,
    CompactionSession,
    ExtractiveSummarizer,
    JsonlRecordStore,
    ProgressiveCompactor,
)
from compactor.events import REDACTED

MARKER = "ZQX-private-7731"


def test_metadata_capture_keeps_no_content_in_the_record_files(tmp_path: Path) -> None:
    msgs = [
        m.model_copy(update={"content": f"{m.content} {MARKER}"})
        if m.role in ("user", "tool")
        else m
        for m in generate_session(3)
    ]
    store = JsonlRecordStore(tmp_path / "records")
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(),
        16_000,
        offloader=CompactionOffloader(tmp_path, "meta"),
        record_store=store,
    )
    session = CompactionSession(compactor, msgs[0].content, session_id="meta", capture="metadata")
    for m in msgs[1:]:
        if m.role == "assistant":
            session.prepare()
        session.append(m)
    session.close()

    records = store.list("meta")
    assert records  # the session compacted, and its records were written
    text = store.path_for("meta").read_text(encoding="utf-8")
    assert MARKER not in text
    for record in records:
        assert not record.summary_text
        assert all(anchor.content == REDACTED for anchor in record.anchors)
