"""The three compactor interfaces of the seed (section 7.1), as runtime-checkable Protocols.

``ProgressiveCompactor`` implements all three; ``TokenBudgetCompactor`` the first two. Agent
harnesses type against these, not against the classes.
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
