"""When a long-running projector runs the store's maintenance (``EventStore.checkpoint``).

A projector that watches the spool (``ingest --watch``, the app's timer) commits on every pass
that found lines. On a lake each commit is a snapshot, with its rows inlined in the catalog or,
past ``lake.INLINE_ROWS``, a Parquet file per table: left alone, files and snapshots pile up one
per commit. ``Maintenance`` counts the commits since the store's maintenance last ran and says
when it is due again: every ``every_s`` seconds or every ``every_commits`` commits, whichever
comes first, and never while nothing was committed. ``for_store`` picks the defaults: on a lake
the periodic policy; on the local file none (DuckDB checkpoints that file when the projector
stops and on close, as before). It runs nothing by itself: the projector asks it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from analytics.store.eventstore import EventStore
from analytics.store.lake import LakeStore

MAINTAIN_EVERY_S = 300.0
"""A watching projector on a lake runs maintenance at least this often while it commits."""
MAINTAIN_EVERY_COMMITS = 200
"""... and after this many commits, if they come faster (about 200 snapshots between runs)."""


@dataclass
class Maintenance:
    """When to run the store's maintenance: ``every_s`` seconds or ``every_commits`` commits
    after the last run, whichever first (None: never on that count; both None: only when the
    projector stops)."""

    every_s: float | None = MAINTAIN_EVERY_S
    every_commits: int | None = MAINTAIN_EVERY_COMMITS
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    pending: int = 0
    """Commits since the last run."""
    runs: int = 0
    """How often it ran (periodic runs and the one at stop)."""
    seconds: float = 0.0
    """Time spent running it."""
    retry_s: float = 60.0
    """After a run that failed, the next is not due for this many seconds."""
    _since: float | None = field(default=None, repr=False)
    """``clock()`` at the first commit noted since the last run (None: none yet)."""
    _not_before: float | None = field(default=None, repr=False)
    """``clock()`` before which a run is not due, after one failed (None: no such wait)."""

    def __post_init__(self) -> None:
        if self.every_s is not None and self.every_s <= 0:
            raise ValueError(f"every_s must be positive or None, got {self.every_s}")
        if self.every_commits is not None and self.every_commits < 1:
            raise ValueError(f"every_commits must be at least 1 or None, got {self.every_commits}")
        if not self.retry_s >= 0:
            raise ValueError(f"retry_s must be zero or more, got {self.retry_s}")

    @classmethod
    def for_store(cls, store: EventStore) -> Maintenance:
        """The default policy of ``store``'s backend: periodic on a lake, at stop elsewhere."""
        return cls() if isinstance(store, LakeStore) else cls(None, None)

    @property
    def periodic(self) -> bool:
        return self.every_s is not None or self.every_commits is not None

    def note(self, commits: int) -> None:
        """``commits`` more commits were made to the store."""
        if commits and self._since is None:
            self._since = self.clock()
        self.pending += commits

    def due(self) -> bool:
        """Whether the periodic maintenance should run now."""
        if not self.pending:
            return False
        if self._not_before is not None and self.clock() < self._not_before:
            return False
        if self.every_commits is not None and self.pending >= self.every_commits:
            return True
        since = self._since
        return (
            self.every_s is not None and since is not None and self.clock() - since >= self.every_s
        )

    def run(self, store: EventStore) -> None:
        """Run the store's maintenance now (its ``StoreError`` is the caller's)."""
        started = time.perf_counter()
        store.checkpoint()
        self.ran(time.perf_counter() - started)

    def failed(self) -> None:
        """The store's maintenance just failed: not due again for ``retry_s`` seconds (the
        commits it was due for stay pending), so that a failing run is not tried on every
        pass."""
        self._not_before = self.clock() + self.retry_s

    def ran(self, seconds: float = 0.0) -> None:
        """The store's maintenance just ran (here or in an ``ingest`` that checkpointed)."""
        self.pending = 0
        self._since = None
        self._not_before = None
        self.runs += 1
        self.seconds += seconds
