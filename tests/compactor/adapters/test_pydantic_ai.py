"""``CompactionProcessor`` inside real pydantic-ai agents driven by ``FunctionModel``."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic_ai import Agent, BinaryContent, ToolReturn
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from compactor import ByteEstimator, CompactorConfig, MemorySink, Message, ToolCall
from compactor.adapters.pydantic_ai import CompactionProcessor
from tests.compactor.adapters.scenario import (
    PROMPTS,
    WINDOW,
    Script,
    check_run,
    effective_in,
    prompt,
    tokens,
    tool_output,
)

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def as_messages(request: list[ModelMessage]) -> list[Message]:
    """What the model received, as compactor messages (the test's own reading of it)."""
    out: list[Message] = []
    for message in request:
        if isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = tuple(
                ToolCall(id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_json_str())
                for p in message.parts
                if isinstance(p, ToolCallPart)
            )
            out.append(Message(role="assistant", content=text, tool_calls=calls))
            continue
        texts: list[str] = []
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                content = part.model_response_str()
                out.append(Message(role="tool", content=content, tool_call_id=part.tool_call_id))
            elif isinstance(part, UserPromptPart | SystemPromptPart):
                texts += [part.content] if isinstance(part.content, str) else []
        if texts:
            out.append(Message(role="user", content="\n".join(texts)))
    return out


Responder = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def scripted_model(script: Script, received: list[list[ModelMessage]]) -> Responder:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        usage = RequestUsage(
            input_tokens=tokens(as_messages(messages), ByteEstimator()), output_tokens=20
        )
        step = script.next_step()
        if step is None:
            return ModelResponse(parts=[TextPart("Every module is read.")], usage=usage)
        call_id, args = step
        text, call = (
            TextPart("Reading the next module."),
            ToolCallPart("read_module", args, call_id),
        )
        return ModelResponse(parts=[text, call], usage=usage)

    return respond


def make_agent(
    processor: CompactionProcessor,
    respond: Responder,
    *,
    as_capability: bool = False,
) -> Agent[None, str]:
    capability: AbstractCapability[None] = (
        processor.capability() if as_capability else ProcessHistory(processor)
    )
    agent = Agent(FunctionModel(respond), capabilities=[capability], system_prompt="Read code.")

    @agent.tool_plain
    def read_module(path: str, size: int) -> ToolReturn:
        """Read a module of the repository."""
        return ToolReturn(return_value=tool_output(path, size), metadata={"source": path})

    return agent


async def run_prompts(agent: Agent[None, str]) -> list[ModelMessage]:
    history: list[ModelMessage] | None = None
    for i in range(PROMPTS):
        result = await agent.run(prompt(i), message_history=history)
        history = result.all_messages()
    assert history is not None
    return history


async def test_forty_turns_at_16k_keep_every_request_in_the_window_with_pairs_whole(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    processor = CompactionProcessor(
        context_window=WINDOW, spool=home / "spool", session_id="pydantic-ai-40", work_dir=home
    )
    received: list[list[ModelMessage]] = []
    agent = make_agent(processor, scripted_model(Script(), received))

    await run_prompts(agent)
    processor.close()

    (session,) = processor.sessions.values()
    assert session.session_id == "pydantic-ai-40"
    requests = [as_messages(r) for r in received]
    compactions = check_run(requests, session.compactor.estimator, home, session.session_id)
    assert compactions == sum(1 for r in session.records if r.effective)


async def test_the_capability_compacts_requests_and_leaves_the_run_history_whole() -> None:
    sink = MemorySink()
    processor = CompactionProcessor(context_window=WINDOW, spool=sink, session_id="capability")
    received: list[list[ModelMessage]] = []
    agent = make_agent(processor, scripted_model(Script(), received), as_capability=True)

    history = await run_prompts(agent)
    processor.close()

    (session,) = processor.sessions.values()
    estimator = session.compactor.estimator
    assert max(tokens(as_messages(r), estimator) for r in received) <= WINDOW
    results = [p for m in history if isinstance(m, ModelRequest) for p in m.parts]
    assert sum(isinstance(p, ToolReturnPart) for p in results) == 40  # nothing cut from history
    assert len(session.history) == len(as_messages(history)) + 1  # + the system prompt's own
    assert effective_in(sink) > 0
    assert len(sink.of_type("usage_reported")) == len(received)  # each response, at once


def annotated_history() -> list[ModelMessage]:
    """A conversation whose messages carry what compactor messages cannot: an image, thinking
    with a signature, provider details, tool-return metadata."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("Read code."), UserPromptPart("Read the modules.")])
    ]
    for i in range(6):
        call_id = f"old_{i}"
        history.append(
            ModelResponse(
                parts=[
                    ThinkingPart("which module next", signature=f"sig-{i}", provider_name="x"),
                    TextPart("Reading.", provider_details={"vendor": {"opaque": [i, "kept"]}}),
                    ToolCallPart("read_module", {"path": f"m{i}.py", "size": 20_000}, call_id),
                ],
                provider_details={"request_id": f"req-{i}", "unknown_field": {"x": i}},
                provider_response_id=f"resp-{i}",
            )
        )
        result = ToolReturnPart(
            "read_module",
            tool_output(f"m{i}.py", 20_000),
            tool_call_id=call_id,
            metadata={"source": f"m{i}.py", "vendor": {"opaque": i}},
        )
        history.append(ModelRequest(parts=[result]))
    return history


IMAGE_PROMPT: list[UserContent] = [
    "What does this chart show?",
    BinaryContent(PNG, media_type="image/png"),
]


@pytest.mark.parametrize("window", [1_000_000, WINDOW])
def test_an_image_and_unknown_provider_metadata_reach_the_model_unchanged(window: int) -> None:
    processor = CompactionProcessor(context_window=window, spool=MemorySink(), session_id="img")
    received: list[list[ModelMessage]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        return ModelResponse(parts=[TextPart("A rising line.")])

    agent = make_agent(processor, respond)
    history = annotated_history()

    agent.run_sync(IMAGE_PROMPT, message_history=history)

    (request,) = received
    (session,) = processor.sessions.values()
    compacted = any(r.effective for r in session.records)
    assert compacted == (window == WINDOW)
    prompt_part = request[-1].parts[-1]
    assert isinstance(prompt_part, UserPromptPart)
    assert prompt_part.content == IMAGE_PROMPT  # the image bytes and media type, unchanged
    sent = {m.provider_response_id: m for m in request if isinstance(m, ModelResponse)}
    for original in history:
        if isinstance(original, ModelResponse) and original.provider_response_id in sent:
            assert sent[original.provider_response_id] == original  # thinking, details, ids
    if not compacted:  # pydantic-ai merges the new prompt into the history's last request
        assert request[: len(history) - 1] == history[:-1]
        assert request[len(history) - 1].parts[0] == history[-1].parts[0]
    else:
        assert len(sent) >= 1  # the tail's responses, whole


def test_an_offloaded_result_keeps_its_call_id_tool_name_and_metadata(tmp_path: Path) -> None:
    config = CompactorConfig(tool_offload_threshold=4000)
    processor = CompactionProcessor(
        context_window=WINDOW, spool=MemorySink(), config=config, work_dir=tmp_path
    )
    received: list[list[ModelMessage]] = []
    script = Script()
    agent = make_agent(processor, scripted_model(script, received))

    agent.run_sync(prompt(0))

    last = received[-1]
    results = [p for m in last if isinstance(m, ModelRequest) for p in m.parts]
    offloaded = [p for p in results if isinstance(p, ToolReturnPart)]
    assert len(offloaded) == 10
    for part in offloaded:
        assert isinstance(part.content, str) and part.content.startswith("[offloaded: ")
        assert part.tool_name == "read_module"
        assert part.metadata == {"source": f"src/module_{int(part.tool_call_id[5:])}.py"}
    files = sorted((tmp_path / ".compactlens" / "tool_results").rglob("*.txt"))
    assert [f.stem for f in files] == sorted(p.tool_call_id for p in offloaded)


def test_each_conversation_gets_its_own_session() -> None:
    processor = CompactionProcessor(context_window=WINDOW, spool=MemorySink(), session_id="base")

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")])

    agent = make_agent(processor, respond)
    first = agent.run_sync("one", conversation_id="conv-a")
    agent.run_sync("two", conversation_id="conv-b")
    agent.run_sync("one again", message_history=first.all_messages())

    sessions = processor.sessions
    assert set(sessions) == {"conv-a", "conv-b"}
    assert sessions["conv-a"].session_id == "base"
    assert sessions["conv-b"].session_id == "base:conv-b"
    users = [m.content for m in sessions["conv-a"].history if m.role == "user"]
    assert users == ["one", "one again"]
