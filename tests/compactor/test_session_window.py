"""Every view ``CompactionSession.prepare()`` returns is within the window (within its Emergency
target when Emergency ran) unless its record says why not (``window_too_small``, naming what
could not be cut): checked with ``prepare()`` at random points, mid-exchange (some results in,
others still running) and on the first turns after a ``resume=`` that ends inside an exchange.
The open exchange stays pair-safe: a result still running can arrive later and is then shown
with its call."""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compactor import (
    CompactionOffloader,
    CompactionRecord,
    CompactionSession,
    CompactionTier,
    ExtractiveSummarizer,
    Message,
    OverheadCalibratedEstimator,
    ProgressiveCompactor,
    ToolCall,
    validate_history,
)
from compactor.pipeline._tiers import context_ratio
from compactor.pipeline.offload import PLACEHOLDER_PREFIX
from compactor.pipeline.pairs import MISSING_RESULT
from tests.compactor.builders import TASK, exchange
from tests.compactor.test_properties import Case, cases
from tests.fuzzing import examples

SESSION = "window-prop"
PLACEHOLDER_LINE = re.compile(r"^\[offloaded: .+ \| \d+ lines / \d+ bytes\]$")
IRREDUCIBLE = re.compile(r"what cannot be cut: system prompt [\d,]+ tokens, task [\d,]+ tokens")


def check_view(
    session: CompactionSession, view: list[Message], record: CompactionRecord, where: str
) -> None:
    """The view is valid, starts with the system message, and fits its budget or says why."""
    compactor = session.compactor
    context = f"{where}: tier={record.tier!r} effective={record.effective} {record.error!r}"
    assert validate_history(view) == [], context
    assert session.system is not None and view[0] == session.system, context
    answered = {m.tool_call_id for m in session.history if m.is_tool_result}
    stand_ins = {m.tool_call_id for m in view if m.content == MISSING_RESULT}
    assert not stand_ins & answered, f"{context}: a result that arrived is shown missing"
    for msg in view:  # the path of an offloaded result is never cut
        if msg.content.startswith(PLACEHOLDER_PREFIX):
            assert PLACEHOLDER_LINE.match(msg.content.split("\n", 1)[0]), context
    if "window_too_small" in record.error_codes:
        assert IRREDUCIBLE.search(record.error), context
        return
    config = compactor.config
    ratio = context_ratio(compactor.tokens(view), compactor.context_window, config.reserve_tokens)
    budget = config.emergency_target if record.tier == CompactionTier.EMERGENCY else 1.0
    assert ratio <= budget, f"{context}: {ratio:.2f} of the window, budget {budget:.2f}"


@dataclass(frozen=True)
class Run:
    """A generated conversation, where to call ``prepare()`` (before message i), where a new
    process resumes it (None: never), and the hidden overhead the estimator has learnt."""

    case: Case
    prepare_at: frozenset[int]
    resume_at: int | None
    overhead: int

    def compactor(self, tmp: Path) -> ProgressiveCompactor:
        estimator = OverheadCalibratedEstimator()
        if self.overhead:
            estimator.observe(1_000, 1_000 + self.overhead)
        return ProgressiveCompactor(
            ExtractiveSummarizer(),
            self.case.window,
            config=self.case.config,
            offloader=CompactionOffloader(tmp, SESSION),
            session_id=SESSION,
            estimator=estimator,
        )


def run_session(run: Run, tmp: Path) -> None:
    system, *rest = run.case.msgs
    session = CompactionSession(run.compactor(tmp), system, session_id=SESSION)
    for i, msg in enumerate(rest):
        if i == run.resume_at:  # a new process: the persisted history, a fresh compactor
            session = CompactionSession(
                run.compactor(tmp), system, session_id=SESSION, resume=list(session.history)
            )
            view, record = session.prepare()
            check_view(session, view, record, f"first prepare after resume at {i}")
        if i in run.prepare_at:
            view, record = session.prepare()
            check_view(session, view, record, f"prepare before message {i}")
        session.append(msg)
    view, record = session.prepare()
    check_view(session, view, record, "last prepare")


@st.composite
def open_exchange(draw: st.DrawFn, window: int) -> list[Message]:
    """Parallel calls whose first result is huge next to the window (up to three times it)."""
    n_calls = draw(st.integers(min_value=2, max_value=4))
    calls = [ToolCall(id=f"run_{k}", name="bash", arguments="{}") for k in range(n_calls)]
    size = int(window * 4 * draw(st.floats(min_value=0.2, max_value=3.0)))
    line = "[build] cc -c src/module.c -o build/module.o\n"
    huge = (line * (size // len(line) + 1))[:size]
    results = [
        Message(role="tool", tool_call_id=c.id, content=huge if k == 0 else f"ok {k}")
        for k, c in enumerate(calls)
    ]
    return [Message(role="assistant", content="running them all", tool_calls=calls), *results]


@st.composite
def runs(draw: st.DrawFn) -> Run:
    """A case, sometimes with an exchange whose huge first result arrives while its siblings
    run (a prepare and maybe a resume right after it), and sometimes a hidden overhead."""
    case = draw(cases())
    msgs = list(case.msgs)
    prepare_at: set[int] = set()
    resume_at: int | None = None
    if draw(st.booleans()):
        # between exchanges, never inside one
        bounds = [i for i in range(2, len(msgs)) if not msgs[i].is_tool_result]
        at = draw(st.sampled_from([*bounds, len(msgs)]))
        block = draw(open_exchange(case.window))
        msgs[at:at] = block
        mid = at + 1  # history position of the message after the huge result (minus system)
        prepare_at.add(mid)
        if draw(st.booleans()):
            resume_at = mid
        case = Case(msgs=msgs, config=case.config, window=case.window)
    n = len(msgs) - 1
    prepare_at |= draw(st.sets(st.integers(min_value=0, max_value=n - 1), max_size=n))
    if resume_at is None:
        resume_at = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=n)))
    share = draw(st.sampled_from([0.0, 0.0, 0.1, 0.4, 0.7]))
    return Run(case, frozenset(prepare_at), resume_at, int(case.window * share))


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(run=runs())
def test_every_prepared_view_fits_its_window_or_says_why(run: Run) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_session(run, Path(tmp))


# ---------------------------------------------------------------- the two cases

WINDOW = 8_000
BUILD_LOG = "\n".join(
    f"[{n:05d}] cc -O2 -c src/module_{n}.c -o build/module_{n}.o" for n in range(3000)
)


def _two_calls() -> tuple[Message, Message, Message]:
    calls = [
        ToolCall(id=f"par_{k}", name="bash", arguments=json.dumps({"command": f"make {k}"}))
        for k in range(2)
    ]
    asked = Message(role="assistant", content="building both targets", tool_calls=calls)
    log = Message(role="tool", tool_call_id="par_0", name="bash", content=BUILD_LOG)
    late = Message(role="tool", tool_call_id="par_1", name="bash", content="target 1 built")
    return asked, log, late


def _session(tmp_path: Path, resume: list[Message] | None = None) -> CompactionSession:
    compactor = ProgressiveCompactor(
        ExtractiveSummarizer(), WINDOW, offloader=CompactionOffloader(tmp_path, "open")
    )
    return CompactionSession(compactor, "sys", session_id="open", resume=resume or [])


def _opening() -> list[Message]:
    return [Message(role="user", content=TASK), *[m for i in range(5) for m in exchange(i, 400)]]


def test_a_view_prepared_while_a_huge_result_is_in_and_its_sibling_runs_fits_the_window(
    tmp_path: Path,
) -> None:
    assert len(BUILD_LOG) > 150_000
    session = _session(tmp_path)
    session.extend(_opening())
    asked, log, late = _two_calls()
    session.extend([asked, log])

    tiers = []
    for turn in range(3):  # every turn until the call returns
        view, record = session.prepare()
        check_view(session, view, record, f"turn {turn} mid-exchange")
        assert view[view.index(asked) + 2].content == MISSING_RESULT
        tiers.append(record.tier)
    # the log offloaded once is shown offloaded after: no Emergency on every turn
    assert tiers == [CompactionTier.EMERGENCY, CompactionTier.NONE, CompactionTier.NONE]
    session.append(late)
    view, record = session.prepare()
    check_view(session, view, record, "after the late result")
    at = view.index(asked)
    assert view[at + 1].content.startswith("[offloaded: ")
    assert view[at + 2] == late


def test_the_first_prepare_after_resuming_inside_an_exchange_fits_the_window(
    tmp_path: Path,
) -> None:
    asked, log, late = _two_calls()
    session = _session(tmp_path, resume=[*_opening(), asked, log])

    view, record = session.prepare()

    check_view(session, view, record, "first prepare after resume")
    session.append(late)
    view, record = session.prepare()
    check_view(session, view, record, "after the late result")
    assert view[view.index(asked) + 2] == late
