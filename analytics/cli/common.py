"""What every ``compactlens`` command shares: the typer app, options, the home and errors.

The typer ``app`` the commands register on, the ``--home`` and ``--window`` options, the store
selection every command takes (``--store URL``, ``--lake-data DIR``: added to each command by
``Command`` and made this process's store before the command runs), the home check, and
``handled``: expected failures as one line on stderr and exit 1, never a traceback, and no
secret of a store URL in any of them; ``json_text``: a command's ``--json`` document, JSON even
where a figure is not finite.
Environment variables of the command line are read here (``COMPACTLENS_HOME``,
``COMPACTLENS_STORE``, ``COMPACTLENS_LAKE_DATA``) and in ``analytics.cli.main`` (LLM settings).
Nothing here does any work of its own.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click.core import Context as ClickContext
from typer._click.core import Parameter
from typer.core import TyperCommand, TyperGroup, TyperOption

from analytics.cli.inputs import MAX_WINDOW, HomeError, check_home
from analytics.cli.terminal import print_error, print_note
from analytics.errors import AnalyticsError
from analytics.store import (
    Selection,
    StoreError,
    StoreLockedError,
    redact_url,
    select,
    selected,
    store_location,
)


def _flags_untyped(params: list[Parameter]) -> list[Parameter]:
    """Flags (``--watch``, ``--help``) take no value: show no ``<bool>`` type in the help."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag:
            param.metavar = ""
    return params


STORE_ENV = "COMPACTLENS_STORE"
LAKE_DATA_ENV = "COMPACTLENS_LAKE_DATA"


StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="URL",
        help="The store: a DuckDB file, or 'ducklake:postgres:<libpq conninfo>' for a lake "
        f"many hosts share. Default: ${STORE_ENV}, else <home>/compactlens.duckdb",
    ),
]
LakeDataOption = Annotated[
    Path | None,
    typer.Option(
        "--lake-data",
        metavar="DIR",
        file_okay=False,
        help=f"A lake's Parquet folder. Default: ${LAKE_DATA_ENV}, else <home>/lake",
    ),
]


@functools.cache
def _store_options() -> tuple[Parameter, ...]:
    """The two options as typer builds them (from a function that only declares them)."""
    probe = typer.Typer(add_completion=False)

    @probe.command()
    def declared(store: StoreOption = None, lake_data: LakeDataOption = None) -> None:
        """Only declares the options."""

    return tuple(typer.main.get_command(probe).params)


def store_selection(store: str | None, lake_data: Path | None) -> Selection:
    """``--store``/``--lake-data``, else their environment variables; a store URL this
    release cannot open (a SQLite catalog, a lake with no database) is a usage error."""
    env_data = os.environ.get(LAKE_DATA_ENV)
    selection = Selection(
        store if store is not None else os.environ.get(STORE_ENV) or None,
        lake_data if lake_data is not None else Path(env_data) if env_data else None,
    )
    try:
        store_location(Path("."), selection)
    except StoreError as exc:
        raise typer.BadParameter(str(exc), param_hint="--store") from None
    return selection


class Command(TyperCommand):
    """A command with the store options; they select the store before the command runs."""

    def get_params(self, ctx: ClickContext) -> list[Parameter]:
        return _flags_untyped([*super().get_params(ctx), *_store_options()])

    def invoke(self, ctx: ClickContext) -> object:
        chosen = store_selection(ctx.params.pop("store", None), ctx.params.pop("lake_data", None))
        # the command's choice holds while it runs, then what was before comes back: a program
        # (or a test) that runs several commands in one process gets no store it did not ask for
        before = selected(), {name: os.environ.get(name) for name in (STORE_ENV, LAKE_DATA_ENV)}
        select(chosen)
        if chosen.store:  # what the command starts (the app server) opens the same store
            os.environ[STORE_ENV] = chosen.store
        if chosen.lake_data is not None:
            os.environ[LAKE_DATA_ENV] = str(chosen.lake_data.resolve())
        try:
            return super().invoke(ctx)
        finally:
            select(before[0])
            for name, value in before[1].items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


class Group(TyperGroup):
    def get_params(self, ctx: ClickContext) -> list[Parameter]:
        return _flags_untyped(super().get_params(ctx))


app = typer.Typer(add_completion=False, no_args_is_help=True, cls=Group)
export_app = typer.Typer(no_args_is_help=True, help="Write the store's tables to files.", cls=Group)
app.add_typer(export_app, name="export")


HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        help="Data folder (spool, DuckDB, offload files). Default: $COMPACTLENS_HOME, else ./data",
    ),
]


PortOption = Annotated[int, typer.Option("--port", min=0, max=65535, help="0: any free port")]

WindowOption = Annotated[
    int,
    typer.Option(
        "--window", min=1, max=MAX_WINDOW, help="Context window in tokens (1 to 100,000,000)"
    ),
]


PriceProfileOption = Annotated[
    str | None,
    typer.Option(
        "--price-profile",
        help="anthropic, openai, deepseek, none, or a TOML profile file (default: each "
        "session's profile from its model name)",
    ),
]


def resolve_home(home: Path | None, *, write: bool = True) -> Path:
    """``--home``, else ``$COMPACTLENS_HOME``, else ``./data``; exit 1 with one line when it is
    a file, under a file, or (for commands that write) not writable."""
    env = os.environ.get("COMPACTLENS_HOME")
    root = home if home is not None else Path(env) if env else Path("data")
    try:
        check_home(root, write=write)
    except HomeError as exc:
        print_error(str(exc))
        raise typer.Exit(1) from None
    return root


@contextmanager
def handled() -> Iterator[None]:
    """Expected failures as one line on stderr and exit 1, never a traceback. Any secret of a
    store URL they quote is hidden (``redact_url``); so is any other failure's: one that quotes
    a secret (a database error naming its connection string) is one line too, since its
    traceback would print it."""
    try:
        yield
    except StoreLockedError as exc:
        print_error(redact_url(f"database locked: {exc}"))
        raise typer.Exit(1) from None
    except AnalyticsError as exc:  # the store's states, unknown sessions, bad inputs
        print_error(redact_url(str(exc)))
        raise typer.Exit(1) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print_error(redact_url(f"{where}{exc.strerror or exc}"))
        raise typer.Exit(1) from None
    except Exception as exc:
        if not _quotes_a_secret(exc):
            raise  # a bug: its traceback is wanted
        print_error(redact_url(f"{type(exc).__name__}: {exc}"))
        raise typer.Exit(1) from None


def _quotes_a_secret(exc: BaseException) -> bool:
    """Whether ``exc`` or any exception it was raised from or during says a secret."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        if redact_url(str(found)) != str(found):
            return True
        found = found.__cause__ or found.__context__
    return False


def shown(found: dict[str, Any], as_json: bool, table: Callable[[dict[str, Any]], None]) -> None:
    """A command's answer: one JSON document on stdout with ``--json``, else its table."""
    if as_json:
        typer.echo(json_text(found))
    else:
        table(found)


def json_text(payload: Any) -> str:
    """``payload`` as one JSON document. A figure that is not finite (a cost that overflowed,
    a ratio of two infinities) has no JSON form (``Infinity`` and ``NaN`` are not JSON, and
    strict parsers refuse them): it is written as ``null``, and a note on stderr says how many
    were."""
    replaced = [0]

    def finite(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            replaced[0] += 1
            return None
        if isinstance(value, dict):
            return {key: finite(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [finite(item) for item in value]
        return value

    text = json.dumps(finite(payload), default=str, ensure_ascii=False, allow_nan=False)
    if replaced[0]:
        print_note(
            f"{replaced[0]:,} figures were not finite (a price or count too large to compute "
            "with) and are written as null"
        )
    return text
