"""A message appended again as a later revision replaces the earlier one, on every backend.

``compactlens watch`` appends a transcript's last message again, whole, when the harness wrote
more of it after a pass read it (``message_appended.revision``). Whatever order the revisions
reach the store in, in one ingest or in two, the stored message is the latest revision's, and
the events table keeps every revision (the spool is the record).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.store.projector import Projector
from compactor.events import EventFactory, MessageAppended
from tests.analytics.store.conftest import Backend

WHOLE, HALF = "the whole answer, every block of it", "the whole"


def _line(content: str, revision: int) -> str:
    payload = MessageAppended(
        index=0, role="assistant", bytes=len(content), sha256=f"sha-{revision}", content=content
    ).model_copy(update={"revision": revision})
    event = EventFactory("s").make(payload)
    return event.model_copy(update={"event_id": f"s-rev-{revision}"}).to_json_line()


@pytest.mark.parametrize("together", [True, False], ids=["one ingest", "two ingests"])
@pytest.mark.parametrize("newest_first", [True, False], ids=["newest first", "oldest first"])
def test_the_store_keeps_the_latest_revision_of_a_message(
    backend: Backend, tmp_path: Path, together: bool, newest_first: bool
) -> None:
    lines = [_line(WHOLE, 7), _line(HALF, 0)]
    if not newest_first:
        lines.reverse()
    spool = tmp_path / "spool"
    spool.mkdir()
    batches = [lines] if together else [[lines[0]], [lines[1]]]
    with backend.open() as store:
        for n, batch in enumerate(batches):
            (spool / f"part-{n}.jsonl").write_text("".join(x + "\n" for x in batch))
            Projector(store, spool).ingest()
        rows = store.query("SELECT bytes, sha256, revision FROM messages").rows()
        events = store.query("SELECT count(*) FROM events WHERE type = 'message_appended'")
        stored_events = events.item()
    assert rows == [(len(WHOLE), "sha-7", 7)]
    assert stored_events == 2
