"""The LLM adapters against real loopback HTTP servers, through the real SDKs.

No SDK is mocked: ``FakeLLMServer`` speaks the OpenAI and Anthropic wire formats on 127.0.0.1 and
records what it received. Covered: success (text, usage, model), the request wire format, every
failure kind ending in ``ChatModelError`` with its cause, async calls, injected clients, the lazy
SDK import, and the ProgressiveCompactor's fallback when the summariser's model fails.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Literal

import pytest

from compactor.errors import ChatModelError
from compactor.llm import AnthropicChatModel, OpenAIChatModel
from compactor.messages import Message, ToolCall
from compactor.pipeline.progressive import ProgressiveCompactor
from compactor.records import CompactionTier
from compactor.summaries.summarize import LLMSummarizer, TokenUsage
from compactor.tokens import estimate_tokens
from tests.compactor.fake_llm_server import (
    ANTHROPIC_PATH,
    OPENAI_PATH,
    Behaviour,
    FakeLLMServer,
)

pytestmark = pytest.mark.e2e  # HTTP servers on 127.0.0.1

Flavour = Literal["openai", "anthropic"]
Adapter = OpenAIChatModel | AnthropicChatModel
TIMEOUT_S = 1.0  # generous for a loaded machine; the "slow" server answers far later
_ENV = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_CUSTOM_HEADERS",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_CUSTOM_HEADERS",
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    srv = FakeLLMServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(params=["openai", "anthropic"])
def flavour(request: pytest.FixtureRequest) -> Flavour:
    value: Flavour = request.param
    return value


def make_model(flavour: Flavour, url: str) -> Adapter:
    """An adapter of ``flavour`` pointed at the server ``url``, with the short test timeout."""
    if flavour == "openai":
        return OpenAIChatModel("gpt-test", base_url=f"{url}/v1", timeout_s=TIMEOUT_S)
    return AnthropicChatModel(
        "claude-test", base_url=url, api_key="sk-ant-test", timeout_s=TIMEOUT_S
    )


def ask() -> list[Message]:
    return [Message(role="system", content="Be brief."), Message(role="user", content="Summarise.")]


def agent_exchange() -> list[Message]:
    """System, task, a parallel tool call with a role-tool and a harness9 role-user result."""
    calls = (
        ToolCall(id="call_1", name="read_file", arguments='{"path": "a.py"}'),
        ToolCall(id="call_2", name="grep", arguments='{"pattern": "TODO"}'),
    )
    return [
        Message(role="system", content="You are a coding agent."),
        Message(role="user", content="Fix the failing test."),
        Message(role="assistant", content="Let me look.", tool_calls=calls),
        Message(role="tool", tool_call_id="call_1", name="read_file", content="x = 1"),
        Message(role="user", tool_call_id="call_2", content="no matches", is_error=True),
        Message(role="user", content="Now summarise."),
    ]


# ---------------------------------------------------------------- success and wire format


def test_complete_returns_text_usage_and_served_model(
    server: FakeLLMServer, flavour: Flavour
) -> None:
    with make_model(flavour, server.url) as model:
        completion = model.complete(ask())
    assert completion.text == server.state.text
    assert completion.usage == TokenUsage(input_tokens=321, output_tokens=54)
    assert completion.model == "served-model-1"


def test_openai_request_maps_roles_tool_calls_and_tool_results(server: FakeLLMServer) -> None:
    with OpenAIChatModel("gpt-test", base_url=f"{server.url}/v1", max_tokens=512) as model:
        model.complete(agent_exchange())
    (req,) = server.state.requests
    assert req.path == OPENAI_PATH
    assert req.headers["authorization"] == "Bearer not-needed"
    assert (req.body["model"], req.body["temperature"], req.body["max_tokens"]) == (
        "gpt-test",
        0.0,
        512,
    )
    wire = req.body["messages"]
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert wire[2]["content"] == "Let me look."
    assert wire[2]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "grep", "arguments": '{"pattern": "TODO"}'},
        },
    ]
    assert (wire[3]["tool_call_id"], wire[3]["content"]) == ("call_1", "x = 1")
    assert (wire[4]["tool_call_id"], wire[4]["content"]) == ("call_2", "no matches")


def test_openai_sends_the_environment_api_key_and_omits_unset_options(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with OpenAIChatModel("gpt-test", base_url=f"{server.url}/v1", temperature=None) as model:
        model.complete(ask())
    (req,) = server.state.requests
    assert req.headers["authorization"] == "Bearer sk-from-env"
    assert "temperature" not in req.body
    assert "max_tokens" not in req.body


def test_anthropic_request_puts_system_apart_and_groups_tool_results(
    server: FakeLLMServer,
) -> None:
    with AnthropicChatModel("claude-test", base_url=server.url, api_key="sk-ant-test") as model:
        model.complete(agent_exchange())
    (req,) = server.state.requests
    assert req.path == ANTHROPIC_PATH
    # SDK versions differ: x-api-key (older) or a bearer Authorization header (2.x).
    bearer = req.headers.get("authorization", "").removeprefix("Bearer ")
    assert "sk-ant-test" in (req.headers.get("x-api-key"), bearer)
    assert "anthropic-version" in req.headers
    body = req.body
    assert (body["model"], body["max_tokens"], body["system"]) == (
        "claude-test",
        4096,
        "You are a coding agent.",
    )
    wire = body["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "user", "user"]
    assert wire[1]["content"] == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.py"}},
        {"type": "tool_use", "id": "call_2", "name": "grep", "input": {"pattern": "TODO"}},
    ]
    assert wire[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "x = 1"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "no matches", "is_error": True},
    ]


def test_anthropic_omits_system_when_there_is_none(server: FakeLLMServer) -> None:
    with AnthropicChatModel("claude-test", base_url=server.url, api_key="k") as model:
        model.complete([Message(role="user", content="hi")])
    assert "system" not in server.state.requests[0].body


def test_garbage_text_is_returned_unjudged(server: FakeLLMServer, flavour: Flavour) -> None:
    rng = random.Random(7)
    server.state.text = "".join(rng.choice("qzx#@!~ 9f\u16a0\u16a2") for _ in range(300))
    with make_model(flavour, server.url) as model:
        assert model.complete(ask()).text == server.state.text


# ---------------------------------------------------------------- failures


FAILURE_CAUSES: dict[Behaviour, list[str]] = {
    "http_500": ["HTTP 500", "CUDA out of memory"],
    "slow": [f"timed out after {TIMEOUT_S:g}s"],
    "not_json": ["malformed response", "not JSON", "upstream proxy garbage"],
    "html": ["malformed response", "not JSON", "text/html", "proxy login page"],
    "unexpected_json": ["malformed response", "not a", "unexpected"],
    "no_text": ["no text"],
    "blank_text": ["empty"],
}


@pytest.mark.parametrize("behaviour", list(FAILURE_CAUSES))
def test_failure_raises_chat_model_error_naming_adapter_model_endpoint_and_cause(
    server: FakeLLMServer, flavour: Flavour, behaviour: Behaviour
) -> None:
    server.state.behaviour = behaviour
    with make_model(flavour, server.url) as model, pytest.raises(ChatModelError) as info:
        model.complete(ask())
    message = str(info.value)
    assert type(model).__name__ in message
    assert repr(model.model) in message
    assert server.url in message
    for fragment in FAILURE_CAUSES[behaviour]:
        assert fragment in message


def test_max_retries_retries_server_errors_and_says_so(server: FakeLLMServer) -> None:
    server.state.behaviour = "http_500"
    url = f"{server.url}/v1"
    model = OpenAIChatModel("gpt-test", base_url=url, max_retries=1)
    with model, pytest.raises(ChatModelError, match="on the last of 2 attempts"):
        model.complete(ask())
    assert len(server.state.requests) == 2


def test_connection_refused_raises_chat_model_error(flavour: Flavour) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with make_model(flavour, url) as model, pytest.raises(ChatModelError) as info:
        model.complete(ask())
    assert "connection error" in str(info.value)
    assert "check that the server is running" in str(info.value)


def test_missing_sdk_raises_chat_model_error_with_install_hint(
    flavour: Flavour, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, flavour, None)
    with pytest.raises(ChatModelError, match=r"pip install 'compactlens\[llm\]'"):
        make_model(flavour, "http://127.0.0.1:9")


def test_importing_compactor_and_llm_imports_no_sdk() -> None:
    code = (
        "import sys, compactor, compactor.llm\n"
        "loaded = [m for m in ('openai', 'anthropic', 'httpx', 'httpx2') if m in sys.modules]\n"
        "print(', '.join(loaded))\n"
        "sys.exit(1 if loaded else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"imported at import time: {done.stdout}{done.stderr}"


# ---------------------------------------------------------------- async and injected clients


async def test_acomplete_returns_text_usage_and_model(
    server: FakeLLMServer, flavour: Flavour
) -> None:
    async with make_model(flavour, server.url) as model:
        completion = await model.acomplete(agent_exchange())
    assert completion.text == server.state.text
    assert completion.usage == TokenUsage(input_tokens=321, output_tokens=54)
    assert completion.model == "served-model-1"
    assert len(server.state.requests) == 1


async def test_one_adapter_builds_a_sync_and_an_async_client_as_needed(
    server: FakeLLMServer, flavour: Flavour
) -> None:
    async with make_model(flavour, server.url) as model:
        model.complete(ask())
        await model.acomplete(ask())
    first, second = server.state.requests
    # The SDKs label each request with the client kind that sent it.
    assert first.headers.get("x-stainless-async") == "false"
    assert second.headers.get("x-stainless-async") not in (None, "false")


@pytest.mark.parametrize("behaviour", ["http_500", "slow", "not_json", "unexpected_json"])
async def test_acomplete_failure_raises_chat_model_error_with_cause(
    server: FakeLLMServer, flavour: Flavour, behaviour: Behaviour
) -> None:
    server.state.behaviour = behaviour
    async with make_model(flavour, server.url) as model:
        with pytest.raises(ChatModelError) as info:
            await model.acomplete(ask())
    assert FAILURE_CAUSES[behaviour][0] in str(info.value)


async def test_injected_async_client_serves_acomplete_and_refuses_complete(
    server: FakeLLMServer,
) -> None:
    import openai

    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="k", max_retries=0)
    try:
        model = OpenAIChatModel("gpt-test", client=client)
        assert (await model.acomplete(ask())).text == server.state.text
        with pytest.raises(ChatModelError, match="only an async client"):
            model.complete(ask())
    finally:
        await client.close()


async def test_injected_sync_client_serves_acomplete_in_a_thread(server: FakeLLMServer) -> None:
    import anthropic

    with anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) as client:
        model = AnthropicChatModel("claude-test", client=client)
        assert (await model.acomplete(ask())).text == server.state.text
        assert model.complete(ask()).text == server.state.text
        model.close()  # the caller's client stays open
        assert model.complete(ask()).model == "served-model-1"


# ---------------------------------------------------------------- through the ProgressiveCompactor


def long_conversation(exchanges: int = 30) -> list[Message]:
    msgs = [
        Message(role="system", content="You are a coding agent."),
        Message(role="user", content="Make the test suite of repo acme pass."),
    ]
    for i in range(exchanges):
        call = ToolCall(
            id=f"call_{i}", name="read_file", arguments=json.dumps({"path": f"m{i}.py"})
        )
        msgs.append(Message(role="assistant", content=f"Reading m{i}.py.", tool_calls=(call,)))
        body = f"# module {i}\n" + "value = compute(1, 2)\n" * 46
        msgs.append(Message(role="tool", tool_call_id=call.id, name="read_file", content=body))
    return msgs


def full_tier_compactor(model: Adapter, msgs: list[Message]) -> ProgressiveCompactor:
    compactor = ProgressiveCompactor(LLMSummarizer(model), int(estimate_tokens(msgs) / 0.85))
    assert compactor.determine_tier(msgs) == CompactionTier.FULL
    return compactor


@pytest.mark.parametrize("behaviour", ["http_500", "slow", "unexpected_json"])
def test_model_failure_ends_in_fallback_with_cause_on_record(
    server: FakeLLMServer, behaviour: Behaviour
) -> None:
    server.state.behaviour = behaviour
    msgs = long_conversation()
    with OpenAIChatModel("gpt-test", base_url=f"{server.url}/v1", timeout_s=TIMEOUT_S) as model:
        view, record = full_tier_compactor(model, msgs).compact_with_record(msgs)
    assert record.error.startswith("LLM summary failed in TierFull")
    assert "ChatModelError" in record.error
    for fragment in FAILURE_CAUSES[behaviour]:
        assert fragment in record.error
    assert estimate_tokens(view) < estimate_tokens(msgs)
    assert view[0] == msgs[0]


async def test_async_model_failure_ends_in_fallback_with_cause_on_record(
    server: FakeLLMServer, flavour: Flavour
) -> None:
    server.state.behaviour = "http_500"
    msgs = long_conversation()
    async with make_model(flavour, server.url) as model:
        view, record = await full_tier_compactor(model, msgs).acompact_with_record(msgs)
    assert record.error.startswith("LLM summary failed in TierFull")
    assert "CUDA out of memory" in record.error
    assert estimate_tokens(view) < estimate_tokens(msgs)


def test_garbage_summary_is_judged_by_the_compactor_and_falls_back(
    server: FakeLLMServer,
) -> None:
    server.state.text = "zq#@ 9f ~~ !! no anchors here ~~"
    msgs = long_conversation()
    with OpenAIChatModel("gpt-test", base_url=f"{server.url}/v1") as model:
        view, record = full_tier_compactor(model, msgs).compact_with_record(msgs)
    assert record.error.startswith("LLM summary failed in TierFull")
    assert "N/A" in record.error
    assert estimate_tokens(view) < estimate_tokens(msgs)
