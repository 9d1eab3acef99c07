"""Logging the failures the library fails open on: by type and code, once per kind.

A failure inside recording (a record store, an event sink, a memory extractor) is counted and
the agent goes on. What reaches the log is the exception's type and, for an ``OSError``, its
errno name: never its message, its arguments or a traceback, because any of them may hold the
agent's content (a store that quotes the record it could not write; a traceback whose chained
exception carries the whole view). The first failure of each kind is logged as a warning, later
ones only counted. Nothing here retries or decides what fails open; the callers do.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections import Counter


def describe(exc: BaseException) -> str:
    """``exc`` as its type and, for an ``OSError``, its errno name (``OSError ENOSPC``): text
    that never quotes the content an exception may carry."""
    name = type(exc).__name__
    code = exc.errno if isinstance(exc, OSError) else None
    if isinstance(code, int):
        return f"{name} {errno.errorcode.get(code, str(code))}"
    return name


class FaultLog:
    """Counts failures by kind (what failed, and ``describe(exc)``) and logs the first of each.

    ``counts`` maps each kind to how many times it happened; one instance is shared by the
    sessions of one compactor, so N failures of one kind make one warning, not N.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def report(self, what: str, exc: BaseException, *, then: str = "continuing") -> str:
        """Count one failure of ``what`` (a fixed phrase, no content) and log it if it is the
        first of its kind. Returns the kind."""
        return self.note(f"{what}: {describe(exc)}", then=then)

    def note(self, kind: str, *, then: str = "continuing") -> str:
        """Count one failure of ``kind`` (fixed text, no content); log it the first time."""
        with self._lock:
            self.counts[kind] += 1
            first = self.counts[kind] == 1
        if first:
            self.logger.warning(
                "%s; %s (logged once: later failures of this kind are only counted)", kind, then
            )
        return kind

    @property
    def total(self) -> int:
        return sum(self.counts.values())
