"""What broke when the library was tried as a new user would (issue 6, defects 2 to 9).

Each test reproduces one report: calibration against the wrong view, reserved tokens ignored,
unchanged views recorded as compactions, an old follow-up pinned as the task, offload-only
emergencies called truncations, lone surrogates raising, settings lost per session, provider
text in metadata events, a resumed session restarting its seq.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from compactor import (
    CalibratedEstimator,
    ChatModelError,
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    CompactorConfig,
    ExtractiveSummarizer,
    MemorySink,
    Message,
    OverheadCalibratedEstimator,
    ProgressiveCompactor,
    SpoolSink,
    TokenBudgetCompactor,
    ToolCall,
    format_notification,
    validate_history,
)
from compactor.events import parse_event
from compactor.summaries._message import parse_compaction_message
from compactor.tokens import message_bytes
from tests.compactor.builders import ScriptedSummarizer, conversation, exchange, window_for

WINDOW = 8_000


def _view_bytes(view: list[Message]) -> int:
    return sum(message_bytes(m) for m in view)


def _agent(estimator: object, *, window: int = WINDOW, reserve: int = 0) -> CompactionSession:
    config = CompactorConfig(reserve_tokens=reserve)
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(),
        window,
        config=config,
        estimator=estimator,  # type: ignore[arg-type]
    )
    session = CompactionSession(compactor, "You are a coding agent.", session_id="cal")
    session.append(Message(role="user", content="Keep the build green."))
    return session


# ---------------------------------------------------------------- 2: calibration


def test_exact_provider_reports_keep_the_calibration_factor_at_one_over_300_turns() -> None:
    estimator = CalibratedEstimator()
    session = _agent(estimator)
    compactions = 0
    for i in range(300):
        view, record = session.prepare()
        compactions += record.effective
        # The provider counts exactly the view it was sent (bytes/4, as the estimator's base).
        session.observe_usage(input_tokens=_view_bytes(view) // 4)
        session.extend(exchange(i, 500))

    assert compactions >= 10
    assert estimator.observations == 300
    assert estimator.factor == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("make", [CalibratedEstimator, OverheadCalibratedEstimator])
def test_calibrated_views_never_exceed_the_real_window_when_bytes_undercount_by_30_percent(
    make: type,
) -> None:
    estimator = make()
    session = _agent(estimator)
    real = []
    for i in range(300):
        view, _record = session.prepare()
        real_tokens = int(_view_bytes(view) / 4 / 0.7)  # the real tokenizer: 30% more
        real.append(real_tokens)
        session.observe_usage(input_tokens=real_tokens)
        session.extend(exchange(i, 500))

    assert max(real) <= WINDOW
    assert max(real) > WINDOW * 0.6  # the session really filled its window


async def test_the_async_path_calibrates_on_the_view_it_sent_too() -> None:
    estimator = CalibratedEstimator()
    session = _agent(estimator)
    for i in range(120):
        view, _record = await session.aprepare()
        session.observe_usage(input_tokens=_view_bytes(view) // 4)
        session.extend(exchange(i, 500))

    assert estimator.factor == pytest.approx(1.0, abs=0.01)


# ---------------------------------------------------------------- 3: reserve_tokens


def test_the_llm_failure_fallback_lands_below_warn_with_reserved_tokens_counted() -> None:
    msgs = conversation(40, 800)
    window = window_for(msgs, 0.75)
    reserve = int(window * 0.2)
    config = CompactorConfig(reserve_tokens=reserve)
    pc = ProgressiveCompactor(ScriptedSummarizer(error=RuntimeError("down")), window, config=config)

    view, record = pc.compact_with_record(msgs)

    assert record.fallback == "budget_trim"
    assert (pc.tokens(view) + reserve) / window < config.warn
    assert (pc.tokens(view) + reserve) / window <= config.fallback_target


def test_emergency_counts_reserved_tokens_in_its_target_and_does_not_blame_the_window() -> None:
    msgs = conversation(60, 800)
    window = window_for(msgs, 0.99)
    reserve = int(window * 0.2)
    config = CompactorConfig(reserve_tokens=reserve)
    pc = ProgressiveCompactor(ScriptedSummarizer(), window, config=config)

    view = pc.compact_force(msgs)
    _, record = pc.compact_with_record(msgs)

    assert (pc.tokens(view) + reserve) / window <= config.emergency_target
    assert record.tier == CompactionTier.EMERGENCY
    assert "window_too_small" not in record.error_codes


# ---------------------------------------------------------------- 4: unchanged is a no-op


def test_a_full_call_whose_head_is_only_the_previous_compaction_is_a_no_op() -> None:
    pc = ProgressiveCompactor(ScriptedSummarizer(), 100_000)
    compacted = pc.compact_detailed(conversation(20, 800), tier=CompactionTier.FULL).view
    assert parse_compaction_message(compacted[1]) is not None
    # The head is now the compaction message alone: nothing new to summarise.
    out = pc.compact_detailed(compacted, tier=CompactionTier.FULL)
    record = out.record

    assert record.effective is False
    assert out.view == compacted
    assert record.summarized == 0 and record.tokens_after == record.tokens_before


# ---------------------------------------------------------------- 5: emergency after a checkpoint


def test_emergency_after_a_checkpoint_keeps_the_carrier_and_a_contiguous_newest_run() -> None:
    pc = ProgressiveCompactor(ScriptedSummarizer(), 100_000)
    compacted = pc.compact_detailed(conversation(20, 800), tier=CompactionTier.FULL).view
    follow_up = Message(role="user", content="Also rename the cache module, please.")
    later = [follow_up] + [m for i in range(30, 60) for m in exchange(i, 1500)]
    view = [*compacted, *later]
    small = ProgressiveCompactor(ScriptedSummarizer(), window_for(view, 0.97))
    small.state, small.task = pc.state, pc.task

    out = small.compact_detailed(view)

    assert out.record.tier == CompactionTier.EMERGENCY
    assert out.view[0].role == "system"
    assert parse_compaction_message(out.view[1]) is not None
    assert follow_up not in out.view
    kept = [s for s in out.sources[2:] if s is not None]
    assert kept == list(range(kept[0], len(view)))  # one contiguous run of the newest
    assert validate_history(out.view) == []


# ---------------------------------------------------------------- 6: offload-only emergencies


def test_an_emergency_that_only_offloaded_says_so_in_record_notice_and_event(
    tmp_path: Path,
) -> None:
    msgs = [
        Message(role="system", content="sys"),
        Message(role="user", content="Summarise the build log."),
        *exchange(1, 60_000),
        Message(role="assistant", content="The log is long; reading it."),
    ]
    sink = MemorySink()
    pc = ProgressiveCompactor(
        ScriptedSummarizer(),
        window_for(msgs, 0.97),
        offloader=CompactionOffloader(tmp_path, "s1"),
        event_sink=sink,
    )

    view, record = pc.compact_with_record(msgs)

    assert record.tier == CompactionTier.EMERGENCY
    assert record.emergency == "offload"
    assert record.dropped == [] and record.cut == 0 and len(record.offloaded) == 1
    assert len(view) == len(msgs)
    assert "emergency offload" in format_notification(record)
    assert "truncation" not in format_notification(record)
    event = sink.of_type("compaction_recorded")[0]
    assert event.payload.record.emergency == "offload"  # type: ignore[union-attr]


def test_an_emergency_that_dropped_messages_is_a_truncation_with_counts() -> None:
    msgs = conversation(60, 800)
    pc = ProgressiveCompactor(ScriptedSummarizer(), window_for(msgs, 0.97))

    _, record = pc.compact_with_record(msgs)

    assert record.emergency == "truncation"
    assert record.dropped
    notice = format_notification(record)
    assert f"{len(record.dropped)} dropped" in notice


# ---------------------------------------------------------------- 8: lone surrogates


def test_lone_surrogates_in_a_tool_result_never_raise_and_round_trip(tmp_path: Path) -> None:
    sink = SpoolSink(tmp_path / "spool")
    offloader = CompactionOffloader(tmp_path, "sur")
    pc = ProgressiveCompactor(ExtractiveSummarizer(), 2_000, offloader=offloader)
    session = CompactionSession(pc, "sys", session_id="sur", event_sink=sink)
    session.append(Message(role="user", content="task \ud83d"))
    call = ToolCall(id="c1", name="bash", arguments='{"command": "cat x"}')
    session.append(Message(role="assistant", content="", tool_calls=(call,)))
    weird = "x\ud800y\n" * 3000
    session.append(Message(role="tool", tool_call_id="c1", content=weird))
    for i in range(8):
        session.append(Message(role="user" if i % 2 else "assistant", content=f"hi \udfff {i}"))

    _view, record = session.prepare()
    session.close()

    assert record.effective and record.offloaded
    assert offloader.for_session("sur").read_back(record.offloaded[0]) == weird
    lines = [ln for p in (tmp_path / "spool").glob("*.jsonl") for ln in p.read_text().splitlines()]
    assert sink.errors == 0 and session.sink_errors == 0
    # started, the messages, the compaction, its offload, the view_prepared of this turn
    assert len(lines) == len(session.history) + 4
    events = [parse_event(line) for line in lines]
    assert any(e.type == "compaction_recorded" for e in events)
    assert "\ufffd" in lines[1]  # the surrogate became U+FFFD in the event, not an error


# ---------------------------------------------------------------- 9: settings and metadata


class _CountingFallback(TokenBudgetCompactor):
    def truncate(self, msgs, target_fraction):  # type: ignore[no-untyped-def]
        self.calls = getattr(self, "calls", 0) + 1
        return super().truncate(msgs, target_fraction)


def test_for_session_keeps_a_custom_fallback_with_the_sessions_estimator() -> None:
    msgs = conversation(60, 800)
    window = window_for(msgs, 0.97)
    pc = ProgressiveCompactor(
        ScriptedSummarizer(), window, fallback=_CountingFallback(window), session_id="a"
    )
    estimator = CalibratedEstimator()

    bound = pc.for_session("b", estimator=estimator)
    bound.compact_with_record(msgs)

    assert isinstance(bound.fallback, _CountingFallback)
    assert bound.fallback.estimator is estimator
    assert bound.fallback.calls == 1


def test_metadata_capture_keeps_provider_error_text_out_of_events() -> None:
    sink = MemorySink()
    secret = "provider says: account 4242 over quota for prompt 'my secret code'"
    msgs = conversation(30, 800)
    pc = ProgressiveCompactor(
        ScriptedSummarizer(error=ChatModelError(secret)),
        window_for(msgs, 0.85),
        event_sink=sink,
        capture="metadata",
    )

    _, record = pc.compact_with_record(msgs)

    assert secret in record.error  # the caller's own record keeps the cause
    text = "\n".join(e.to_json_line() for e in sink.events)
    # words, not the number alone: "4242" can occur in the hex of any id or hash
    assert "account 4242" not in text and "quota" not in text and "secret" not in text
    payload = sink.of_type("compaction_recorded")[0].payload
    assert payload.record.error == "summarizer_failed:ChatModelError"  # type: ignore[union-attr]


def test_compactor_imports_where_fcntl_does_not_exist() -> None:
    code = "import sys\nsys.modules['fcntl'] = None\nimport compactor\nprint('ok')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_resumed_session_continues_its_seq_from_the_spool(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    first = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
        "sys",
        session_id="r",
        event_sink=SpoolSink(spool),
    )
    first.extend([Message(role="user", content="one"), Message(role="assistant", content="two")])
    first.close()

    again = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
        "sys",
        session_id="r",
        event_sink=SpoolSink(spool),  # a new process's sink: a new file in the same spool
    )
    again.append(Message(role="user", content="three"))
    again.close()

    events = [
        json.loads(line) for p in spool.glob("*.jsonl") for line in p.read_text().splitlines()
    ]
    seqs = sorted(e["seq"] for e in events)
    assert seqs == list(range(len(seqs)))
    assert len(seqs) == 3 + 2  # two session_started, three messages


def test_a_session_resumed_with_its_history_continues_message_indices(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    earlier = [Message(role="user", content="one"), Message(role="assistant", content="two")]
    first = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
        "sys",
        session_id="r",
        event_sink=SpoolSink(spool),
    )
    first.extend(earlier)
    first.close()

    again = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
        "sys",
        session_id="r",
        event_sink=SpoolSink(spool),
        resume=earlier,  # the history the agent persisted: no events written for it again
    )
    again.append(Message(role="user", content="three"))
    again.close()

    events = [
        json.loads(line) for p in spool.glob("*.jsonl") for line in p.read_text().splitlines()
    ]
    indices = [e["payload"]["index"] for e in events if e["type"] == "message_appended"]
    assert sorted(indices) == [0, 1, 2]
    assert again.history == [*earlier, Message(role="user", content="three")]
    assert again.history_bytes == first.history_bytes + len("three")


def test_resuming_reads_only_envelopes_and_takes_scrubbed_ids(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    # a payload quoting an envelope's fields must not move another session's seq
    poison = {"session_id": "victim", "seq": 10**9}
    CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
        session_id="attacker",
        event_sink=SpoolSink(spool),
        metadata=poison,
    ).close()
    odd = 'r\ud800"quoted" é'
    first = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
        session_id=odd,
        event_sink=SpoolSink(spool),
    )
    first.append(Message(role="user", content="one"))
    first.close()

    assert SpoolSink(spool).next_seq("victim") == 0
    again = CompactionSession(
        ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
        session_id=odd,
        event_sink=SpoolSink(spool),
    )
    assert again.session_id == first.session_id == 'r\ufffd"quoted" é'
    again.close()
    events = [
        json.loads(line) for p in spool.glob("*.jsonl") for line in p.read_text().splitlines()
    ]
    mine = sorted(e["seq"] for e in events if e["session_id"] == first.session_id)
    assert mine == [0, 1, 2]  # started, one message; then the resumed start goes on at 2


def test_metadata_hashes_join_nothing_outside_their_session() -> None:
    sink = MemorySink()
    same = [
        Message(role="user", content="deploy the secret build"),
        Message(role="user", content="ok"),
    ]
    sessions = {}
    for capture in ("full", "metadata"):
        session = CompactionSession(
            ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
            "sys",
            session_id=capture,
            event_sink=sink,
            capture=capture,
        )
        session.extend([*same, same[0]])  # the first message twice
        sessions[capture] = [
            e.payload.sha256  # type: ignore[union-attr]
            for e in sink.events
            if e.session_id == capture and e.type == "message_appended"
        ]
    full, meta = sessions["full"], sessions["metadata"]
    assert full[0] == full[2] and meta[0] == meta[2]  # repeats still match inside a session
    assert not set(full) & set(meta)
    started = {e.session_id: e.payload for e in sink.of_type("session_started")}
    assert started["full"].system_prompt_sha256 != started["metadata"].system_prompt_sha256  # type: ignore[union-attr]


_RESUME_HASHES = """
import json, sys
from pathlib import Path
from compactor import (
    CompactionOffloader, CompactionSession, ExtractiveSummarizer, MemorySink, Message,
    ProgressiveCompactor,
)
work, session_id = Path(sys.argv[1]), sys.argv[2]
sink = MemorySink()
session = CompactionSession(
    ProgressiveCompactor(
        ExtractiveSummarizer(), 50_000, offloader=CompactionOffloader(work, session_id)
    ),
    "sys",
    session_id=session_id,
    event_sink=sink,
    capture="metadata",
)
session.append(Message(role="user", content="deploy the secret build"))
print(json.dumps([e.payload.sha256 for e in sink.of_type("message_appended")]))
"""


def _metadata_hashes(work: Path, session_id: str) -> list[str]:
    """The message hashes of a metadata session run in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", _RESUME_HASHES, str(work), session_id],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    hashes: list[str] = json.loads(done.stdout)
    return hashes


def test_a_metadata_session_resumed_by_a_new_process_hashes_equal_messages_equally(
    tmp_path: Path,
) -> None:
    first = _metadata_hashes(tmp_path, "r")
    again = _metadata_hashes(tmp_path, "r")  # a restart: another process, the same session
    other = _metadata_hashes(tmp_path, "s")

    assert first == again
    assert not set(first) & set(other)  # still keyed per session
    secret = tmp_path / ".compactlens" / "hash-secret"
    assert secret.stat().st_mode & 0o777 == 0o600
    assert len(secret.read_bytes()) == 32
    assert not list(secret.parent.glob("*.tmp"))


def test_an_unreadable_hash_secret_falls_back_to_a_key_for_this_process(tmp_path: Path) -> None:
    secret = tmp_path / ".compactlens" / "hash-secret"
    secret.parent.mkdir(parents=True)
    secret.write_bytes(b"not a secret")  # a file of ours it is not: never overwritten

    assert CompactionOffloader(tmp_path, "r").hash_secret() is None
    assert _metadata_hashes(tmp_path, "r") != _metadata_hashes(tmp_path, "r")
    assert secret.read_bytes() == b"not a secret"


def test_threads_making_the_hash_secret_at_once_all_read_the_same_one(tmp_path: Path) -> None:
    offloaders = [CompactionOffloader(tmp_path, f"s{i}") for i in range(8)]
    start = threading.Barrier(len(offloaders))

    def secret(offloader: CompactionOffloader) -> bytes | None:
        start.wait()
        return offloader.hash_secret()

    with ThreadPoolExecutor(len(offloaders)) as pool:
        found = list(pool.map(secret, offloaders))

    on_disk = (tmp_path / ".compactlens" / "hash-secret").read_bytes()
    assert found == [on_disk] * len(offloaders)
    assert [p.name for p in (tmp_path / ".compactlens").iterdir()] == ["hash-secret"]


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
def test_a_hash_secret_that_is_not_a_regular_file_is_not_used(tmp_path: Path, kind: str) -> None:
    secret = tmp_path / ".compactlens" / "hash-secret"
    secret.parent.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"k" * 32)  # the right size: only what the name points at is wrong
    if kind == "symlink":
        secret.symlink_to(elsewhere)
    elif kind == "fifo":
        os.mkfifo(secret)  # reading it would wait for a writer forever
    else:
        secret.mkdir()

    assert CompactionOffloader(tmp_path, "r").hash_secret() is None
    assert elsewhere.read_bytes() == b"k" * 32


def test_resuming_without_the_session_id_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="session_id"):
        CompactionSession(
            ProgressiveCompactor(ExtractiveSummarizer(), 50_000),
            "sys",
            resume=[Message(role="user", content="one")],
        )
