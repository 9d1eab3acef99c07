"""``compactlens export otlp``: the spans a loopback OTLP/HTTP receiver gets equal the store's
effective compactions, each with its attributes; no content leaves a metadata session.

The receiver is a real HTTP server on 127.0.0.1 that decodes the protobuf requests the official
exporter sends; the truth is read from the store's raw events with SQL, not from the export.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.store import open_store
from compactor import SpoolSink
from tests.analytics.spool_helpers import ingest, run_session


class Receiver:
    """An OTLP/HTTP traces endpoint that keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        spans = self.spans

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        spans.extend(scope.spans)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.server.shutdown()


def _value(attr: Any) -> object:
    field = attr.value.WhichOneof("value")
    return getattr(attr.value, field)


def _effective_from_events(home: Path) -> dict[str, dict[str, Any]]:
    with open_store(home, read_only=True) as store:
        rows = store.query(
            """SELECT session_id, CAST(payload->'record' AS VARCHAR) AS record FROM events
               WHERE type = 'compaction_recorded'
                 AND session_id NOT IN (SELECT session_id FROM events
                                        WHERE type = 'session_deleted')"""
        )
    out = {}
    for sid, text in rows.iter_rows():
        record = json.loads(text)
        if record["tier"] > 0 and record.get("effective", True):
            out[record["id"]] = {"session_id": sid, **record}
    return out


def test_the_spans_received_are_the_stores_effective_compactions(
    tmp_path: Path, receiver: Receiver
) -> None:
    home = tmp_path / "home"
    sink = SpoolSink(home / "spool")
    for seed in (3, 4):
        run_session(home, sink, seed)
    run_session(home, sink, 5, capture="metadata")
    run_session(home, sink, 6, delete=True)
    sink.close()
    ingest(home)

    done = CliRunner().invoke(
        app, ["export", "otlp", "--endpoint", receiver.url, "--home", str(home)]
    )

    assert done.exit_code == 0, done.output
    truth = _effective_from_events(home)
    got = {}
    for span in receiver.spans:
        attrs = {a.key: _value(a) for a in span.attributes}
        got[str(attrs["compactlens.compaction_id"])] = attrs
        assert span.name == "compaction"
    assert truth and set(got) == set(truth)  # the deleted session's compactions are not sent
    for cid, attrs in got.items():
        record = truth[cid]
        assert attrs["gen_ai.conversation.id"] == record["session_id"]
        assert attrs["gen_ai.conversation.compacted"] is True
        assert attrs["compactlens.tokens_before"] == record["tokens_before"]
        assert attrs["compactlens.tokens_after"] == record["tokens_after"]
        assert attrs["compactlens.summarized"] == record["summarized"]
        assert attrs["compactlens.offloaded"] == len(record["offloaded"])
        assert attrs["compactlens.emergency"] is (record["tier"] == 4)
        assert "compactlens.summary" not in attrs
    sent = f"sent {len(truth):,} compaction spans from 3 sessions"
    assert sent in done.output


def test_an_endpoint_that_refuses_is_a_clear_failure_not_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 3)
    sink.close()
    ingest(home)
    done = CliRunner().invoke(
        app, ["export", "otlp", "--endpoint", "http://127.0.0.1:9/v1/traces", "--home", str(home)]
    )
    assert done.exit_code == 1, done.output
    assert "Traceback" not in done.output
    assert "spans were not delivered to http://127.0.0.1:9/v1/traces" in done.output
    assert "Last error: [Errno 111] Connection refused." in done.output  # the cause, once
    assert "Transient error" not in done.output and "retrying" not in done.output


def test_an_endpoint_that_is_not_a_url_is_a_usage_error_before_anything_is_read(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    done = CliRunner().invoke(
        app, ["export", "otlp", "--endpoint", "not a url", "--home", str(home)]
    )
    assert done.exit_code == 2, done.output
    said = " ".join(done.output.replace("│", " ").split())
    assert "'not a url' is not an http(s) URL" in said and "Traceback" not in said
    assert not home.exists(), "a refused export opens no store"
