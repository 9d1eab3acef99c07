"""Running the ``compactlens`` command line in-process, for the tests that need its output, and
reading a usage error whatever the width it was wrapped at."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from analytics.cli.main import app


def invoke_ok(*args: str) -> str:
    """``compactlens ARGS...`` in this process; its stdout, after asserting it exited 0."""
    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == 0, done.output
    return done.stdout


_WRAP = re.compile(r"[\s│╭╮╰╯─]+")


def unwrapped(text: str) -> str:
    """``text`` without whitespace and the borders of a usage-error panel, which wraps at the
    width of a terminal (80 columns off one) wherever a long value (a temporary path) falls:
    look for what a test expects with its whitespace removed the same way."""
    return _WRAP.sub("", text)
