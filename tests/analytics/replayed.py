"""Replays of every dev transcript at a window, made once per run and shared by every worker.

Several test modules ask questions of the same replays (``stats`` against plain SQL, the
post-mortems against the transcripts' own usage, the cache model against reported reads).
``DevReplays.home`` replays through the real command line the first time a window is asked for
(``tests.builds``: built once for all workers, kept while the code and the transcripts are
unchanged) and hands each worker its own copy: callers may run the analysis commands on it
(they materialise job results into its database), never add events to it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from analytics.cli.main import app
from tests.builds import BuildCache, source_key
from tests.transcripts import DEV


def _replay(window: int) -> Callable[[Path], None]:
    def build(home: Path) -> None:
        done = CliRunner().invoke(
            app, ["replay", *map(str, DEV), "--window", str(window), "--home", str(home)]
        )
        assert done.exit_code == 0, done.output

    return build


@dataclass
class DevReplays:
    """This worker's homes holding ``replay <dev set> --window WINDOW``, one per window."""

    builds: BuildCache

    def home(self, window: int) -> Path:
        """The worker's copy, shared by every caller in the worker."""
        return self.builds.copy(f"dev-{window}", _key(window), _replay(window))

    def fresh_home(self, window: int) -> Path:
        """A copy for the caller alone, as the replay left it (no job has run on it)."""
        return self.builds.new_copy(f"dev-{window}", _key(window), _replay(window))


@functools.cache  # hashing the code and stat-ing the transcripts once per window and worker
def _key(window: int) -> str:
    return source_key("dev replay", window, inputs=DEV, code=[Path(__file__)])
