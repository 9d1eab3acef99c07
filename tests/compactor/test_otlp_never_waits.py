"""The agent never waits on an OTLP collector (issue 28, item 6.2).

A session whose sink is ``TeeSink(SpoolSink, OtlpSink)`` flushes its sinks after every
compaction. The collector is a real HTTP server on 127.0.0.1 that accepts each request and never
answers it (``tests.otlp_receiver``, ``answer=0``) until the test releases it, and the exporter's
timeout is longer than the test waits: so if a ``prepare()`` waited on an export, the session
could not finish while the collector holds its first request. The session must finish all its
compactions while the collector has answered nothing, and the spool must hold each compaction as
soon as ``prepare()`` returns (its flush stays durable).
"""

from __future__ import annotations

import threading
from pathlib import Path

from analytics.replay.synthetic import generate_session
from compactor import (
    CompactionOffloader,
    CompactionSession,
    CompactionTier,
    ExtractiveSummarizer,
    OtlpSink,
    ProgressiveCompactor,
    SpoolSink,
    TeeSink,
)
from tests.otlp_receiver import OtlpReceiver

EXPORT_TIMEOUT_S = 600.0
"""Longer than any wait below: an export to the holding collector outlasts the test."""
DEADLINE_S = 60.0
"""A generous deadline for conditions that take milliseconds when nothing waits."""


def test_prepare_never_waits_on_a_collector_that_never_answers(tmp_path: Path) -> None:
    msgs = generate_session(3)
    with OtlpReceiver(answer=0) as receiver:
        spool = SpoolSink(tmp_path / "spool")
        otlp = OtlpSink(receiver.url, timeout=EXPORT_TIMEOUT_S)
        session = CompactionSession(
            ProgressiveCompactor(
                ExtractiveSummarizer(), 16_000, offloader=CompactionOffloader(tmp_path, "s")
            ),
            msgs[0].content,
            session_id="held-collector",
            event_sink=TeeSink(spool, otlp),
        )
        compactions: list[bool] = []
        """Per compaction, whether its record was in the spool file when ``prepare()`` returned."""
        done = threading.Event()

        def agent() -> None:
            for m in msgs[1:]:
                if m.role == "assistant":
                    _, record = session.prepare()
                    if record.effective and record.tier != CompactionTier.NONE:
                        written = spool.path.read_text() if spool.path else ""
                        compactions.append(record.id in written)
                session.append(m)
            done.set()

        threading.Thread(target=agent, name="agent", daemon=True).start()
        assert receiver.wait_received(1, DEADLINE_S), "no export was ever attempted"
        finished = done.wait(DEADLINE_S)
        answered = receiver.answered
        assert finished, (
            f"the agent is stuck after {len(compactions)} compactions while the collector holds "
            "an export: prepare() waits on the exporter"
        )
        assert answered == 0  # every prepare() returned while the collector answered nothing
        assert len(compactions) >= 5
        assert all(compactions)  # the spool was written at each one
        assert otlp.spans == len(compactions)

        receiver.release(answer_held=True)  # now let the exports through
        session.close()
        otlp.close()
        assert otlp.delivered == otlp.spans and otlp.undelivered == 0
