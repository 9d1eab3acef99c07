"""The compactor's interfaces as runtime-checkable Protocols.

The seed's three (section 7.1): ``ProgressiveCompactor`` implements all three,
``TokenBudgetCompactor`` the first two; agent harnesses type against these, not the classes.
And the two collaborators a ProgressiveCompactor accepts: a memory extractor and a todo injector.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from compactor.messages import Message
from compactor.records import CompactionRecord


@runtime_checkable
class Compactor(Protocol):
    def compact(self, msgs: Sequence[Message]) -> list[Message]: ...


@runtime_checkable
class ForceCompactor(Compactor, Protocol):
    def compact_force(self, msgs: Sequence[Message]) -> list[Message]: ...


@runtime_checkable
class RecordedCompactor(Compactor, Protocol):
    def compact_with_record(
        self, msgs: Sequence[Message]
    ) -> tuple[list[Message], CompactionRecord]: ...


@runtime_checkable
class MemoryExtractor(Protocol):
    """Long-term memory extraction over the messages about to be summarised (fail-open)."""

    def extract(self, messages: list[Message]) -> None: ...


@runtime_checkable
class TodoInjector(Protocol):
    """Returns the active task list rendered as text (``[>] doing``, ``[ ] todo``)."""

    def active_tasks(self) -> str: ...
