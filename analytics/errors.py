"""The analytics exception tree.

One root, ``AnalyticsError``; subclasses only for conditions a caller can act on. Importers raise
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
