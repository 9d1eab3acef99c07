"""Which optional dependencies (pip extras) each part of analytics needs, and the one-line error
when one is missing.

``pip install compactlens`` is the library alone (pydantic and the standard library); the read
side comes with ``[suite]``, and ``[lake]``, ``[tune]`` and ``[otel]`` bring what only some
commands use. Those commands import their packages lazily, through ``require``, so that every
other command starts without them and a missing one is named with the line that installs it.
This module imports nothing outside the standard library: it runs before anything else does.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from analytics.errors import AnalyticsError

SUITE_MODULES = ("duckdb", "polars", "pyarrow", "typer", "rich", "rapidfuzz", "tomli_w", "plotly")
"""What every analytics module may import at its top: the ``[suite]`` extra."""
CLI_NAME = "compactlens"


class MissingExtraError(AnalyticsError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""

    def __init__(self, what: str, modules: list[str], extra: str) -> None:
        self.modules = modules
        self.extra = extra
        names = ", ".join(modules)
        super().__init__(
            f"{what} needs {names}, which {'is' if len(modules) == 1 else 'are'} not installed: "
            f"pip install 'compactlens[{extra}]'"
        )


def missing(modules: tuple[str, ...] | list[str]) -> list[str]:
    """The ones of ``modules`` that cannot be imported here (without importing any of them)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require(module: str, extra: str, what: str) -> ModuleType:
    """``module`` imported, or ``MissingExtraError`` naming ``extra`` (``what`` needs it)."""
    if missing([module]):
        raise MissingExtraError(what, [module], extra)
    return importlib.import_module(module)


def check_suite() -> None:
    """Raises ``MissingExtraError`` when the ``[suite]`` extra is absent; run as the
    ``compactlens`` command, says so in one line and exits 1 instead of a traceback."""
    absent = missing(SUITE_MODULES)
    if not absent:
        return
    what = "compactlens's analytics (the store, jobs, CLI and app)"
    error = MissingExtraError(what, absent, "suite")
    if Path(sys.argv[0]).name == CLI_NAME:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(1)
    raise error


check_suite()  # on import: ``analytics/__init__`` imports this module before any job or store
