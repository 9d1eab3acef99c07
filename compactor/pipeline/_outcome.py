"""CompactionOutcome: a compaction's view and record with provenance.

Provenance (which input each view message came from, which inputs were summarised) is what lets
the session map a compaction back to history indices and lets analytics rebuild a before/after
diff. Pure data; nothing here compacts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from compactor.messages import Message
from compactor.pipeline.offload import is_offloaded
from compactor.records import CompactionRecord

Status = Literal["kept", "offloaded", "changed", "summarized", "dropped"]


@dataclass
class CompactionOutcome:
    """A compaction's result with provenance, so that a before/after diff can be rebuilt."""

    view: list[Message]
    record: CompactionRecord
    sources: list[int | None]
    """For each view message, its position in the input; None for synthetic messages."""
    inputs: list[Message]
    summarized_positions: set[int] = field(default_factory=set)

    def status_of_inputs(self) -> list[Status]:
        """What happened to each input message: kept, offloaded, changed, summarized, dropped."""
        out: list[Status] = ["dropped"] * len(self.inputs)
        for i in self.summarized_positions:
            out[i] = "summarized"
        for msg, src in zip(self.view, self.sources, strict=True):
            if src is None:
                continue
            orig = self.inputs[src]
            if msg is orig or msg == orig:
                out[src] = "kept"
            elif is_offloaded(msg.content) and not is_offloaded(orig.content):
                out[src] = "offloaded"
            else:
                out[src] = "changed"
        return out

    @property
    def synthetic(self) -> list[Message]:
        return [m for m, s in zip(self.view, self.sources, strict=True) if s is None]
