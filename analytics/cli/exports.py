"""``export parquet`` and ``export otlp``: the store's tables as files, its compactions as
OpenTelemetry spans. Both only read the store (a local file may be open in another reader; a
lake may be written meanwhile)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from analytics.cli.common import Command, HomeOption, export_app, handled, resolve_home
from analytics.cli.terminal import console, err_console
from analytics.report.otlp import export_otlp
from analytics.store.lending import reading_store
from compactor import OtlpSink


def export_parquet(
    out: Annotated[str, typer.Argument(help="Folder for one .parquet file per table")],
    home: HomeOption = None,
) -> None:
    """Write every table of the store as Parquet."""
    if not out.strip():
        raise typer.BadParameter(
            f"{out!r}: name the folder to write the Parquet files to (. for this one)",
            param_hint="DIR",
        )
    out_dir = Path(out)
    root = resolve_home(home, write=False)
    with handled(), reading_store(root, "export", read_only=True) as store:
        written = store.export_parquet(out_dir)
    console.print(f"wrote {len(written)} Parquet files to {out_dir}", soft_wrap=True)


def export_otlp_command(
    endpoint: Annotated[
        str,
        typer.Option(
            "--endpoint", help="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces"
        ),
    ],
    header: Annotated[
        list[str] | None,
        typer.Option("--header", help="NAME=VALUE sent with every request (repeatable)"),
    ] = None,
    summaries: Annotated[
        bool, typer.Option("--summaries", help="add summary text of sessions captured in full")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Send every effective compaction of the store as an OpenTelemetry span."""
    headers = dict(_header(h) for h in header or [])
    root = resolve_home(home, write=False)
    try:
        sink = OtlpSink(endpoint, headers=headers, summaries=summaries)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--endpoint") from None
    with handled(), reading_store(root, "export", read_only=True) as store, _sdk_log() as said:
        sent = export_otlp(store, sink)
    delivered = sent.spans - sent.undelivered
    console.print(
        f"sent {delivered:,} compaction spans from {sent.sessions:,} sessions to {endpoint}",
        soft_wrap=True,
        highlight=False,
    )
    if sent.undelivered or sent.errors:
        err_console.print(
            f"error: {sent.undelivered:,} of {sent.spans:,} spans were not delivered to "
            f"{endpoint} and {sent.errors} other export failures: is it an OTLP/HTTP traces "
            f"endpoint that is up?{_last_cause(said)} (nothing in the store changed; run the "
            "export again)",
            soft_wrap=True,
            highlight=False,
        )
        raise typer.Exit(1)


@contextmanager
def _sdk_log() -> Iterator[list[str]]:
    """The OpenTelemetry SDK's log lines while the export runs, kept instead of printed (each
    retry is a line of its own there): the command's error line quotes the cause of the last."""
    handler = _Kept(logging.WARNING)
    sdk = logging.getLogger("opentelemetry")
    propagate = sdk.propagate
    sdk.addHandler(handler)
    sdk.propagate = False
    try:
        yield handler.said
    finally:
        sdk.removeHandler(handler)
        sdk.propagate = propagate


class _Kept(logging.Handler):
    """Keeps the messages it is handed."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.said: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record.getMessage())


_OS_ERROR = re.compile(r"\[Errno -?\d+\] [^'\")]+")


def _last_cause(said: list[str]) -> str:
    """`` Last error: ...``: the last OS error the SDK logged (such as a refused connection),
    else its last log line."""
    if not said:
        return ""
    errors = [found.group() for line in said if (found := _OS_ERROR.search(line))]
    cause = errors[-1] if errors else said[-1]
    return f" Last error: {cause[:300].rstrip('.')}."


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise typer.BadParameter(f"{text!r}: give a header as NAME=VALUE", param_hint="--header")
    return name.strip(), value.strip()


def register() -> None:
    export_app.command("parquet", cls=Command)(export_parquet)
    export_app.command("otlp", cls=Command)(export_otlp_command)
