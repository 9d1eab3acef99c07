"""The compactor's exception tree.

One root, ``CompactorError``; subclasses only for conditions a caller can act on. Recording and
offloading never raise into the agent loop: these exceptions surface from explicit calls
(``CompactionOffloader.offload``, ``Summarizer.summarize``) and are caught, counted and put on the
record by the compactor itself, or from a misuse the caller must fix before the agent starts
(``CompactorInUseError``: one compactor given to two open sessions).
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


class CompactorInUseError(CompactorError, ValueError):
    """A ``CompactionSession`` was given a compactor that another session, still open, uses
    under another session id or capture; sharing it would mix their paths and summaries."""

    def __init__(self, serving: str, serving_capture: str, wanted: str, capture: str) -> None:
        super().__init__(
            f"this compactor serves session {serving!r} (capture {serving_capture!r}), which is "
            f"still open; session {wanted!r} (capture {capture!r}) needs a compactor of its own: "
            f"pass compactor.for_session({wanted!r}, capture={capture!r}), or close() session "
            f"{serving!r} first"
        )
        self.serving = serving
        self.wanted = wanted


class SessionInUseError(CompactorError, ValueError):
    """A named ``CompactionSession`` was opened on a spool where another writer holds the same
    session open (another process, or another open session object in this one): the two would
    give the same ``seq``s to different events."""

    def __init__(self, session_id: str, spool: str, holder: str) -> None:
        super().__init__(
            f"session {session_id!r} is open in {holder} writing to {spool}: two writers of one "
            "session give the same seqs to different events; close() the other one first (or "
            "let it exit), or use another session_id"
        )
        self.session_id = session_id


class ResumeMismatchError(CompactorError, ValueError):
    """``resume=`` holds fewer messages than the event sink already recorded for the session:
    new messages would take indices the store holds for other content."""
