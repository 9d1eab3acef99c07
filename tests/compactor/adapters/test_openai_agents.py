"""``CompactingSession`` inside real OpenAI Agents SDK runs: ``OpenAIChatCompletionsModel``
against an OpenAI-compatible server on 127.0.0.1 that the test starts (scripted replies that
call tools)."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
from agents import (
    Agent,
    ModelResponse,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    SQLiteSession,
    TResponseInputItem,
    function_tool,
)
from openai import AsyncOpenAI

from compactor import ByteEstimator, CompactorConfig, MemorySink, Message, ToolCall
from compactor.adapters.openai_agents import CompactingSession
from tests.compactor.adapters.scenario import (
    CALLS_PER_PROMPT,
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

PNG_URL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QD"
    "wADhgGAWjR9awAAAABJRU5ErkJggg=="
)

Reply = Callable[[dict[str, Any]], dict[str, Any]]


def as_messages(body: dict[str, Any]) -> list[Message]:
    """A chat-completions request body as compactor messages (the test's own reading)."""
    out: list[Message] = []
    for m in body["messages"]:
        content = m.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        calls = tuple(
            ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
            for c in m.get("tool_calls") or ()
        )
        role = {"developer": "system"}.get(m["role"], m["role"])
        out.append(
            Message(
                role=role,
                content=content or "",
                tool_calls=calls,
                tool_call_id=m.get("tool_call_id"),
            )
        )
    return out


class ChatServer:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 that answers with ``reply``
    and keeps every request body."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.reply: Reply = lambda _body: {"role": "assistant", "content": "ok"}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.received.append(body)
                message = server.reply(body)
                n = tokens(as_messages(body), ByteEstimator())
                data = json.dumps(
                    {
                        "id": f"chatcmpl-{len(server.received)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls"
                                if "tool_calls" in message
                                else "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": n,
                            "completion_tokens": 20,
                            "total_tokens": n + 20,
                        },
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def model(self) -> RecordingModel:
        client = AsyncOpenAI(base_url=self.url, api_key="test", max_retries=0)
        return RecordingModel(model="scripted", openai_client=client)


class RecordingModel(OpenAIChatCompletionsModel):
    """The SDK's chat-completions model, keeping the input items of each call."""

    inputs: list[list[TResponseInputItem]]

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        items = kwargs["input"] if "input" in kwargs else args[1]
        self.inputs = [*getattr(self, "inputs", []), copy.deepcopy(items)]
        return await super().get_response(*args, **kwargs)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    chat = ChatServer()
    thread = threading.Thread(target=chat.httpd.serve_forever, daemon=True)
    thread.start()
    yield chat
    chat.httpd.shutdown()
    chat.httpd.server_close()
    thread.join(timeout=30)


def scripted(script: Script) -> Reply:
    def reply(_body: dict[str, Any]) -> dict[str, Any]:
        step = script.next_step()
        if step is None:
            return {"role": "assistant", "content": "Every module is read."}
        call_id, args = step
        function = {"name": "read_module", "arguments": json.dumps(args)}
        call = {"id": call_id, "type": "function", "function": function}
        return {"role": "assistant", "content": "Reading the next module.", "tool_calls": [call]}

    return reply


@function_tool
def read_module(path: str, size: int) -> str:
    """Read a module of the repository.

    Args:
        path: the module's path.
        size: how many bytes to read.
    """
    return tool_output(path, size)


def make_agent(server: ChatServer) -> Agent[Any]:
    return Agent(
        name="reader", instructions="Read code.", model=server.model(), tools=[read_module]
    )


async def test_forty_turns_at_16k_keep_every_request_in_the_window_with_pairs_whole(
    tmp_path: Path, server: ChatServer
) -> None:
    home = tmp_path / "home"
    inner = SQLiteSession("agents-40")
    session = CompactingSession(inner, context_window=WINDOW, spool=home / "spool", work_dir=home)
    server.reply = scripted(Script())
    agent = make_agent(server)
    run_config = RunConfig(
        tracing_disabled=True, call_model_input_filter=session.call_model_input_filter
    )

    for i in range(PROMPTS):
        await Runner.run(agent, prompt(i), session=session, run_config=run_config, max_turns=50)
    session.close()

    compaction = session.compaction_session
    assert compaction is not None and compaction.session_id == "agents-40"
    requests = [as_messages(body) for body in server.received]
    compactions = check_run(requests, compaction.compactor.estimator, home, "agents-40")
    assert compactions == sum(1 for r in compaction.records if r.effective)
    stored = await inner.get_items()
    assert sum(item.get("type") == "function_call_output" for item in stored) == 40
    # each prompt: the user item, ten calls (text and call as one message) with their outputs,
    # the final text; the last one recorded by close()
    assert len(compaction.history) == PROMPTS * (2 + 2 * CALLS_PER_PROMPT)


async def test_without_the_filter_each_run_starts_from_the_compacted_view(
    server: ChatServer,
) -> None:
    sink = MemorySink()
    session = CompactingSession(SQLiteSession("no-filter"), context_window=WINDOW, spool=sink)
    server.reply = scripted(Script())
    agent = make_agent(server)
    starts: list[int] = []

    for i in range(PROMPTS):
        starts.append(len(server.received))
        config = RunConfig(tracing_disabled=True)
        await Runner.run(agent, prompt(i), session=session, run_config=config, max_turns=50)
    view = await session.get_items()
    session.close()

    compaction = session.compaction_session
    assert compaction is not None
    estimator = compaction.compactor.estimator
    first_requests = [as_messages(server.received[i]) for i in starts]
    assert all(tokens(r, estimator) <= WINDOW for r in first_requests)
    assert not [p for r in first_requests if (p := unpaired(r))]
    assert len(view) < len(await session.inner.get_items())
    assert effective_in(sink) > 0


def annotated_items() -> list[dict[str, Any]]:
    """Stored items that carry what compactor messages cannot: item ids, ``provider_data``."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Read the modules."}]
    for i in range(6):
        call_id = f"old_{i}"
        items.append(
            {
                "type": "function_call",
                "id": f"fc-{i}",
                "call_id": call_id,
                "name": "read_module",
                "arguments": json.dumps({"path": f"m{i}.py", "size": 20_000}),
                "provider_data": {"model": "scripted", "unknown_field": {"x": i}},
            }
        )
        items.append(
            {
                "type": "function_call_output",
                "call_id": call_id,
                "output": tool_output(f"m{i}.py", 20_000),
            }
        )
    return items


IMAGE_PROMPT: list[TResponseInputItem] = [
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What does this chart show?"},
            {"type": "input_image", "image_url": PNG_URL, "detail": "low"},
        ],
    }
]


@pytest.mark.parametrize("window", [1_000_000, WINDOW])
async def test_an_image_and_unknown_provider_data_reach_the_model_unchanged(
    window: int, server: ChatServer
) -> None:
    inner = SQLiteSession("annotated")
    history = annotated_items()
    await inner.add_items(cast("list[TResponseInputItem]", copy.deepcopy(history)))
    session = CompactingSession(inner, context_window=window, spool=MemorySink())
    agent = make_agent(server)
    model = agent.model
    assert isinstance(model, RecordingModel)
    run_config = RunConfig(
        tracing_disabled=True, call_model_input_filter=session.call_model_input_filter
    )

    await Runner.run(agent, IMAGE_PROMPT, session=session, run_config=run_config)

    (sent_items,) = model.inputs
    sent = cast("list[dict[str, Any]]", sent_items)
    compaction = session.compaction_session
    assert compaction is not None
    compacted = any(r.effective for r in compaction.records)
    assert compacted == (window == WINDOW)
    assert sent[-1] == IMAGE_PROMPT[0]  # the image part, unchanged, to the model
    (body,) = server.received
    assert body["messages"][-1]["content"][1]["image_url"]["url"] == PNG_URL  # and on the wire
    originals = {item["id"]: item for item in history if "id" in item}
    calls = [item for item in sent if item.get("type") == "function_call"]
    assert calls and all(item == originals[item["id"]] for item in calls)  # provider_data kept
    if not compacted:
        assert sent == [*history, *IMAGE_PROMPT]


async def test_a_limited_read_is_the_stored_tail_and_a_pending_pop_costs_nothing() -> None:
    inner = SQLiteSession("bookkeeping")
    session = CompactingSession(inner, context_window=WINDOW, spool=MemorySink())
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
    ]

    await session.add_items(items)
    assert await session.get_items(limit=1) == [items[1]]
    assert await session.pop_item() == items[1]
    assert await session.get_items() == [items[0]]

    compaction = session.compaction_session
    assert compaction is not None and [m.content for m in compaction.history] == ["first"]


async def test_clearing_starts_a_new_compaction_session() -> None:
    session = CompactingSession(SQLiteSession("cleared"), context_window=WINDOW, spool=MemorySink())
    await session.add_items([{"role": "user", "content": "before"}])
    assert await session.get_items() == [{"role": "user", "content": "before"}]

    await session.clear_session()
    await session.add_items([{"role": "user", "content": "after"}])

    assert await session.get_items() == [{"role": "user", "content": "after"}]
    compaction = session.compaction_session
    assert compaction is not None and compaction.session_id == "cleared-2"


async def test_an_offloaded_output_keeps_its_call_id(tmp_path: Path, server: ChatServer) -> None:
    session = CompactingSession(
        SQLiteSession("offload"),
        context_window=WINDOW,
        spool=MemorySink(),
        config=CompactorConfig(tool_offload_threshold=4000),
        work_dir=tmp_path,
    )
    server.reply = scripted(Script())
    agent = make_agent(server)
    run_config = RunConfig(
        tracing_disabled=True, call_model_input_filter=session.call_model_input_filter
    )

    await Runner.run(agent, prompt(0), session=session, run_config=run_config, max_turns=50)

    last = server.received[-1]["messages"]
    results = [m for m in last if m["role"] == "tool"]
    assert len(results) == 10
    assert all(m["content"].startswith("[offloaded: ") for m in results)
    assert not unpaired(as_messages(server.received[-1]))
