"""``compactlens export otlp`` counts exactly the spans it did not deliver (issue 28, item 6.3).

The store holds thousands of effective compactions (more than the OpenTelemetry SDK's batch
queue of 2,048, in five export batches of 512), made by cloning the ``session_started`` and
``compaction_recorded`` events of one synthetic session under new session and record ids. The
collectors are real HTTP servers on 127.0.0.1 (``tests.otlp_receiver``): a slow one, one that
answers a few requests and then holds every later one unanswered, and a prompt one. The truth
is what the receiver answered 200: the command's "sent N" must be that number, and its "M of T
spans were not delivered" the rest. A session whose timestamps OTLP cannot carry (year 9999,
before 1970) is skipped and named; the other sessions' spans still go, and the endpoint is not
blamed.

The full-size run (over 4,000 spans to the slow collector, with its timings) is
``bench/otlp_delivery.py``; the counts asserted here do not depend on how many spans there are.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from analytics.cli.main import app
from compactor import MemorySink, SpoolSink
from compactor.events import CompactionRecorded, Event, new_event_id
from tests.analytics.spool_helpers import ingest, run_session
from tests.otlp_receiver import OtlpReceiver

COPIES = 3
"""Each template compaction appears this many times per cloned session."""
SESSIONS = 60
"""60 sessions of 42 effective compactions: 2,520 spans, past the SDK's queue of 2,048."""


@dataclass(frozen=True)
class Home:
    path: Path
    spans: int
    """Effective compactions in the store: the spans an export should deliver."""
    sessions: int


def _template(tmp: Path) -> list[Event]:
    memory = MemorySink(strict=True)
    run_session(tmp, memory, 3)  # type: ignore[arg-type]  # any EventSink will do
    return [e for e in memory.events if e.type in ("session_started", "compaction_recorded")]


def _effective(event: Event) -> bool:
    payload = event.payload
    return (
        isinstance(payload, CompactionRecorded)
        and payload.record.effective
        and payload.record.tier > 0
    )


def _clone(
    template: Sequence[Event], session_id: str, *, copies: int, at: datetime | None = None
) -> list[Event]:
    """``template``'s events under ``session_id``: the compactions ``copies`` times, each with
    a new record id; seq gap-free; ``at`` (if given) as every event's time."""
    start, compactions = template[0], template[1:]
    out: list[Event] = []
    for event in [start, *(c for _ in range(copies) for c in compactions)]:
        payload = event.payload
        if isinstance(payload, CompactionRecorded):
            record = payload.record.model_copy(update={"id": uuid.uuid4().hex})
            payload = payload.model_copy(update={"record": record})
        update = {
            "session_id": session_id,
            "seq": len(out),
            "event_id": new_event_id(),
            "payload": payload,
        }
        if at is not None:
            update["occurred_at"] = at
        out.append(event.model_copy(update=update))
    return out


def _build(home: Path, sessions: dict[str, list[Event]]) -> Home:
    sink = SpoolSink(home / "spool")
    for events in sessions.values():
        for event in events:
            sink.emit(event)
    sink.close()
    ingest(home)
    spans = sum(_effective(e) for events in sessions.values() for e in events)
    return Home(home, spans, len(sessions))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> list[Event]:
    return _template(tmp_path_factory.mktemp("template"))


@pytest.fixture(scope="module")
def bulk(tmp_path_factory: pytest.TempPathFactory, template: list[Event]) -> Home:
    home = tmp_path_factory.mktemp("bulk")
    ids = [f"bulk-{k:03d}" for k in range(SESSIONS)]
    built = _build(home, {sid: _clone(template, sid, copies=COPIES) for sid in ids})
    assert built.spans > 2_048  # past the SDK's queue of 2,048, in five batches of 512
    return built


def _export(home: Path, url: str, *extra: str) -> Result:
    return CliRunner().invoke(
        app, ["export", "otlp", "--endpoint", url, "--home", str(home), *extra]
    )


def _figures(done: Result) -> tuple[int, int | None, int | None]:
    """The command's delivered count, and its "M of T spans were not delivered" (or None)."""
    said = " ".join(done.output.replace("│", " ").split())
    sent = re.search(r"sent ([\d,]+) compaction spans", said)
    assert sent, said
    missed = re.search(r"([\d,]+) of ([\d,]+) spans were not delivered", said)
    delivered = int(sent.group(1).replace(",", ""))
    if missed is None:
        return delivered, None, None
    return delivered, int(missed.group(1).replace(",", "")), int(missed.group(2).replace(",", ""))


def test_a_slow_collector_gets_every_span_and_the_command_says_so(bulk: Home) -> None:
    with OtlpReceiver(delay_s=1.0) as receiver:
        done = _export(bulk.path, receiver.url)
        got = receiver.spans
    assert "Traceback" not in done.output
    assert got == bulk.spans, done.output
    assert _figures(done) == (bulk.spans, None, None), done.output
    assert done.exit_code == 0, done.output


def test_a_collector_that_stops_answering_is_counted_exactly(bulk: Home) -> None:
    with OtlpReceiver(answer=2) as receiver:
        done = _export(bulk.path, receiver.url, "--timeout", "2")
        got = receiver.spans
    assert "Traceback" not in done.output
    assert 0 < got < bulk.spans
    delivered, undelivered, total = _figures(done)
    assert (delivered, undelivered, total) == (got, bulk.spans - got, bulk.spans), done.output
    assert done.exit_code == 1, done.output


def test_a_collector_that_never_answers_gets_nothing_and_every_span_is_counted(
    bulk: Home,
) -> None:
    with OtlpReceiver(answer=0) as receiver:
        done = _export(bulk.path, receiver.url, "--timeout", "1")
        got = receiver.spans
    assert got == 0
    assert _figures(done) == (0, bulk.spans, bulk.spans), done.output
    assert done.exit_code == 1, done.output


@pytest.mark.parametrize(
    "when",
    [datetime(9999, 12, 31, 23, 59, tzinfo=UTC), datetime(1960, 1, 1, tzinfo=UTC)],
    ids=["year-9999", "before-1970"],
)
def test_a_session_whose_time_otlp_cannot_carry_is_skipped_and_named(
    tmp_path: Path, template: list[Event], when: datetime
) -> None:
    sessions = {f"good-{k}": _clone(template, f"good-{k}", copies=1) for k in range(2)}
    sessions["odd-clock"] = _clone(template, "odd-clock", copies=1, at=when)
    home = _build(tmp_path / "home", sessions)
    odd = sum(_effective(e) for e in sessions["odd-clock"])
    with OtlpReceiver() as receiver:
        done = _export(home.path, receiver.url)
        ids = {
            str(a.value.string_value)
            for span in receiver.span_list
            for a in span.attributes
            if a.key == "gen_ai.conversation.id"
        }
        got = receiver.spans
    said = " ".join(done.output.replace("│", " ").split())
    assert ids == {"good-0", "good-1"} and got == home.spans - odd, said
    assert _figures(done)[0] == got, said
    assert "odd-clock" in said and "timestamp" in said, said
    assert "endpoint that is up" not in said, said  # the collector did nothing wrong
    assert f"{odd:,} " in said, said
    assert done.exit_code == 1, said
