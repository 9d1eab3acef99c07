"""The compactor's exception tree.

One root, ``CompactorError``; subclasses only for conditions a caller can act on. Recording and
offloading never raise into the agent loop: these exceptions surface from explicit calls
(``CompactionOffloader.offload``, ``Summarizer.summarize``) and are caught, counted and put on the
record by the compactor itself.
"""

from __future__ import annotations


class CompactorError(Exception):
    """Root of every error raised by the compactor package."""


class OffloadError(CompactorError):
    """Writing an offload file failed; the caller keeps the original content."""


class SummarizerError(CompactorError):
    """A summariser call failed, timed out, or returned text that parses to nothing."""


class ChatModelError(SummarizerError):
    """An LLM adapter failed: HTTP error, timeout, malformed body or empty completion."""


class RecordStoreError(CompactorError):
    """A record file could not be written; the compaction result is unaffected."""
