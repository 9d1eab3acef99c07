"""``export parquet`` and ``export otlp``: the store's tables as files, its compactions as
OpenTelemetry spans. Both only read the store (a local file may be open in another reader; a
lake may be written meanwhile). ``export otlp`` says how many spans the endpoint acknowledged
and, exiting 1, how many it did not; the endpoint is shown without its secrets
(``redact_url``)."""

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
from analytics.report.otlp import OtlpExport, export_otlp
from analytics.store import redact_url
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
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=0.1,
            max=3600,
            metavar="SECONDS",
            help="How long one request may take, retries included; after one fails, the "
            "rest are not sent",
        ),
    ] = 10.0,
    home: HomeOption = None,
) -> None:
    """Send every effective compaction of the store as an OpenTelemetry span (exit 1 unless
    the endpoint acknowledged every one)."""
    headers = dict(_header(h) for h in header or [])
    shown = redact_url(endpoint)
    root = resolve_home(home, write=False)
    try:
        sink = OtlpSink(
            endpoint, headers=headers, summaries=summaries, batch=False, timeout=timeout
        )
    except ValueError as exc:
        raise typer.BadParameter(redact_url(str(exc)), param_hint="--endpoint") from None
    with handled(), reading_store(root, "export", read_only=True) as store, _sdk_log() as said:
        sent = export_otlp(store, sink)
    console.print(
        f"sent {sent.delivered:,} compaction spans from {sent.sessions:,} sessions to {shown}",
        soft_wrap=True,
        highlight=False,
        markup=False,
    )
    if sent.skipped:
        _say_skipped(sent)
    if sent.undelivered or sent.errors:
        others = f" and {sent.errors:,} other export failures" if sent.errors else ""
        cause = _last_cause(said) or (f" Last error: {sent.last_error}." if sent.last_error else "")
        err_console.print(
            f"error: {sent.undelivered:,} of {sent.spans:,} spans were not delivered to "
            f"{shown}{others}: is it an OTLP/HTTP traces endpoint that is up?"
            f"{redact_url(cause)} (nothing in the store changed; run the export again)",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    if sent.undelivered or sent.errors or sent.skipped:
        raise typer.Exit(1)


def _say_skipped(sent: OtlpExport) -> None:
    """One line naming the sessions whose compactions were not sent for their time."""
    named = sorted(sent.skipped_sessions.items())
    shown = ", ".join(
        f"{sid!r} ({count:,}, the first at {first.isoformat()})"
        for sid, (count, first) in named[:5]
    )
    more = f" and {len(named) - 5:,} more" if len(named) > 5 else ""
    sessions = f"{len(named):,} session{'s' * (len(named) != 1)}"
    err_console.print(
        f"error: {sent.skipped:,} compactions of {sessions} were not sent: their timestamp is "
        f"outside what OTLP can carry (1970 to 2554), a clock that was wrong when they were "
        f"recorded: {shown}{more}. The other sessions' spans were sent",
        soft_wrap=True,
        highlight=False,
        markup=False,
    )


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
