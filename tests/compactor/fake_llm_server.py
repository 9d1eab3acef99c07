"""A real loopback HTTP server speaking OpenAI chat completions and the Anthropic Messages API.

Tests tell it per call how to behave (a valid answer, HTTP 500, slowness, malformed bodies) and
read back every request body it received. It is not a mock of either SDK: the adapters under test
go through the real SDK over real HTTP to it. Slowness waits on an event that shutdown sets, so a
fixture teardown never waits for a slow handler.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Behaviour = Literal[
    "success", "http_500", "slow", "not_json", "html", "unexpected_json", "no_text", "blank_text"
]
OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
SLOW_S = 30.0  # far past any client timeout the tests set; teardown releases it at once
SERVER_ERROR = {"error": {"message": "model backend crashed: CUDA out of memory"}}


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]


@dataclass
class ServerState:
    behaviour: Behaviour = "success"
    text: str = "## Anchors\n### User Intent\nfix the tests"
    served_model: str = "served-model-1"
    usage: tuple[int, int] = (321, 54)
    requests: list[RecordedRequest] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


class FakeLLMServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` on 127.0.0.1, a random free port, serving in a daemon thread."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = ServerState()
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.state.release.set()
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out has closed its socket; the late write failing is expected.
        pass


def openai_body(state: ServerState, text: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant"}
    if text is not None:
        message["content"] = text
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": state.served_model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": state.usage[0],
            "completion_tokens": state.usage[1],
            "total_tokens": sum(state.usage),
        },
    }


def anthropic_body(state: ServerState, text: str | None) -> dict[str, Any]:
    # Two text blocks: the adapter must concatenate them.
    half = len(text) // 2 if text is not None else 0
    blocks = (
        [] if text is None else [{"type": "text", "text": t} for t in (text[:half], text[half:])]
    )
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": state.served_model,
        "content": blocks,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": state.usage[0], "output_tokens": state.usage[1]},
    }


class _Handler(BaseHTTPRequestHandler):
    server: FakeLLMServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        state = self.server.state
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path not in (OPENAI_PATH, ANTHROPIC_PATH):
            self._send(404, b'{"error": "no such route"}')
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        state.requests.append(RecordedRequest(self.path, headers, json.loads(raw)))
        self._respond(state)

    def _respond(self, state: ServerState) -> None:
        behaviour = state.behaviour
        if behaviour == "http_500":
            self._send(500, json.dumps(SERVER_ERROR).encode())
        elif behaviour == "not_json":
            self._send(200, b"<<< upstream proxy garbage, not JSON >>>")
        elif behaviour == "html":
            self._send(200, b"<html><body>proxy login page</body></html>", "text/html")
        elif behaviour == "unexpected_json":
            self._send(200, b'{"unexpected": true}')
        else:
            if behaviour == "slow":
                state.release.wait(SLOW_S)
            text = {"no_text": None, "blank_text": "  \n\t "}.get(behaviour, state.text)
            build = openai_body if self.path == OPENAI_PATH else anthropic_body
            self._send(200, json.dumps(build(state, text)).encode())

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass
