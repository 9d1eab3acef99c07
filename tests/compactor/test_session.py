"""Tests for CompactionSession: full history, checkpointed views, incremental summaries, events.

Sessions run a real ProgressiveCompactor with the offline ExtractiveSummarizer, a
CompactionOffloader and a JsonlRecordStore in ``tmp_path``, and a strict MemorySink. Messages
are added until the compactor's own tier decision reaches the tier a test needs, so no figure
depends on a hand-computed window.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor import (
    CalibratedEstimator,
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    CompactorInUseError,
    EventSink,
    ExtractiveSummarizer,
    JsonlRecordStore,
    MemorySink,
    Message,
    PreviousCompaction,
    ProgressiveCompactor,
    Summarizer,
    SummaryResult,
    TokenEstimator,
    ToolCall,
    estimate_tokens,
    format_notification,
)
from compactor.events import (
    Capture,
    CompactionRecorded,
    Event,
    MessageAppended,
    UsageReported,
    ViewPrepared,
    sha256_of,
)
from compactor.summaries._message import COMPACTION_MARKER

SECRET = "SECRET-7f3a-do-not-log"
SYSTEM = "You are a coding agent working in a sandbox."
TASK = f"Fix the failing test in src/cache.py ({SECRET})."
SMALL = 600  # bytes per tool result: below the offload threshold
LARGE = 5000  # above CompactorConfig().offload_threshold (4000)


class RecordingSummarizer:
    """Wraps a real summariser and keeps every (transcript, previous) it was called with."""

    def __init__(self, inner: Summarizer | None = None) -> None:
        self.inner = inner or ExtractiveSummarizer()
        self.calls: list[tuple[list[Message], PreviousCompaction | None]] = []

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        self.calls.append((list(transcript), previous))
        return self.inner.summarize(transcript, previous)


class FailingSummarizer:
    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        raise RuntimeError("model offline (HTTP 503)")


class UnhelpfulSummarizer:
    """Answers with a fixed text that parses to five N/A anchors and no summary."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def summarize(
        self, transcript: list[Message], previous: PreviousCompaction | None
    ) -> SummaryResult:
        return SummaryResult(text=self.answer)


class ExplodingSink:
    """An EventSink whose disk is always full."""

    def emit(self, event: Event) -> None:
        raise OSError("disk on fire")

    def flush(self) -> None:
        raise OSError("disk on fire")

    def close(self) -> None:
        raise OSError("disk on fire")


def exchange(i: int, size: int) -> list[Message]:
    """An assistant tool call and its result of ``size`` bytes, both mentioning the secret."""
    call = ToolCall(
        id=f"call_{i}",
        name="bash",
        arguments=json.dumps({"command": f"cat src/mod{i}.py  # {SECRET}"}),
    )
    line = f"line of mod{i}.py {SECRET}\n"
    body = (line * (size // len(line) + 1))[:size]
    return [
        Message(role="assistant", content=f"Reading mod{i}.py; {SECRET}", tool_calls=(call,)),
        Message(role="tool", tool_call_id=call.id, content=body, name="bash"),
    ]


def make_session(
    tmp_path: Path,
    *,
    summarizer: Summarizer | None = None,
    window: int = 4000,
    capture: Capture = "full",
    estimator: TokenEstimator | None = None,
    sink: EventSink | None = None,
    session_id: str = "sess-1",
) -> CompactionSession:
    compactor = ProgressiveCompactor(
        summarizer or ExtractiveSummarizer(),
        window,
        offloader=CompactionOffloader(tmp_path / "work", "unbound"),
        record_store=JsonlRecordStore(tmp_path / "records"),
        estimator=estimator,
    )
    return CompactionSession(
        compactor,
        SYSTEM,
        session_id=session_id,
        event_sink=sink if sink is not None else MemorySink(strict=True),
        capture=capture,
    )


def tier_now(session: CompactionSession) -> CompactionTier:
    return session.compactor.tier_for_tokens(session.tokens())


def grow(session: CompactionSession, until: CompactionTier, size: int = SMALL) -> list[Message]:
    """Append the task (first time) and exchanges until the decided tier reaches ``until``."""
    added: list[Message] = []
    if not session.history:
        session.append(Message(role="user", content=TASK))
        added.append(session.history[-1])
    while tier_now(session) < until:
        for msg in exchange(len(session.history), size):
            session.append(msg)
            added.append(msg)
    assert tier_now(session) == until, "a step overshot the wanted tier; use smaller results"
    return added


def memory(session: CompactionSession) -> MemorySink:
    assert isinstance(session.event_sink, MemorySink)
    return session.event_sink


def recorded(session: CompactionSession) -> list[CompactionRecorded]:
    return [e.payload for e in memory(session).events if isinstance(e.payload, CompactionRecorded)]


def compact_now(
    session: CompactionSession, tier: CompactionTier, size: int = SMALL
) -> list[Message]:
    """Grow the session to ``tier`` and prepare; the compaction must be effective."""
    grow(session, tier, size)
    view, record = session.prepare()
    assert record.tier == tier
    assert record.effective
    return view


# ---------------------------------------------------------------- history and views


def test_history_is_exactly_what_was_appended_and_never_mutated(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    appended = grow(session, CompactionTier.FULL)
    snapshot = [m.model_dump() for m in appended]

    session.prepare()
    appended += grow(session, CompactionTier.FULL)
    session.prepare()
    appended += grow(session, CompactionTier.WARN)
    session.compact()

    assert len(session.records) == 3
    assert session.history == appended
    assert [m.model_dump() for m in session.history[: len(snapshot)]] == snapshot
    assert all(m.role != "system" for m in session.history)


def test_prepare_on_a_small_session_returns_the_whole_view_with_tier_none(
    tmp_path: Path,
) -> None:
    session = make_session(tmp_path, window=1_000_000)
    grow(session, CompactionTier.NONE)
    session.extend(exchange(1, SMALL))

    view, record = session.prepare()

    assert view == [Message(role="system", content=SYSTEM), *session.history]
    assert record.tier == CompactionTier.NONE
    assert not record.effective
    assert record.tokens_before == estimate_tokens(view)
    assert session.checkpoint == 0
    assert recorded(session) == []


def test_after_a_compaction_the_view_is_the_compacted_prefix_then_new_messages(
    tmp_path: Path,
) -> None:
    session = make_session(tmp_path)
    grow(session, CompactionTier.FULL)
    n_history = len(session.history)

    compacted, record = session.prepare()

    assert session.checkpoint == n_history
    assert compacted[0] == Message(role="system", content=SYSTEM)
    assert compacted[1].content.startswith(COMPACTION_MARKER)
    assert compacted[2:] == session.history[n_history - record.preserved_tail :]
    assert record.tokens_after == estimate_tokens(compacted) < record.tokens_before

    new = exchange(n_history, SMALL)
    session.extend(new)
    view, next_record = session.prepare()

    assert next_record.tier == CompactionTier.NONE
    assert view == [*compacted, *new]
    assert session.view() == view
    assert session.checkpoint == n_history


def test_second_full_compaction_is_incremental_over_new_messages_only(tmp_path: Path) -> None:
    summarizer = RecordingSummarizer()
    session = make_session(tmp_path, summarizer=summarizer)
    compact_now(session, CompactionTier.FULL)
    first_summary = session.records[0].summary_text

    compact_now(session, CompactionTier.FULL)

    assert len(summarizer.calls) == 2
    (first, first_previous), (second, second_previous) = summarizer.calls
    assert first_previous is None
    assert second_previous is not None
    assert second_previous.summary == first_summary
    assert {sha256_of(m) for m in first}.isdisjoint(sha256_of(m) for m in second)
    assert not any(m.content.startswith(COMPACTION_MARKER) for m in second)
    history_hashes = {sha256_of(m) for m in session.history}
    assert {sha256_of(m) for m in second} <= history_hashes


def test_second_soft_compaction_is_incremental(tmp_path: Path) -> None:
    summarizer = RecordingSummarizer()
    session = make_session(tmp_path, summarizer=summarizer)
    compact_now(session, CompactionTier.SOFT)

    compact_now(session, CompactionTier.SOFT)

    (first, first_previous), (second, second_previous) = summarizer.calls
    assert first_previous is None
    assert second_previous is not None
    assert {sha256_of(m) for m in first}.isdisjoint(sha256_of(m) for m in second)


# ---------------------------------------------------------------- events


def test_one_compaction_recorded_event_per_effective_compaction(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    compact_now(session, CompactionTier.FULL)
    compact_now(session, CompactionTier.FULL)

    effective = [p for p in recorded(session) if p.record.effective]

    assert [p.record.id for p in effective] == [r.id for r in session.records]
    assert len(effective) == 2


def test_compaction_event_views_map_to_history_indices_and_hashes(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    grow(session, CompactionTier.FULL)
    n_first = len(session.history)
    first_view, _ = session.prepare()
    second_view = compact_now(session, CompactionTier.FULL)

    first, second = recorded(session)

    # The first compaction saw the system prompt and the whole history, unchanged.
    assert [item.index for item in first.before] == [None, *range(n_first)]
    assert [item.sha256 for item in first.before[1:]] == [
        sha256_of(m) for m in session.history[:n_first]
    ]
    for payload, view in ((first, first_view), (second, second_view)):
        assert [item.sha256 for item in payload.after] == [sha256_of(m) for m in view]
        kept = [i for i in [*payload.before, *payload.after] if i.status == "kept"]
        assert kept
        for item in kept:
            assert item.index is not None
            assert item.sha256 == sha256_of(session.history[item.index])
    assert {i.status for i in second.before if i.index is not None} <= {"kept", "summarized"}


def test_message_appended_event_per_append_with_index_and_hash(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    grow(session, CompactionTier.WARN)

    events = memory(session).events
    appended = [e.payload for e in events if isinstance(e.payload, MessageAppended)]

    assert events[0].type == "session_started"
    assert [e.seq for e in events] == list(range(len(events)))
    assert [p.index for p in appended] == list(range(len(session.history)))
    assert [p.sha256 for p in appended] == [sha256_of(m) for m in session.history]
    assert [p.content for p in appended] == [m.content for m in session.history]


def run_a_full_session(session: CompactionSession) -> None:
    """Warn (offload placeholders with previews), then Full, usage and deletion."""
    compact_now(session, CompactionTier.WARN, LARGE)
    compact_now(session, CompactionTier.FULL, LARGE)
    session.observe_usage(input_tokens=1234, output_tokens=56)
    session.delete()


@pytest.mark.parametrize(
    ("capture", "leaks"), [("metadata", False), ("full", True)], ids=["metadata", "full-control"]
)
def test_metadata_capture_never_writes_content_summaries_or_previews(
    tmp_path: Path, capture: Capture, leaks: bool
) -> None:
    session = make_session(tmp_path, window=60_000, capture=capture)

    run_a_full_session(session)

    lines = [e.to_json_line() for e in memory(session).events]
    types = {e.type for e in memory(session).events}
    assert {"compaction_recorded", "tool_result_offloaded", "usage_reported"} <= types
    assert any(i.status == "offloaded" for p in recorded(session) for i in p.after)
    assert any(SECRET in line for line in lines) is leaks


@pytest.mark.parametrize(
    ("capture", "plain"), [("metadata", False), ("full", True)], ids=["metadata", "full-control"]
)
def test_metadata_capture_keys_the_hashes_of_offloaded_results_too(
    tmp_path: Path, capture: Capture, plain: bool
) -> None:
    """An offloaded result's plain content hash would join the session to anyone holding the
    same text: in metadata capture it is keyed in the record and in the offload event alike."""
    session = make_session(tmp_path, window=60_000, capture=capture)

    run_a_full_session(session)

    digests = {e.sha256 for r in session.records for e in r.offloaded}
    lines = [e.to_json_line() for e in memory(session).events]
    assert digests
    assert all(any(d in line for line in lines) is plain for d in digests)
    offloaded = [e.payload for e in memory(session).of_type("tool_result_offloaded")]
    in_records = {e.sha256 for p in recorded(session) for e in p.record.offloaded}
    assert {o.sha256 for o in offloaded} == in_records  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(f"Sorry, I cannot summarise this: {SECRET}", id="plain"),
        pytest.param(
            f"""Sorry, the "cache" test ('x') fails: {SECRET}""",
            id="both-quotes",
        ),
    ],
)
def test_metadata_capture_does_not_leak_summariser_text_through_record_error(
    tmp_path: Path, answer: str
) -> None:
    session = make_session(tmp_path, summarizer=UnhelpfulSummarizer(answer), capture="metadata")
    grow(session, CompactionTier.FULL)

    _view, record = session.prepare()

    assert "five N/A anchors" in record.error  # the failure path really ran
    assert SECRET in record.error  # the caller's own record keeps the full text
    assert not any(SECRET in e.to_json_line() for e in memory(session).events)


def test_observe_usage_emits_usage_reported_and_calibrates_the_estimator(
    tmp_path: Path,
) -> None:
    estimator = CalibratedEstimator()
    session = make_session(tmp_path, window=1_000_000, estimator=estimator)
    grow(session, CompactionTier.NONE)
    session.extend(exchange(1, SMALL))
    view, _ = session.prepare()
    estimated = estimate_tokens(view)

    session.observe_usage(input_tokens=2 * estimated, output_tokens=40, cache_read_tokens=7)

    [usage] = [e.payload for e in memory(session).events if isinstance(e.payload, UsageReported)]
    assert usage.estimated_input_tokens == estimated
    assert usage.input_tokens == 2 * estimated
    assert (usage.output_tokens, usage.cache_read_tokens) == (40, 7)
    # the turn reported on is the view_prepared turn of the prepare() before it
    prepared = [e.payload for e in memory(session).events if isinstance(e.payload, ViewPrepared)]
    assert usage.turn == prepared[-1].turn != len(session.history)
    assert usage.history_messages == len(session.history)
    assert estimator.observations == 1
    assert estimator.factor == pytest.approx(2 * estimated / estimated)
    assert session.tokens() == int(estimated * estimator.factor)


# ---------------------------------------------------------------- manual compact and GC


def test_manual_compact_gives_a_full_record_with_trigger_manual(tmp_path: Path) -> None:
    summarizer = RecordingSummarizer()
    session = make_session(tmp_path, summarizer=summarizer)
    grow(session, CompactionTier.WARN)

    record = session.compact()

    assert record.tier == CompactionTier.FULL
    assert record.trigger == "manual"
    assert record.effective
    assert record.error == ""
    assert record.summarized == len(summarizer.calls[0][0]) > 0
    assert session.checkpoint == len(session.history)
    assert session.view()[1].content.startswith(COMPACTION_MARKER)
    assert session.compactor.record_store is not None
    assert [r.id for r in session.compactor.record_store.list(session.session_id)] == [record.id]


def test_manual_compact_falls_back_to_emergency_with_the_cause_when_summarizer_raises(
    tmp_path: Path,
) -> None:
    session = make_session(tmp_path, summarizer=FailingSummarizer())
    grow(session, CompactionTier.WARN)

    record = session.compact()

    assert record.tier == CompactionTier.EMERGENCY
    assert record.trigger == "manual"
    assert "LLM summary failed in TierFull" in record.error
    assert "RuntimeError: model offline (HTTP 503)" in record.error
    view = session.view()
    assert view[0] == Message(role="system", content=SYSTEM)
    assert Message(role="user", content=TASK) in view


def test_delete_removes_offloads_and_records_and_emits_session_deleted(tmp_path: Path) -> None:
    session = make_session(tmp_path, window=60_000)
    grow(session, CompactionTier.FULL, size=LARGE)
    _view, record = session.prepare()
    offloader = session.compactor.offloader
    store = session.compactor.record_store
    assert offloader is not None
    assert isinstance(store, JsonlRecordStore)
    assert record.offloaded
    assert offloader.session_dir.is_dir()
    assert store.path_for(session.session_id).is_file()

    session.delete()

    assert not offloader.session_dir.exists()
    assert not store.path_for(session.session_id).exists()
    assert memory(session).events[-1].type == "session_deleted"


# ---------------------------------------------------------------- failure isolation


def test_a_sink_that_raises_never_breaks_prepare_or_append(tmp_path: Path) -> None:
    broken = make_session(tmp_path / "broken", sink=ExplodingSink())
    healthy = make_session(tmp_path / "healthy")
    for session in (broken, healthy):
        grow(session, CompactionTier.FULL)

    broken_view, broken_record = broken.prepare()
    healthy_view, healthy_record = healthy.prepare()
    broken.observe_usage(input_tokens=100)
    broken.delete()

    assert broken_view == healthy_view
    assert broken_record.tier == healthy_record.tier == CompactionTier.FULL
    # session_started, every append, the compaction, the usage and the deletion all failed
    assert broken.sink_errors >= len(broken.history) + 4
    assert "OSError: disk on fire" in broken.last_sink_error
    assert healthy.sink_errors == 0


def test_two_sessions_from_one_compactor_do_not_share_summary_state(tmp_path: Path) -> None:
    summarizer = RecordingSummarizer()
    compactor = ProgressiveCompactor(summarizer, 4000)
    first = CompactionSession(compactor, SYSTEM, session_id="a", event_sink=MemorySink())
    second = CompactionSession(
        compactor.for_session("b"), SYSTEM, session_id="b", event_sink=MemorySink()
    )

    compact_now(first, CompactionTier.FULL)
    compact_now(second, CompactionTier.FULL)

    assert [previous for _transcript, previous in summarizer.calls] == [None, None]
    assert first.compactor is not second.compactor
    assert (first.compactor.session_id, second.compactor.session_id) == ("a", "b")


def test_the_session_compacts_with_the_compactor_it_is_given(tmp_path: Path) -> None:
    compactor = ProgressiveCompactor(
        RecordingSummarizer(), 4000, offloader=CompactionOffloader(tmp_path, "template")
    )
    session = CompactionSession(compactor, SYSTEM, session_id="given", capture="metadata")

    compact_now(session, CompactionTier.FULL)

    assert session.compactor is compactor
    assert compactor.state is not None  # the caller sees the session's summary state
    assert (compactor.session_id, compactor.capture) == ("given", "metadata")
    assert compactor.hash_key is not None
    assert compactor.offloader is not None and compactor.offloader.session_id == "given"


def test_a_compactor_another_open_session_uses_is_refused_saying_what_to_do() -> None:
    compactor = ProgressiveCompactor(RecordingSummarizer(), 4000)
    still_open = CompactionSession(compactor, SYSTEM, session_id="a")

    with pytest.raises(CompactorInUseError) as refused:
        CompactionSession(compactor, SYSTEM, session_id="b", capture="metadata")

    assert isinstance(refused.value, ValueError)
    message = str(refused.value)
    assert "'a' (capture 'full')" in message and "'b' (capture 'metadata')" in message
    assert "compactor.for_session('b', capture='metadata')" in message
    assert still_open.compactor is compactor and compactor.session_id == "a"


def test_a_closed_sessions_compactor_serves_the_next_with_fresh_summary_state() -> None:
    summarizer = RecordingSummarizer()
    compactor = ProgressiveCompactor(summarizer, 4000)
    first = CompactionSession(compactor, SYSTEM, session_id="a", event_sink=MemorySink())
    compact_now(first, CompactionTier.FULL)
    first.close()

    second = CompactionSession(compactor, SYSTEM, session_id="b", event_sink=MemorySink())
    assert compactor.state is None
    compact_now(second, CompactionTier.FULL)

    assert second.compactor is compactor and compactor.session_id == "b"
    assert [previous for _transcript, previous in summarizer.calls] == [None, None]


# ---------------------------------------------------------------- records


def test_no_op_record_has_compression_ratio_after_over_before(tmp_path: Path) -> None:
    session = make_session(tmp_path, window=1_000_000)
    grow(session, CompactionTier.NONE)

    _view, record = session.prepare()

    assert record.tokens_before > 0
    assert record.compression_ratio == record.tokens_after / record.tokens_before
    assert "(0% saved)" in format_notification(record)


def test_summarizer_latency_is_at_most_the_compaction_duration(tmp_path: Path) -> None:
    session = make_session(tmp_path)
    grow(session, CompactionTier.FULL)

    _view, record = session.prepare()

    assert record.summarizer is not None
    assert 0 <= record.summarizer.latency_ms <= record.duration_ms
