"""``CompactionMiddleware`` inside real LangChain v1 agents (``create_agent``, LangGraph) driven
by a scripted chat model that calls tools."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import ConfigDict, Field

from compactor import ByteEstimator, CompactorConfig, MemorySink, Message, ToolCall
from compactor.adapters.langchain import CompactionMiddleware
from tests.compactor.adapters.scenario import (
    PROMPTS,
    WINDOW,
    Script,
    check_run,
    effective_in,
    prompt,
    tokens,
    tool_output,
    unpaired,
)

PNG_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QD"
    "wADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def as_messages(request: Sequence[BaseMessage]) -> list[Message]:
    """What the model received, as compactor messages (the test's own reading of it)."""
    out: list[Message] = []
    for message in request:
        text = message.content if isinstance(message.content, str) else ""
        if isinstance(message, ToolMessage):
            out.append(Message(role="tool", content=text, tool_call_id=message.tool_call_id))
        elif isinstance(message, AIMessage):
            calls = tuple(
                ToolCall(id=c["id"] or "", name=c["name"], arguments=json.dumps(c["args"]))
                for c in message.tool_calls
            )
            out.append(Message(role="assistant", content=text, tool_calls=calls))
        else:
            role = "system" if isinstance(message, SystemMessage) else "user"
            out.append(Message(role=role, content=text))
    return out


class ScriptedChatModel(BaseChatModel):
    """A chat model whose replies a function decides; it records every request it gets."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    respond: Callable[[list[BaseMessage]], AIMessage]
    received: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.received.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.respond(messages))])


def scripted(script: Script) -> Callable[[list[BaseMessage]], AIMessage]:
    def respond(messages: list[BaseMessage]) -> AIMessage:
        n = tokens(as_messages(messages), ByteEstimator())
        usage = {"input_tokens": n, "output_tokens": 20, "total_tokens": n + 20}
        step = script.next_step()
        if step is None:
            return AIMessage(content="Every module is read.", usage_metadata=usage)
        call_id, args = step
        call = {"name": "read_module", "args": args, "id": call_id, "type": "tool_call"}
        return AIMessage(
            content="Reading the next module.", tool_calls=[call], usage_metadata=usage
        )

    return respond


@tool(response_format="content_and_artifact")
def read_module(path: str, size: int) -> tuple[str, dict[str, str]]:
    """Read a module of the repository."""
    return tool_output(path, size), {"source": path}


def config(thread: str | None = None) -> RunnableConfig:
    configurable = {"thread_id": thread} if thread else {}
    return {"configurable": configurable, "recursion_limit": 200}


def test_forty_turns_at_16k_keep_every_request_in_the_window_with_pairs_whole(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    middleware = CompactionMiddleware(
        context_window=WINDOW, spool=home / "spool", session_id="langchain-40", work_dir=home
    )
    model = ScriptedChatModel(respond=scripted(Script()))
    agent = create_agent(
        model,
        tools=[read_module],
        middleware=[middleware],
        system_prompt="Read code.",
        checkpointer=InMemorySaver(),
    )

    for i in range(PROMPTS):
        agent.invoke({"messages": [HumanMessage(prompt(i))]}, config("thread-1"))
    middleware.close()

    assert set(middleware.sessions) == {"thread-1"}
    session = middleware.sessions["thread-1"]
    assert session.session_id == "langchain-40"
    requests = [as_messages(r) for r in model.received]
    compactions = check_run(requests, session.compactor.estimator, home, session.session_id)
    assert compactions == sum(1 for r in session.records if r.effective)
    state = agent.get_state(config("thread-1")).values["messages"]
    assert sum(isinstance(m, ToolMessage) for m in state) == 40  # the graph keeps everything


async def test_the_async_path_without_a_checkpointer_compacts_one_conversation() -> None:
    sink = MemorySink()
    middleware = CompactionMiddleware(context_window=WINDOW, spool=sink)
    model = ScriptedChatModel(respond=scripted(Script()))
    agent = create_agent(model, tools=[read_module], middleware=[middleware])

    messages: list[AnyMessage] = []
    for i in range(PROMPTS):
        result = await agent.ainvoke({"messages": [*messages, HumanMessage(prompt(i))]}, config())
        messages = result["messages"]
    middleware.close()

    (key,) = middleware.sessions
    assert key is None
    session = middleware.sessions[None]
    estimator = session.compactor.estimator
    assert max(tokens(as_messages(r), estimator) for r in model.received) <= WINDOW
    assert not [p for r in model.received if (p := unpaired(as_messages(r)))]
    assert len(session.history) == len(messages)  # each message once, the last reply included
    assert effective_in(sink) > 0


def annotated_history() -> list[AnyMessage]:
    """Messages that carry what compactor messages cannot: ids, provider metadata,
    ``additional_kwargs``, tool artifacts."""
    history: list[AnyMessage] = [HumanMessage("Read the modules.", id="h0")]
    for i in range(6):
        call_id = f"old_{i}"
        args = {"path": f"m{i}.py", "size": 20_000}
        history.append(
            AIMessage(
                content="Reading.",
                id=f"ai-{i}",
                tool_calls=[{"name": "read_module", "args": args, "id": call_id}],
                response_metadata={"model_name": "m", "unknown_field": {"x": i}},
                additional_kwargs={"reasoning": {"opaque": [i, "kept"]}},
            )
        )
        history.append(
            ToolMessage(
                tool_output(f"m{i}.py", 20_000),
                tool_call_id=call_id,
                name="read_module",
                id=f"tool-{i}",
                artifact={"source": f"m{i}.py"},
            )
        )
    return history


IMAGE_PROMPT = HumanMessage(
    content=[
        {"type": "text", "text": "What does this chart show?"},
        {"type": "image", "base64": PNG_B64, "mime_type": "image/png"},
    ],
    id="with-image",
    additional_kwargs={"client": {"unknown": True}},
)


@pytest.mark.parametrize("window", [1_000_000, WINDOW])
def test_an_image_block_and_unknown_metadata_reach_the_model_unchanged(window: int) -> None:
    middleware = CompactionMiddleware(context_window=window, spool=MemorySink())
    model = ScriptedChatModel(respond=lambda _m: AIMessage(content="A rising line."))
    agent = create_agent(model, tools=[read_module], middleware=[middleware])
    history = annotated_history()

    agent.invoke({"messages": [*history, IMAGE_PROMPT]}, config())

    (request,) = model.received
    session = middleware.sessions[None]
    compacted = any(r.effective for r in session.records)
    assert compacted == (window == WINDOW)
    assert request[-1] == IMAGE_PROMPT  # the image block, its id and kwargs, unchanged
    originals = {m.id: m for m in history}
    sent_ai = [m for m in request if isinstance(m, AIMessage)]
    assert sent_ai and all(m == originals[m.id] for m in sent_ai)
    if not compacted:
        assert request == [*history, IMAGE_PROMPT]


def test_an_offloaded_result_keeps_its_call_id_name_id_and_artifact(tmp_path: Path) -> None:
    middleware = CompactionMiddleware(
        context_window=WINDOW,
        spool=MemorySink(),
        config=CompactorConfig(tool_offload_threshold=4000),
        work_dir=tmp_path,
    )
    model = ScriptedChatModel(respond=scripted(Script()))
    agent = create_agent(model, tools=[read_module], middleware=[middleware])

    result = agent.invoke({"messages": [HumanMessage(prompt(0))]}, config())

    state = {m.id: m for m in result["messages"] if isinstance(m, ToolMessage)}
    sent = [m for m in model.received[-1] if isinstance(m, ToolMessage)]
    assert len(sent) == 10
    for message in sent:
        assert isinstance(message.content, str) and message.content.startswith("[offloaded: ")
        original = state[message.id]
        assert original.content != message.content  # the state keeps the whole result
        assert (message.tool_call_id, message.name) == (original.tool_call_id, "read_module")
        assert message.artifact == original.artifact == {"source": message.artifact["source"]}
