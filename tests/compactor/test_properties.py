"""Property-based tests: the compactor's invariants over generated, valid conversations.

Hypothesis builds agent conversations (a system prompt, a task, then user turns, assistant text,
parallel tool calls, some carrying a file body in their arguments, with their results in role
``tool`` or harness9's role ``user``: empty, small, huge, failing, CJK and emoji) and random
context windows, thresholds and tail sizes. Every tier is forced in turn, and the natural
decision is run too; after each the view must be a valid history that starts with the system
message, keeps the tail verbatim (outside Emergency and fallbacks), carries the task, never
grows, and the input must be unchanged. Offloaded files must round-trip byte for byte. A
``CompactionSession`` fed the same kind of conversation must keep every view valid and inside
the window. ``LARGE_ARGUMENTS_CASE`` pins a counterexample these properties found, so it is
checked on every run.

These tests use only the public names of ``compactor`` and the offline
``ExtractiveSummarizer``; they do not check wording of summaries or notifications.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from compactor import (
    AnchorType,
    CompactionOffloader,
    CompactionRecord,
    CompactionSession,
    CompactionTier,
    CompactorConfig,
    ExtractiveSummarizer,
    Message,
    ProgressiveCompactor,
    ToolCall,
    estimate_tokens,
    validate_history,
)
from compactor.summaries._message import COMPACTION_MARKER
from tests.fuzzing import examples

PROPERTY_SETTINGS = settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

FORCED_TIERS = (
    CompactionTier.WARN,
    CompactionTier.SOFT,
    CompactionTier.FULL,
    CompactionTier.EMERGENCY,
)
MIN_WINDOW = 4000
"""Tokens. With system prompts of at most 200 bytes, system + truncated task always fit."""
SYSTEM_MAX_BYTES = 200
TASK_PROBE_CHARS = 200
HUGE_MAX_BYTES = 30_000

WORDS = (
    "fix",
    "the",
    "bug",
    "in",
    "src/app.py",
    "tests/test_app.py",
    "pytest -x",
    "I'll use",
    "a guard clause",
    "instead of",
    "next",
    "then",
    "Error:",
    "修复",
    "错误",
    "接下来",
    "日本語のテキスト",
    "한국어",
    "🚀",
    "✅",
    "🔥🔥",
    "émigré",
    "naïve",
    "\t",
    "line\nbreak",
)
TOOL_NAMES = ("bash", "read_file", "write_file", "str_replace_based_edit_tool", "grep")

# Any printable or control character except surrogates (not encodable as UTF-8).
free_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
sentences = st.lists(st.one_of(st.sampled_from(WORDS), free_text), min_size=1, max_size=12).map(
    " ".join
)


def clip_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes (never inside a character)."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


@st.composite
def system_prompts(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(WORDS), min_size=0, max_size=20))
    return clip_bytes("You are a coding agent. " + " ".join(words), SYSTEM_MAX_BYTES)


@st.composite
def tasks(draw: st.DrawFn) -> str:
    """A task: one sentence, or a long multi-line one (some above the truncation cap)."""
    first = draw(st.sampled_from(WORDS)) + " " + draw(sentences)
    repeat = draw(st.sampled_from([1, 1, 1, 5, 40, 400]))
    if repeat == 1:
        return first
    body = "\n".join(f"{i}. {first}" for i in range(repeat))
    return f"{first}\n{body}\nEnd of request."


@st.composite
def huge_texts(draw: st.DrawFn, min_bytes: int = 2_000, max_bytes: int = HUGE_MAX_BYTES) -> str:
    """A multi-line text of ``min_bytes`` to ``max_bytes``, expanded from a few drawn lines."""
    lines = draw(st.lists(sentences, min_size=1, max_size=4))
    target = draw(st.integers(min_value=min_bytes, max_value=max_bytes))
    out: list[str] = []
    size = 0
    i = 0
    while size < target:
        line = f"{i:05d} {lines[i % len(lines)]}"
        out.append(line)
        size += len(line.encode("utf-8")) + 1
        i += 1
    return clip_bytes("\n".join(out), max_bytes)


@st.composite
def tracebacks(draw: st.DrawFn) -> str:
    frames = draw(st.integers(min_value=1, max_value=30))
    exc = draw(st.sampled_from(["ValueError", "KeyError", "AssertionError", "RuntimeError"]))
    lines = ["Traceback (most recent call last):"]
    for i in range(frames):
        lines += [f'  File "/src/pkg/mod_{i}.py", line {i + 10}, in f{i}', f"    f{i + 1}()"]
    lines.append(f"{exc}: {draw(sentences)}")
    return "\n".join(lines)


result_contents = st.one_of(
    st.just(""),
    sentences,
    huge_texts(),
    huge_texts(),
    huge_texts(min_bytes=300, max_bytes=8_000),  # around the offload thresholds
    st.lists(sentences, min_size=2, max_size=30).map("\n".join),
)


@dataclass(frozen=True)
class Case:
    """One generated conversation and the compactor settings to run it with."""

    msgs: list[Message]
    config: CompactorConfig
    window: int

    def __repr__(self) -> str:
        """The shape, not the text: failures stay readable (contents can be 30 KB)."""
        lines = [f"Case(window={self.window}, tokens={estimate_tokens(self.msgs)},"]
        lines.append(f"  config={self.config!r},")
        for i, m in enumerate(self.msgs):
            calls = [f"{tc.id}:{len(tc.arguments.encode('utf-8'))}B" for tc in m.tool_calls]
            extra = f" calls={calls}" if calls else ""
            extra += f" result_of={m.tool_call_id!r}" if m.tool_call_id is not None else ""
            extra += " is_error" if m.is_error else ""
            size = len(m.content.encode("utf-8"))
            lines.append(f"  [{i}] {m.role} {size}B {m.content[:40]!r}{extra}")
        return "\n".join([*lines, ")"])


@st.composite
def tool_exchange(draw: st.DrawFn, next_id: Iterator[int]) -> list[Message]:
    """An assistant message with 1-4 parallel calls, then their results (possibly reordered)."""
    calls: list[ToolCall] = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        k = next(next_id)
        style = draw(
            st.sampled_from(["call_{}", "toolu_{:06d}", "../../etc/{}", "id with 空白 {}"])
        )
        name = draw(st.sampled_from(TOOL_NAMES))
        key = draw(st.sampled_from(["command", "path", "pattern", "content"]))
        value = draw(huge_texts(min_bytes=100, max_bytes=3_000)) if key == "content" else ""
        args = {"path": draw(sentences), key: value} if value else {key: draw(sentences)}
        arguments = json.dumps(args, ensure_ascii=draw(st.booleans()))
        calls.append(ToolCall(id=style.format(k), name=name, arguments=arguments))
    text = draw(st.one_of(st.just(""), sentences))
    results: list[Message] = []
    for tc in calls:
        failed = draw(st.integers(min_value=0, max_value=4)) == 0
        content = draw(tracebacks()) if failed else draw(result_contents)
        role = draw(st.sampled_from(["tool", "tool", "user"]))
        results.append(
            Message(
                role=role,
                content=content,
                tool_call_id=tc.id,
                is_error=failed,
                name=tc.name if role == "tool" and draw(st.booleans()) else None,
            )
        )
    results = draw(st.permutations(results))
    return [Message(role="assistant", content=text, tool_calls=tuple(calls)), *results]


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """A valid conversation: system, task, then a random mix of turns with unique call ids."""
    ids = iter(range(1_000_000))
    msgs = [
        Message(role="system", content=draw(system_prompts())),
        Message(role="user", content=draw(tasks())),
    ]
    for _ in range(draw(st.integers(min_value=0, max_value=24))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "tools"]))
        if kind == "user":
            msgs.append(Message(role="user", content=draw(sentences)))
        elif kind == "assistant":
            msgs.append(Message(role="assistant", content=draw(sentences)))
        else:
            msgs.extend(draw(tool_exchange(ids)))
    return msgs


@st.composite
def configs(draw: st.DrawFn) -> CompactorConfig:
    """Strictly increasing thresholds; targets and task cap chosen so the task always fits."""
    warn = draw(st.floats(min_value=0.3, max_value=0.7))
    soft = warn + draw(st.floats(min_value=0.01, max_value=0.1))
    full = soft + draw(st.floats(min_value=0.01, max_value=0.1))
    emergency = min(1.0, full + draw(st.floats(min_value=0.01, max_value=0.1)))
    emergency_target = emergency * draw(st.floats(min_value=0.6, max_value=0.95))
    return CompactorConfig(
        warn=warn,
        soft=soft,
        full=full,
        emergency=emergency,
        emergency_target=emergency_target,
        fallback_target=warn * draw(st.floats(min_value=0.5, max_value=0.95)),
        task_max_fraction=min(0.25, emergency_target * 0.6),
        offload_threshold=draw(st.integers(min_value=200, max_value=8000)),
        preview_lines=draw(st.integers(min_value=0, max_value=20)),
        min_tail_messages=draw(st.integers(min_value=1, max_value=10)),
    )


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A conversation, a config, and a window that puts it in a random band (often a tier's)."""
    msgs = draw(conversations())
    config = draw(configs())
    bands = [
        (0.2, 1.6),
        (config.warn, config.soft),
        (config.soft, config.full),
        (config.full, config.emergency),
        (config.emergency, 1.3),
    ]
    low, high = draw(st.sampled_from(bands))
    ratio = draw(st.floats(min_value=low, max_value=high))
    window = max(MIN_WINDOW, int(estimate_tokens(msgs) / ratio))
    return Case(msgs=msgs, config=config, window=window)


# A write whose file body is in the tool-call arguments, larger than the whole window, as the
# newest exchange: Emergency must still bring the view to its target (found by these properties).
LARGE_ARGUMENTS_CASE = Case(
    msgs=[
        Message(role="system", content="You are a coding agent."),
        Message(role="user", content="Write the file."),
        Message(
            role="assistant",
            tool_calls=(
                ToolCall(
                    id="call_0",
                    name="write_file",
                    arguments=json.dumps({"path": "a.txt", "content": "x" * 20_000}),
                ),
            ),
        ),
        Message(role="tool", content="ok", tool_call_id="call_0"),
    ],
    config=CompactorConfig(),
    window=MIN_WINDOW,
)


# ---------------------------------------------------------------- running the compactor


@dataclass(frozen=True)
class Run:
    """One compaction of a case: which tier was asked for (None: natural), view and record."""

    forced: CompactionTier | None
    view: list[Message]
    record: CompactionRecord


def make_compactor(case: Case, work_dir: Path, session_id: str) -> ProgressiveCompactor:
    return ProgressiveCompactor(
        ExtractiveSummarizer(),
        case.window,
        config=case.config,
        offloader=CompactionOffloader(work_dir, session_id),
        session_id=session_id,
    )


@contextmanager
def compacted(case: Case) -> Iterator[tuple[Path, list[Run]]]:
    """Every forced tier and the natural decision, each by a fresh compactor, in one temp dir."""
    with tempfile.TemporaryDirectory() as tmp:
        work_dir = Path(tmp)
        runs: list[Run] = []
        for forced in (*FORCED_TIERS, None):
            compactor = make_compactor(case, work_dir, "prop-session")
            if forced is None:
                view, record = compactor.compact_with_record(case.msgs)
            else:
                outcome = compactor.compact_detailed(case.msgs, tier=forced)
                view, record = outcome.view, outcome.record
            runs.append(Run(forced=forced, view=view, record=record))
        yield work_dir, runs


def expected_tail(msgs: list[Message], min_tail: int) -> list[Message]:
    """The newest ``min_tail`` messages, extended back so no tool exchange is cut."""
    start = max(1, len(msgs) - min_tail)
    while start > 1 and msgs[start].is_tool_result:
        start -= 1
    return msgs[start:]


def task_probe(msgs: list[Message]) -> str:
    task = next(m for m in msgs if m.role == "user" and not m.is_tool_result)
    return task.content[:TASK_PROBE_CHARS]


def describe(run: Run) -> str:
    r = run.record
    return (
        f"forced={run.forced!r} tier={r.tier!r} effective={r.effective} "
        f"fallback={r.fallback!r} error={r.error!r}"
    )


# ---------------------------------------------------------------- ProgressiveCompactor


@PROPERTY_SETTINGS
@given(case=cases())
def test_every_tier_keeps_tool_pairs_intact(case: Case) -> None:
    with compacted(case) as (_, runs):
        for run in runs:
            assert validate_history(run.view) == [], describe(run)


@PROPERTY_SETTINGS
@given(case=cases())
def test_every_tier_keeps_the_system_message_first(case: Case) -> None:
    with compacted(case) as (_, runs):
        for run in runs:
            assert run.view[0] == case.msgs[0], describe(run)
            assert all(m.role != "system" for m in run.view[1:]), describe(run)


@PROPERTY_SETTINGS
@given(case=cases())
def test_every_tier_leaves_the_input_unchanged(case: Case) -> None:
    snapshot = [m.model_dump() for m in case.msgs]
    identities = [id(m) for m in case.msgs]
    with compacted(case) as (_, runs):
        assert [m.model_dump() for m in case.msgs] == snapshot
        assert [id(m) for m in case.msgs] == identities
        for run in runs:
            assert run.record.msgs_before == len(snapshot), describe(run)


@PROPERTY_SETTINGS
@given(case=cases())
def test_tail_is_kept_verbatim_outside_emergency(case: Case) -> None:
    tail = expected_tail(case.msgs, case.config.min_tail_messages)
    with compacted(case) as (_, runs):
        for run in runs:
            record = run.record
            if record.tier == CompactionTier.EMERGENCY or record.fallback:
                continue
            assert len(run.view) >= len(tail) + 1, describe(run)
            assert run.view[-len(tail) :] == tail, describe(run)


@PROPERTY_SETTINGS
@given(case=cases())
def test_soft_and_full_records_carry_five_anchors_in_order(case: Case) -> None:
    with compacted(case) as (_, runs):
        for run in runs:
            record = run.record
            summarised = record.tier in (CompactionTier.SOFT, CompactionTier.FULL)
            if summarised and record.effective and not record.error:
                assert [a.type for a in record.anchors] == list(AnchorType), describe(run)
                assert sum(is_compaction(m) for m in run.view) == 1, describe(run)


def is_compaction(msg: Message) -> bool:
    return (
        msg.role == "user" and not msg.is_tool_result and msg.content.startswith(COMPACTION_MARKER)
    )


@PROPERTY_SETTINGS
@given(case=cases())
def test_offloaded_files_round_trip_byte_for_byte(case: Case) -> None:
    originals = {m.tool_call_id: m.content for m in case.msgs if m.tool_call_id is not None}
    with compacted(case) as (work_dir, runs):
        for run in runs:
            for entry in run.record.offloaded:
                path = work_dir / entry.file_path
                assert path.resolve().is_relative_to(work_dir.resolve()), entry.file_path
                data = originals[entry.tool_call_id].encode("utf-8")
                assert path.read_bytes() == data, describe(run)
                assert entry.bytes == len(data), describe(run)


@PROPERTY_SETTINGS
@given(case=cases())
def test_compaction_never_increases_tokens(case: Case) -> None:
    before = estimate_tokens(case.msgs)
    with compacted(case) as (_, runs):
        for run in runs:
            record = run.record
            assert record.tokens_before == before, describe(run)
            assert record.tokens_after <= record.tokens_before, describe(run)
            assert estimate_tokens(run.view) <= before, describe(run)


@PROPERTY_SETTINGS
@given(case=cases())
def test_the_task_survives_every_tier(case: Case) -> None:
    probe = task_probe(case.msgs)
    with compacted(case) as (_, runs):
        for run in runs:
            # The task message itself (perhaps middle-truncated) or a compaction message.
            carriers = [
                m.content
                for m in run.view
                if is_compaction(m)
                or (m.role == "user" and not m.is_tool_result and m.content.startswith(probe))
            ]
            assert any(probe in c for c in carriers), describe(run)


@PROPERTY_SETTINGS
@given(case=cases())
@example(case=LARGE_ARGUMENTS_CASE)
def test_emergency_view_fits_the_emergency_target(case: Case) -> None:
    budget = case.config.emergency_target * case.window
    with compacted(case) as (_, runs):
        for run in runs:
            if run.record.tier == CompactionTier.EMERGENCY:
                assert estimate_tokens(run.view) <= budget, describe(run)


# ---------------------------------------------------------------- CompactionSession


@PROPERTY_SETTINGS
@given(case=cases())
@example(case=LARGE_ARGUMENTS_CASE)
def test_session_views_stay_valid_and_within_the_window(case: Case) -> None:
    system, *rest = case.msgs
    with tempfile.TemporaryDirectory() as tmp:
        compactor = make_compactor(case, Path(tmp), "prop-session")
        session = CompactionSession(compactor, system, session_id="prop-session")
        appended: list[Message] = []
        for msg in rest:
            if msg.role == "assistant":
                check_session_turn(session, case, system, appended)
            session.append(msg)
            appended.append(msg)
            assert session.history == appended
        if appended[-1].role != "assistant":
            check_session_turn(session, case, system, appended)  # the next model call


def check_session_turn(
    session: CompactionSession, case: Case, system: Message, appended: list[Message]
) -> None:
    """``prepare()`` as before a model call, and the view's invariants."""
    view, record = session.prepare()
    context = f"after {len(appended)} messages: tier={record.tier!r} {record.error!r}"
    assert validate_history(view) == [], context
    assert view[0] == system, context
    assert estimate_tokens(view) <= case.window, context
    assert record.tokens_after <= record.tokens_before, context
