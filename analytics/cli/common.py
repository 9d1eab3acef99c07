"""What every ``compactlens`` command shares: the typer app, options, the home and errors.

The typer ``app`` the commands register on, the ``--home`` and ``--window`` options, the home
check, and ``handled``: expected failures as one line on stderr and exit 1, never a traceback.
Environment variables of the command line are read here (``COMPACTLENS_HOME``) and in
``analytics.cli.main`` (LLM settings). Nothing here does any work of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from typer._click.core import Context as ClickContext
from typer._click.core import Parameter
from typer.core import TyperCommand, TyperGroup, TyperOption

from analytics.cli.inputs import MAX_WINDOW, HomeError, check_home
from analytics.cli.terminal import print_error
from analytics.errors import AnalyticsError
from analytics.store import StoreLockedError


def _flags_untyped(params: list[Parameter]) -> list[Parameter]:
    """Flags (``--watch``, ``--help``) take no value: show no ``<bool>`` type in the help."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag:
            param.metavar = ""
    return params


class Command(TyperCommand):
    def get_params(self, ctx: ClickContext) -> list[Parameter]:
        return _flags_untyped(super().get_params(ctx))


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
    """Expected failures as one line on stderr and exit 1, never a traceback."""
    try:
        yield
    except StoreLockedError as exc:
        print_error(f"database locked: {exc}")
        raise typer.Exit(1) from None
    except AnalyticsError as exc:  # the store's states, unknown sessions, bad inputs
        print_error(str(exc))
        raise typer.Exit(1) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print_error(f"{where}{exc.strerror or exc}")
        raise typer.Exit(1) from None
