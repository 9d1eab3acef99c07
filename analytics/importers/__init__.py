"""Transcript importers: real agent logs in five formats → sessions of ``compactor.Message``s.

One module per format (``openai_chat``, ``claude_code``, ``swe_agent``, ``mini_swe_agent``,
``aider``, ``harness9_records``); ``detect_format`` judges a file by its content;
``iter_sessions``/``import_path`` stream sessions with clear issues for bad input. This package
writes nothing and emits no events (the CLI and replay do that).
"""

from analytics.errors import AnalyticsError, TranscriptError, UnknownFormatError
from analytics.importers.detect import detect_format
from analytics.importers.importing import (
    import_path,
    import_records,
    issue_of,
    iter_path,
    iter_records,
    iter_sessions,
    transcript_files,
)
from analytics.importers.session import (
    FORMATS,
    ImportedSession,
    ImportIssue,
    TranscriptFormat,
    TurnUsage,
)

__all__ = [
    "FORMATS",
    "AnalyticsError",
    "ImportIssue",
    "ImportedSession",
    "TranscriptError",
    "TranscriptFormat",
    "TurnUsage",
    "UnknownFormatError",
    "detect_format",
    "import_path",
    "import_records",
    "issue_of",
    "iter_path",
    "iter_records",
    "iter_sessions",
    "transcript_files",
]
