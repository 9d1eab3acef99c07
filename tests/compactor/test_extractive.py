"""Tests for the offline ExtractiveSummarizer: anchors and summary derived from messages by rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.messages import Message, ToolCall, from_openai
from compactor.summaries._message import CompactionState, render_compaction_message
from compactor.summaries.anchors import NA, Anchor, AnchorType, parse_anchors_and_summary
from compactor.summaries.extractive import ExtractiveSummarizer
from compactor.summaries.summarize import PreviousCompaction, Summarizer
from tests.fuzzing import examples

REAL_TRANSCRIPT = (
    Path(__file__).parents[2]
    / ".."
    / "shared"
    / "data"
    / "transcripts"
    / "mini-swe-agent"
    / "output"
    / "deepseek_chat_dev"
    / "pvlib__pvlib-python-1707"
    / "pvlib__pvlib-python-1707.traj.json"
)


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def exchange(
    call_id: str, tool: ToolCall | None = None, result: str = "", *, is_error: bool = False
) -> list[Message]:
    """An assistant message with one call and its result (role ``tool``)."""
    tc = tool or call(call_id, "bash", command="true")
    return [
        Message(role="assistant", tool_calls=(tc,)),
        Message(role="tool", tool_call_id=tc.id, content=result, is_error=is_error),
    ]


def summarise(
    msgs: list[Message], previous: PreviousCompaction | None = None
) -> tuple[dict[AnchorType, Anchor], str]:
    result = ExtractiveSummarizer().summarize(msgs, previous)
    anchors, summary = parse_anchors_and_summary(result.text)
    return {a.type: a for a in anchors}, summary


def test_output_parses_to_five_anchors() -> None:
    msgs = [
        Message(role="system", content="You are a coding agent."),
        Message(role="user", content="Fix the crash in src/app.py when input is empty."),
        Message(role="assistant", content="I'll use a guard clause instead of a try block."),
        *exchange("c1", call("c1", "bash", command="pytest -x"), "<returncode>1</returncode>\nE"),
        *exchange("c2", call("c2", "read_file", path="src/app.py"), "def main(): ..."),
        Message(role="assistant", content="Next I will add a test for empty input."),
    ]
    result = ExtractiveSummarizer().summarize(msgs, None)
    anchors, summary = parse_anchors_and_summary(result.text)

    assert result.model == "extractive"
    assert result.usage is not None  # what an LLM would have read and written
    assert [a.type for a in anchors] == list(AnchorType)
    assert not any(a.is_na for a in anchors)
    assert result.text.startswith("## Anchors")
    assert "src/app.py" in summary


def test_satisfies_the_summarizer_protocol() -> None:
    assert isinstance(ExtractiveSummarizer(), Summarizer)


def test_intent_is_the_task_then_later_explicit_requests() -> None:
    msgs = [
        Message(role="system", content="System prompt. Do things."),
        Message(role="user", content="Add retries to the HTTP client. Use exponential backoff."),
        Message(role="user", content="<returncode>0</returncode>\n<output>ok 27 bbbb</output>"),
        Message(role="user", content="Also update the changelog."),
    ]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.USER_INTENT].items == [
        "Add retries to the HTTP client.",
        "Also update the changelog.",
    ]


def test_intent_does_not_drift_to_the_first_user_line_of_a_later_transcript() -> None:
    first = [Message(role="user", content="Make the parser accept BOMs.")]
    anchors, summary = summarise(first)
    previous = PreviousCompaction(anchors=list(anchors.values()), summary=summary)
    later = [
        Message(role="user", content="ok 27 bbbb observation from the harness"),
        Message(role="assistant", content="Looking at it."),
    ]

    result = ExtractiveSummarizer().summarize(later, previous)
    again, _ = parse_anchors_and_summary(result.text)

    assert again[0].content == "Make the parser accept BOMs."


def test_intent_skips_tool_results_and_previous_compaction_messages() -> None:
    msgs = [
        render_compaction_message(CompactionState(summary="old stuff", task="Old task")),
        Message(role="user", tool_call_id="t0", content="harness9-style tool result"),
        Message(role="user", content="Rename the config loader."),
    ]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.USER_INTENT].content == "Rename the config loader."


def test_intent_joins_a_lead_in_line_and_drops_markup() -> None:
    content = "<pr_description>\nConsider the following PR:\nregression: nan for aoi > 90\n\nmore"
    anchors, _ = summarise([Message(role="user", content=content)])
    assert anchors[AnchorType.USER_INTENT].content == (
        "Consider the following PR: regression: nan for aoi > 90"
    )


def test_intent_is_one_capped_sentence_for_cjk_and_huge_text() -> None:
    anchors, _ = summarise([Message(role="user", content="修复登录页面的错误。然后运行测试。")])
    assert anchors[AnchorType.USER_INTENT].content == "修复登录页面的错误。"

    anchors, _ = summarise([Message(role="user", content="word " * 100_000)])
    assert len(anchors[AnchorType.USER_INTENT].content) <= 300


def test_intent_falls_back_to_previous_when_transcript_has_none() -> None:
    previous = PreviousCompaction(
        anchors=[Anchor(type=AnchorType.USER_INTENT, content="Port the CLI to typer.")]
    )
    msgs = [Message(role="assistant", content="Continuing with the port.")]
    anchors, _ = summarise(msgs, previous)
    assert anchors[AnchorType.USER_INTENT].content == "Port the CLI to typer."

    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.USER_INTENT].content == NA


def test_successful_calls_become_progress() -> None:
    msgs = [
        *exchange("c1", call("c1", "bash", command="pytest -x"), "<returncode>0</returncode>"),
        *exchange("c2", call("c2", "read_file", path="src/app.py"), "print('hi')"),
        *exchange("c3", call("c3", "write_file", file_path="src/app.py", content="x = 1"), "ok"),
        *exchange(
            "c4",
            call("c4", "str_replace_based_edit_tool", command="view", path="/repo/README.md"),
            "# readme",
        ),
        *exchange("c5", call("c5", "grep", pattern="TODO", path="src"), "src/a.py:1: TODO"),
    ]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.EXECUTION_PROGRESS].items == [
        "ran `pytest -x` (exit 0)",
        "read src/app.py",
        "edited src/app.py",
        "read /repo/README.md",
        "searched `TODO` in src",
    ]
    assert anchors[AnchorType.TRIED_SOLUTION].is_na


def test_failures_become_tried_solutions() -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/site-packages/x.py", line 3, in <module>\n'
        "ZeroDivisionError: division by zero"
    )
    msgs = [
        *exchange("c1", call("c1", "bash", command="make build"), "make: *** boom", is_error=True),
        *exchange("c2", call("c2", "bash", command="pytest"), "collected 3\nexit code 1"),
        *exchange("c3", call("c3", "bash", command="python run.py"), traceback),
        *exchange("c4", call("c4", "run", cmd="npm test"), "1 passed\nFAILED test_x - boom"),
    ]
    anchors, summary = summarise(msgs)
    tried = anchors[AnchorType.TRIED_SOLUTION].items
    assert tried == [
        "ran `make build`: failed — make: *** boom",
        "ran `pytest` (exit 1): failed — collected 3",
        "ran `python run.py`: failed — ZeroDivisionError: division by zero",
        "ran `npm test`: failed — FAILED test_x - boom",
    ]
    assert anchors[AnchorType.EXECUTION_PROGRESS].is_na
    assert "4 failed" in summary
    # The traceback frame's library file was not touched by the agent.
    assert "site-packages" not in summary


def test_explicit_exit_zero_outranks_error_words() -> None:
    result = "<returncode>0</returncode>\n<output>\nError: this is just printed text\n</output>"
    anchors, _ = summarise(exchange("c1", call("c1", "bash", command="cat notes.txt"), result))
    assert anchors[AnchorType.TRIED_SOLUTION].is_na
    assert anchors[AnchorType.EXECUTION_PROGRESS].items == ["ran `cat notes.txt` (exit 0)"]


def test_read_file_contents_with_error_words_are_not_failures() -> None:
    source = "raise ValueError('Error: bad input')\nTraceback (most recent call last)"
    anchors, _ = summarise(exchange("c1", call("c1", "read_file", path="src/v.py"), source))
    assert anchors[AnchorType.EXECUTION_PROGRESS].items == ["read src/v.py"]
    assert anchors[AnchorType.TRIED_SOLUTION].is_na


def test_argv_list_commands_are_joined() -> None:
    tc = call("c1", "shell", command=["bash", "-lc", "pytest -q"])
    anchors, summary = summarise(exchange("c1", tc, "Exit code: 0"))
    assert anchors[AnchorType.EXECUTION_PROGRESS].items == ["ran `bash -lc pytest -q` (exit 0)"]
    assert "Commands run: `bash -lc pytest -q`" in summary


def test_unparseable_arguments_fall_back_to_raw_text() -> None:
    tc = ToolCall(id="c1", name="custom", arguments="not json {{ at all")
    anchors, _ = summarise(exchange("c1", tc, "done"))
    assert anchors[AnchorType.EXECUTION_PROGRESS].items == ["called custom(not json {{ at all)"]


def test_pending_call_is_neither_progress_nor_failure() -> None:
    msgs = [Message(role="assistant", tool_calls=(call("c1", "bash", command="sleep 9"),))]
    anchors, summary = summarise(msgs)
    assert anchors[AnchorType.EXECUTION_PROGRESS].is_na
    assert anchors[AnchorType.TRIED_SOLUTION].is_na
    assert "1 tool calls, 0 failed" in summary


def test_harness9_user_tool_results_pair_like_tool_role() -> None:
    tc = call("c1", "bash", command="ls")
    msgs = [
        Message(role="assistant", tool_calls=(tc,)),
        Message(role="user", tool_call_id="c1", content="exit status 2", is_error=False),
    ]
    anchors, summary = summarise(msgs)
    assert anchors[AnchorType.TRIED_SOLUTION].items == ["ran `ls` (exit 2): failed — exit status 2"]
    assert anchors[AnchorType.USER_INTENT].is_na  # a tool result is never the task
    assert "1 tool results" in summary


def test_progress_is_capped_to_newest_items() -> None:
    msgs: list[Message] = []
    for i in range(30):
        msgs += exchange(f"c{i}", call(f"c{i}", "bash", command=f"step {i}"), "ok")
    items = summarise(msgs)[0][AnchorType.EXECUTION_PROGRESS].items
    assert len(items) == 12
    assert items[-1] == "ran `step 29`"
    assert "ran `step 0`" not in items


def test_long_items_are_clipped() -> None:
    anchors, _ = summarise(exchange("c1", call("c1", "bash", command="echo " + "x" * 5000), "ok"))
    (item,) = anchors[AnchorType.EXECUTION_PROGRESS].items
    assert len(item) <= 200
    assert item.endswith("…`")


def test_decisions_come_from_assistant_phrasing_deduplicated() -> None:
    msgs = [
        Message(role="user", content="We should use Postgres, says the user."),
        Message(role="assistant", content="Looking around. I'll use SQLite instead of Postgres."),
        Message(role="assistant", content="I'll use SQLite  instead of Postgres."),
        Message(role="assistant", content="The fix is to close the cursor. Running tests now."),
        Message(role="assistant", content="```\n# we should not read code blocks\n```"),
    ]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.KEY_DECISION].items == [
        "I'll use SQLite instead of Postgres.",
        "The fix is to close the cursor.",
    ]


def test_analysis_matched_on_instead_of_is_not_a_decision() -> None:
    msgs = [
        Message(role="assistant", content="The subquery groups by email and id instead of email."),
        Message(role="assistant", content="So it returns 9 rather than 8. Why 9 instead of 8?"),
        Message(role="assistant", content="Instead of an early return, I'll guard the division."),
        Message(role="assistant", content="- Used a Result type instead of raising."),
    ]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.KEY_DECISION].items == [
        "Instead of an early return, I'll guard the division.",
        "- Used a Result type instead of raising.",
    ]


def test_offers_options_and_empty_promises_are_not_decisions() -> None:
    msgs = [
        Message(role="assistant", content="If you decide to cancel, tell me and I can help."),
        Message(role="assistant", content="You can choose to keep the booking as it is."),
        Message(
            role="assistant", content="Should we switch to Postgres? Maybe I should use SQLite."
        ),
        Message(
            role="assistant", content="Let's fix it. I'll implement the changes you asked for."
        ),
        Message(role="assistant", content="Instead of a patch, we could rewrite the loader."),
    ]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.KEY_DECISION].is_na


def test_a_decision_needs_a_chooser_and_a_change() -> None:
    msgs = [
        Message(role="assistant", content="We should run the tests first. We should add a lock."),
        Message(role="assistant", content="I'll use curl to see what it returns."),
        Message(
            role="assistant", content="I'll use curl to upload the script. Let's modify the CSS."
        ),
        Message(role="assistant", content="I think the fix is to close the file handle."),
    ]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.KEY_DECISION].items == [
        "We should add a lock.",
        "I'll use curl to upload the script.",
        "Let's modify the CSS.",
        "I think the fix is to close the file handle.",
    ]


def test_next_steps_come_from_latest_assistant_plan() -> None:
    msgs = [
        Message(role="assistant", content="Next I will refactor the parser."),
        Message(role="assistant", content="Tests pass. Now:\n1. update the docs\n2. bump version"),
        *exchange("c1", call("c1", "bash", command="git status"), "clean"),
    ]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.NEXT_STEP].items == ["update the docs", "bump version"]


def test_next_steps_fall_back_to_last_sentence() -> None:
    msgs = [Message(role="assistant", content="All tests pass. The patch is complete.")]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.NEXT_STEP].items == ["The patch is complete."]


def test_summary_lists_files_touched_without_urls_or_versions() -> None:
    msgs = [
        Message(
            role="user",
            content=(
                "See https://example.com/docs/page.html and pvlib 0.9.5 (python 3.10.4). "
                "Bug in ./pkg/core.py, also /abs/path/notes.txt and config.json, "
                "not iam.physical or H.H. Safwat, doi 10.1016/j.rser."
            ),
        ),
        *exchange("c1", call("c1", "bash", command="cat src/main.rs"), "fn main() {}"),
        *exchange("c2", call("c2", "bash", command="git diff"), "--- a/lib/x.go\n+++ b/lib/x.go"),
    ]
    _, summary = summarise(msgs)
    files_line = next(line for line in summary.splitlines() if line.startswith("Files touched:"))
    files = files_line.removeprefix("Files touched: ").split(", ")
    # Paths a tool call acted on come first, then paths mentioned in text.
    assert files == [
        "src/main.rs",
        "pkg/core.py",
        "/abs/path/notes.txt",
        "config.json",
        "lib/x.go",
    ]
    assert "Commands run: `cat src/main.rs`; `git diff`" in summary


def test_files_touched_are_capped() -> None:
    msgs = [Message(role="user", content=" ".join(f"d/f{i}.py" for i in range(60)))]
    _, summary = summarise(msgs)
    assert "d/f39.py (+20 more)" in summary
    assert "d/f40.py" not in summary


def test_incremental_keeps_previous_items() -> None:
    previous = PreviousCompaction(
        anchors=[
            Anchor(type=AnchorType.USER_INTENT, content="Speed up the importer."),
            Anchor(type=AnchorType.EXECUTION_PROGRESS, content="- profiled the importer"),
            Anchor(type=AnchorType.KEY_DECISION, content="- we should batch inserts"),
            Anchor(type=AnchorType.TRIED_SOLUTION, content="- ran `pypy`: failed — no wheel"),
            Anchor(type=AnchorType.NEXT_STEP, content="- benchmark the batch size"),
        ],
        summary="Extractive summary of 9 messages.\nFiles touched: old/importer.py",
    )
    msgs = [*exchange("c1", call("c1", "bash", command="python bench.py"), "ok")]
    anchors, summary = summarise(msgs, previous)

    assert anchors[AnchorType.USER_INTENT].content == "Speed up the importer."
    assert anchors[AnchorType.EXECUTION_PROGRESS].items == [
        "profiled the importer",
        "ran `python bench.py`",
    ]
    assert anchors[AnchorType.KEY_DECISION].items == ["we should batch inserts"]
    assert anchors[AnchorType.TRIED_SOLUTION].items == ["ran `pypy`: failed — no wheel"]
    assert anchors[AnchorType.NEXT_STEP].items == ["benchmark the batch size"]
    assert "Files touched: old/importer.py, bench.py" in summary


def test_incremental_merge_deduplicates_and_keeps_newest_when_capping() -> None:
    old_progress = "\n".join(f"- ran `old {i}`" for i in range(12))
    previous = PreviousCompaction(
        anchors=[Anchor(type=AnchorType.EXECUTION_PROGRESS, content=old_progress)]
    )
    msgs = [
        *exchange("c1", call("c1", "bash", command="old 11"), "ok"),
        *exchange("c2", call("c2", "bash", command="new"), "ok"),
    ]
    items = summarise(msgs, previous)[0][AnchorType.EXECUTION_PROGRESS].items
    assert len(items) == 12
    assert items[-2:] == ["ran `old 11`", "ran `new`"]
    assert items.count("ran `old 11`") == 1
    assert "ran `old 0`" not in items


def test_incremental_new_next_steps_replace_old_ones() -> None:
    previous = PreviousCompaction(
        anchors=[Anchor(type=AnchorType.NEXT_STEP, content="- write the migration")]
    )
    msgs = [Message(role="assistant", content="Migration written. Next, run it on staging.")]
    anchors, _ = summarise(msgs, previous)
    assert anchors[AnchorType.NEXT_STEP].items == ["Next, run it on staging."]


def test_summary_is_deterministic() -> None:
    msgs = [
        Message(role="user", content="Do the thing in a/b.py."),
        *exchange("c1", call("c1", "bash", command="pytest"), "exit code 1"),
    ]
    first = ExtractiveSummarizer().summarize(msgs, None).text
    assert all(ExtractiveSummarizer().summarize(msgs, None).text == first for _ in range(3))


def test_huge_tool_result_is_scanned_only_at_its_edges() -> None:
    huge = "x" * 3_000_000 + "\nError: hidden in the middle\n" + "y" * 3_000_000
    huge += "\nRuntimeError: at the end"
    anchors, _ = summarise(exchange("c1", call("c1", "bash", command="gen"), huge))
    # An error only in the middle is never seen: only the edges are scanned (speed: bench/).
    middle_only = "x" * 3_000_000 + "\nError: hidden in the middle\n" + "y" * 3_000_000
    quiet, _ = summarise(exchange("c2", call("c2", "bash", command="gen2"), middle_only))
    assert quiet[AnchorType.TRIED_SOLUTION].content == NA
    assert quiet[AnchorType.EXECUTION_PROGRESS].items == ["ran `gen2`"]
    assert anchors[AnchorType.TRIED_SOLUTION].items == [
        "ran `gen`: failed — RuntimeError: at the end"
    ]


def test_five_thousand_messages_keep_the_newest_capped_items_and_exact_counts() -> None:
    msgs = [Message(role="user", content="Migrate every module to the new logging API.")]
    for i in range(2500):
        tc = call(f"c{i}", "bash", command=f"sed -i 's/log/logger/' src/mod{i}.py")
        msgs += [
            Message(
                role="assistant",
                content=f"I'll use logger in mod{i}. Then check it.",
                tool_calls=(tc,),
            ),
            Message(
                role="tool",
                tool_call_id=tc.id,
                content=f"<returncode>{i % 2}</returncode>\n" + "out " * 50,
            ),
        ]
    anchors, summary = summarise(msgs)
    assert len(anchors[AnchorType.EXECUTION_PROGRESS].items) == 12
    assert "2500 tool calls, 1250 failed" in summary


@pytest.mark.parametrize("content", ["", "   ", "\n\n", "🙂", "中文内容没有标点"])
def test_odd_content_still_yields_a_summary(content: str) -> None:
    msgs = [Message(role="user", content=content), Message(role="assistant", content=content)]
    anchors, summary = summarise(msgs)
    assert len(anchors) == 5
    assert summary.startswith("Extractive summary of 2 messages")


message_strategy = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.text(max_size=300),
    tool_call_id=st.one_of(st.none(), st.sampled_from(["a", "b"])),
    is_error=st.booleans(),
    tool_calls=st.lists(
        st.builds(
            ToolCall,
            id=st.sampled_from(["a", "b"]),
            name=st.text(max_size=10),
            arguments=st.text(max_size=50),
        ),
        max_size=2,
    ).map(tuple),
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(message_strategy, min_size=1, max_size=12))
def test_any_non_empty_transcript_gives_five_anchors_and_a_summary(msgs: list[Message]) -> None:
    result = ExtractiveSummarizer().summarize(msgs, None)
    anchors, summary = parse_anchors_and_summary(result.text)
    assert [a.type for a in anchors] == list(AnchorType)
    assert summary.strip()


def test_real_mini_swe_agent_transcript() -> None:
    if not REAL_TRANSCRIPT.exists():
        pytest.skip(f"shared transcript not present at {REAL_TRANSCRIPT}")
    raw = json.loads(REAL_TRANSCRIPT.read_text(encoding="utf-8"))
    msgs = [from_openai(m) for m in raw["messages"] if m.get("role") != "exit"]

    anchors, summary = summarise(msgs)

    intent = anchors[AnchorType.USER_INTENT].content
    first_user = next(m for m in msgs if m.role == "user").content
    assert "iam.physical returns nan for aoi > 90°" in intent
    assert "iam.physical returns nan for aoi > 90°" in first_user
    assert len(intent) <= 300
    assert "pvlib/iam.py" in summary
    assert "Files touched:" in summary
    assert not anchors[AnchorType.EXECUTION_PROGRESS].is_na
    assert not anchors[AnchorType.TRIED_SOLUTION].is_na
    assert any("ModuleNotFoundError" in t for t in anchors[AnchorType.TRIED_SOLUTION].items)


def test_the_usage_is_what_an_llm_summariser_would_have_read_and_written() -> None:
    """Input: the transcript's estimate plus the previous compaction's rendered text; output:
    the estimate of the text written (bytes // 4 each); the model says ``extractive``."""
    transcript = [
        Message(role="user", content="fix the flaky test in tests/test_io.py" * 3),
        *exchange("c1", call("c1", "bash", command="pytest -x"), "1 failed" * 20),
    ]
    previous = PreviousCompaction(
        anchors=[Anchor(type=AnchorType.USER_INTENT, content="fix the test")], summary="s" * 400
    )
    rendered = previous.render().encode()
    transcript_bytes = sum(
        len(m.content.encode())
        + sum(len(f"{tc.id}{tc.name}{tc.arguments}".encode()) for tc in m.tool_calls)
        + len((m.tool_call_id or "").encode())
        for m in transcript
    )

    first = ExtractiveSummarizer().summarize(transcript, None)
    merged = ExtractiveSummarizer().summarize(transcript, previous)

    assert first.model == "extractive"
    assert first.usage is not None and merged.usage is not None
    assert first.usage.input_tokens == transcript_bytes // 4
    assert first.usage.output_tokens == len(first.text.encode()) // 4 > 0
    assert merged.usage.input_tokens == transcript_bytes // 4 + len(rendered) // 4
    assert merged.usage.output_tokens == len(merged.text.encode()) // 4


def test_a_short_decision_that_names_nothing_keeps_what_led_to_it() -> None:
    """ "We should return 0." (a real DeepSeek turn) says nothing once its message is gone; the
    sentence before it that names the case comes with it, a named decision stays alone."""
    msgs = [
        Message(
            role="assistant",
            content="When `aoi > 90`, the light comes from behind. So the model does not apply. "
            "We should return 0. I'll add a guard to `physical()` for `aoi >= 90`.",
        ),
        Message(role="assistant", content="Nothing to see here. We should add a lock."),
        Message(role="assistant", content="I'll use curl to upload it. Let's modify the CSS."),
    ]
    anchors, _ = summarise(msgs)
    assert anchors[AnchorType.KEY_DECISION].items == [
        "When `aoi > 90`, the light comes from behind. So the model does not apply. "
        "We should return 0.",
        "I'll add a guard to `physical()` for `aoi >= 90`.",
        "We should add a lock.",  # nothing before it names anything: alone
        "I'll use curl to upload it.",
        "Let's modify the CSS.",  # the sentence before is a decision of its own
    ]
