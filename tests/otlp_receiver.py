"""A loopback OTLP/HTTP traces endpoint for tests: it counts the spans it accepted, and can be
slow or hang.

``OtlpReceiver(answer=K, delay_s=D)``: each of the first ``K`` requests (all when ``answer`` is
None) is read, its spans counted and answered 200 after ``D`` seconds; every later request is
accepted and held, unread and unanswered, until ``release()`` — a collector that takes the
connection and never replies. Released, held requests are dropped unanswered, or with
``answer_held=True`` answered 200 (uncounted, so that a client still waiting finishes at once).
``spans`` counts only what was answered 200 before the release: exactly what a client could have
been told was delivered. The context manager's exit releases and stops the server. Nothing here
is mocked: a real ``ThreadingHTTPServer`` on 127.0.0.1 decodes the protobuf requests the
official exporter sends.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


class OtlpReceiver:
    """See the module docstring. ``received``: requests whose headers arrived (held or not);
    ``answered``: requests answered 200; ``spans``: the spans of those; ``span_list``: them."""

    def __init__(self, *, answer: int | None = None, delay_s: float = 0.0) -> None:
        self.answer = answer
        self.delay_s = delay_s
        self.received = 0
        self.answered = 0
        self.span_list: list[Any] = []
        self.released = threading.Event()
        self.answer_held = False
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                with receiver._lock:
                    receiver.received += 1
                    held = receiver.answer is not None and receiver.received > receiver.answer
                    receiver._cond.notify_all()
                if held:
                    receiver.released.wait()
                    if not receiver.answer_held:
                        self.close_connection = True
                        return  # never answered: the client gave up, or the test ended
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                spans = [
                    span
                    for resource in request.resource_spans
                    for scope in resource.scope_spans
                    for span in scope.spans
                ]
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)  # a slow collector, not a wait on a condition
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                self.wfile.flush()
                with receiver._lock:
                    if not receiver.released.is_set():
                        receiver.answered += 1
                        receiver.span_list.extend(spans)
                    receiver._cond.notify_all()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/v1/traces"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def spans(self) -> int:
        with self._lock:
            return len(self.span_list)

    def wait_received(self, n: int, timeout_s: float = 60.0) -> bool:
        """Wait until ``n`` requests arrived (held ones included); whether they did."""
        with self._cond:
            return self._cond.wait_for(lambda: self.received >= n, timeout_s)

    def release(self, *, answer_held: bool = False) -> None:
        """Let held requests go: dropped unanswered, or answered 200 with ``answer_held``."""
        self.answer_held = answer_held
        self.released.set()

    def stop(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
