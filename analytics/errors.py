"""The analytics exception tree.

One root, ``AnalyticsError``; subclasses only for conditions a caller can act on. The store raises
a ``StoreError`` subclass per state of its database file (locked, corrupt, half-created, other
version, unwritable), each with a message naming the path and the way out. Importers raise
``TranscriptError`` for a file they cannot read at all (empty, binary, invalid JSON document,
unknown format); a bad line or record inside an otherwise readable file is reported as an
``ImportIssue`` instead, and everything valid beside it is still imported.
"""

from __future__ import annotations


class AnalyticsError(Exception):
    """Root of every error raised by the analytics package."""


class TranscriptError(AnalyticsError):
    """A transcript file could not be imported; ``path``, ``line`` and ``reason`` say why."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


class UnknownFormatError(TranscriptError):
    """The file's content matches no known transcript format; pass the format explicitly."""


class StoreError(AnalyticsError):
    """The event store could not be opened or written; the spool is untouched.

    Each subclass is one state of the database file, told apart by what it is (an owner lock,
    the file's header, the meta table, the file system), never by the words of DuckDB's message.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class StoreLockedError(StoreError):
    """Another live process owns the database (DuckDB allows one writer per file)."""


class StoreCorruptError(StoreError):
    """The file is damaged or is no DuckDB database at all; ``rebuild`` recreates it."""


class StoreIncompleteError(StoreError):
    """The store's creation never finished (its meta table lacks the completion row)."""


class StoreVersionError(StoreError):
    """The database was written by another store schema or DuckDB storage version."""


class StoreUnwritableError(StoreError):
    """The database or its directory cannot be written (permissions, read-only file system,
    a file where a directory should be, a full disk)."""
