"""Running the ``compactlens`` command line in-process, for the tests that need its output."""

from __future__ import annotations

from typer.testing import CliRunner

from analytics.cli.main import app


def invoke_ok(*args: str) -> str:
    """``compactlens ARGS...`` in this process; its stdout, after asserting it exited 0."""
    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == 0, done.output
    return done.stdout
