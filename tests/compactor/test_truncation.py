"""Cutting text and messages to a size: the result fits whatever the size asked, and an offload
placeholder keeps its first line (the only pointer to the file) whole."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compactor import Message
from compactor._truncation import shrink_message, truncate_middle
from compactor.pipeline.offload import render_placeholder
from compactor.tokens import message_bytes, utf8_len
from tests.fuzzing import examples

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=400)


@settings(max_examples=examples(200), deadline=None)
@given(text=texts, max_bytes=st.integers(min_value=0, max_value=500))
def test_truncate_middle_always_fits_the_size_asked(text: str, max_bytes: int) -> None:
    out = truncate_middle(text, max_bytes)
    if utf8_len(text) <= max_bytes:
        assert out == text
    else:
        assert utf8_len(out) <= max_bytes


def test_truncate_middle_keeps_both_ends_when_the_marker_fits() -> None:
    text = "HEAD" + "x" * 1000 + "TAIL"
    out = truncate_middle(text, 100)
    assert out.startswith("HEAD") and out.endswith("TAIL")
    assert utf8_len(out) <= 100
    assert "bytes truncated by compactlens" in out


def _placeholder(call_id: str, lines: int) -> Message:
    body = "\n".join(f"build step {n}: compiling module_{n}.c" for n in range(lines))
    path = f".compactlens/tool_results/a-long-session-name/{call_id}.txt"
    content = render_placeholder(path, body, 10, 2000)
    return Message(role="tool", tool_call_id=call_id, content=content)


@settings(max_examples=examples(100), deadline=None)
@given(max_bytes=st.integers(min_value=0, max_value=900), lines=st.integers(1, 200))
def test_shrinking_an_offload_placeholder_keeps_its_first_line_whole(
    max_bytes: int, lines: int
) -> None:
    msg = _placeholder("call_0", lines)
    first = msg.content.split("\n", 1)[0]
    out = shrink_message(msg, max_bytes)
    assert out.content.split("\n", 1)[0] == first
    # the rest takes only what the first line leaves
    bare = msg.model_copy(update={"content": first})
    assert message_bytes(out) <= max(max_bytes, message_bytes(bare))
