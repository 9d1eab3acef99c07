"""Tests for the provider converters: OpenAI chat-completions and Anthropic Messages dicts.

They check round trips (text, tool calls, parallel tool calls with their results), that a
harness9-style tool result (role ``user`` with a ``tool_call_id``) is a tool result, how system
messages and block-list contents are handled, and that unknown roles are refused by name.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from compactor import (
    Message,
    ToolCall,
    from_openai,
    messages_from_anthropic,
    messages_from_openai,
    messages_to_anthropic,
    messages_to_openai,
    to_openai,
)

SYSTEM = "You are a careful coding agent."
TASK = "Rename the helper in src/cache.py and keep the tests green."


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    """A tool call whose arguments are JSON text, as providers send them."""
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def parallel_exchange() -> list[Message]:
    """One assistant message with three parallel calls, then their three results (one failed)."""
    calls = (
        call("toolu_1", "read_file", path="src/cache.py"),
        call("toolu_2", "bash", command="pytest -x tests/test_cache.py"),
        call("toolu_3", "grep", pattern="def helper", path="src"),
    )
    return [
        Message(role="assistant", content="I will look at three things at once.", tool_calls=calls),
        Message(role="tool", tool_call_id="toolu_1", content="def helper():\n    return 1\n"),
        Message(role="tool", tool_call_id="toolu_2", content="1 failed", is_error=True),
        Message(role="tool", tool_call_id="toolu_3", content="src/cache.py:1:def helper():"),
    ]


def conversation() -> list[Message]:
    return [
        Message(role="system", content=SYSTEM),
        Message(role="user", content=TASK),
        *parallel_exchange(),
        Message(role="assistant", content="The test fails because helper returns 1."),
    ]


# ---------------------------------------------------------------- OpenAI


def test_openai_round_trip_keeps_text_messages() -> None:
    msgs = [
        Message(role="system", content=SYSTEM),
        Message(role="user", content="修复缓存里的错误 (fix the cache bug)"),
        Message(role="assistant", content="On it."),
    ]

    assert messages_from_openai(messages_to_openai(msgs)) == msgs


def test_openai_round_trip_keeps_parallel_tool_calls_and_their_results() -> None:
    # OpenAI's tool message has no error flag, so this round trip uses successful results only.
    msgs = [m.model_copy(update={"is_error": False}) for m in conversation()]

    raw = messages_to_openai(msgs)

    assert messages_from_openai(raw) == msgs
    assistant = raw[2]
    assert [tc["id"] for tc in assistant["tool_calls"]] == ["toolu_1", "toolu_2", "toolu_3"]
    assert all(tc["type"] == "function" for tc in assistant["tool_calls"])
    assert [r["tool_call_id"] for r in raw[3:6]] == ["toolu_1", "toolu_2", "toolu_3"]
    assert {r["role"] for r in raw[3:6]} == {"tool"}


def test_openai_is_error_on_an_input_tool_message_is_kept() -> None:
    raw = {"role": "tool", "tool_call_id": "c9", "content": "boom", "is_error": True}

    msg = from_openai(raw)

    assert msg.is_tool_result
    assert msg.is_error


def test_openai_assistant_with_only_tool_calls_has_null_content() -> None:
    msg = Message(role="assistant", tool_calls=(call("c1", "bash", command="ls"),))

    raw = to_openai(msg)

    assert raw["content"] is None
    assert raw["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "ls"}'}
    assert from_openai(raw) == msg


def test_openai_arguments_given_as_object_become_json_text() -> None:
    raw = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "edit", "arguments": {"n": 1}}}
        ],
    }

    msg = from_openai(raw)

    assert json.loads(msg.tool_calls[0].arguments) == {"n": 1}


def test_harness9_tool_result_with_user_role_counts_as_a_tool_result() -> None:
    msg = Message(role="user", tool_call_id="call_7", content="exit 0")

    raw = to_openai(msg)

    assert msg.is_tool_result
    assert raw == {"role": "tool", "tool_call_id": "call_7", "content": "exit 0"}
    back = from_openai(raw)
    assert back.is_tool_result
    assert back.tool_call_id == "call_7"
    assert back.content == "exit 0"


def test_openai_message_without_tool_call_id_is_not_a_tool_result() -> None:
    assert not from_openai({"role": "user", "content": TASK}).is_tool_result


def test_openai_content_given_as_list_of_blocks_is_joined_as_text() -> None:
    raw = {
        "role": "user",
        "content": [
            {"type": "text", "text": "first part"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": "second part"},
        ],
    }

    assert from_openai(raw).content == "first part\nsecond part"


@pytest.mark.parametrize("role", ["developer", "critic", None])
def test_openai_unknown_role_raises_value_error_naming_it(role: str | None) -> None:
    with pytest.raises(ValueError, match=repr(role)):
        from_openai({"role": role, "content": "x"})


# ---------------------------------------------------------------- Anthropic


def test_anthropic_system_messages_go_to_the_system_string() -> None:
    msgs = [
        Message(role="system", content=SYSTEM),
        Message(role="system", content="Answer in English."),
        Message(role="user", content=TASK),
    ]

    system, raw = messages_to_anthropic(msgs)

    assert system == f"{SYSTEM}\n\nAnswer in English."
    assert all(m["role"] != "system" for m in raw)
    assert raw == [{"role": "user", "content": [{"type": "text", "text": TASK}]}]


def test_anthropic_parallel_tool_results_are_grouped_into_one_user_message() -> None:
    _system, raw = messages_to_anthropic(conversation())

    assert [m["role"] for m in raw] == ["user", "assistant", "user", "assistant"]
    uses = [b for b in raw[1]["content"] if b["type"] == "tool_use"]
    assert [b["id"] for b in uses] == ["toolu_1", "toolu_2", "toolu_3"]
    assert uses[1]["input"] == {"command": "pytest -x tests/test_cache.py"}
    results = raw[2]["content"]
    assert [b["type"] for b in results] == ["tool_result"] * 3
    assert [b["tool_use_id"] for b in results] == ["toolu_1", "toolu_2", "toolu_3"]
    assert [b.get("is_error", False) for b in results] == [False, True, False]


def test_anthropic_round_trip_keeps_parallel_tool_calls_results_and_errors() -> None:
    msgs = conversation()

    system, raw = messages_to_anthropic(msgs)
    back = messages_from_anthropic(raw, system=system)

    assert back == msgs
    assert [m.is_error for m in back if m.is_tool_result] == [False, True, False]


def test_anthropic_harness9_tool_results_are_rendered_as_tool_result_blocks() -> None:
    tc1, tc2 = call("c1", "bash", command="ls"), call("c2", "bash", command="pwd")
    msgs = [
        Message(role="user", content=TASK),
        Message(role="assistant", tool_calls=(tc1, tc2)),
        Message(role="user", tool_call_id="c1", content="README.md"),
        Message(role="user", tool_call_id="c2", content="/work", is_error=True),
    ]

    _system, raw = messages_to_anthropic(msgs)

    assert len(raw) == 3
    assert raw[2]["role"] == "user"
    assert raw[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "README.md"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "/work", "is_error": True},
    ]


def test_anthropic_tool_results_separated_by_a_user_message_are_not_merged() -> None:
    tc1, tc2 = call("c1", "bash", command="ls"), call("c2", "bash", command="pwd")
    msgs = [
        Message(role="assistant", tool_calls=(tc1,)),
        Message(role="tool", tool_call_id="c1", content="a"),
        Message(role="user", content="now the second one"),
        Message(role="assistant", tool_calls=(tc2,)),
        Message(role="tool", tool_call_id="c2", content="b"),
    ]

    _system, raw = messages_to_anthropic(msgs)

    tool_result_messages = [m for m in raw if all(b["type"] == "tool_result" for b in m["content"])]
    assert [len(m["content"]) for m in tool_result_messages] == [1, 1]


def test_anthropic_invalid_tool_arguments_are_kept_raw() -> None:
    msg = Message(role="assistant", tool_calls=(ToolCall(id="c1", name="bash", arguments="{oops"),))

    _system, raw = messages_to_anthropic([msg])

    assert raw[0]["content"] == [
        {"type": "tool_use", "id": "c1", "name": "bash", "input": {"raw_arguments": "{oops"}}
    ]


def test_anthropic_content_given_as_list_of_blocks_is_parsed() -> None:
    raw: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "x = 1"}, {"type": "text", "text": "y"}],
                    "is_error": True,
                },
                {"type": "text", "text": "Please continue."},
            ],
        },
    ]

    msgs = messages_from_anthropic(raw)

    assert msgs[0] == Message(role="user", content="part one\npart two")
    assert msgs[1].content == "Checking."
    assert msgs[1].tool_calls == (ToolCall(id="t1", name="read", arguments='{"path": "a.py"}'),)
    assert msgs[2] == Message(role="tool", tool_call_id="t1", content="x = 1\ny", is_error=True)
    assert msgs[3] == Message(role="user", content="Please continue.")


def test_anthropic_string_content_and_no_system_give_plain_messages() -> None:
    msgs = messages_from_anthropic([{"role": "user", "content": TASK}])

    assert msgs == [Message(role="user", content=TASK)]


@pytest.mark.parametrize("role", ["system", "tool", "developer"])
def test_anthropic_unknown_role_raises_value_error_naming_it(role: str) -> None:
    with pytest.raises(ValueError, match=repr(role)):
        messages_from_anthropic([{"role": role, "content": "x"}])
