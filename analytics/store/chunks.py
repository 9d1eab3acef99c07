"""One chunk of a spool file, read and validated: what the projector commits.

``parse_chunk`` reads the complete lines in about ``size`` bytes of a spool file from an offset
(more if one line is longer; a torn last line is left for the next read), opened relative to the
spool folder and checked to be the file that was planned, and validates each line into a batch
and a list of quarantined lines. A ``Part`` says where that read ended (offset, line number and
the fingerprint there); a ``Parsed`` is one commit's worth: a batch and the parts of every file
it holds. Nothing here touches the database.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from analytics.store.batch import EventBatch, QuarantinedLine, SpoolPosition
from analytics.store.lines import parse_into
from analytics.store.spoolfiles import (
    TAIL_BYTES,
    SpoolDir,
    SpoolEntry,
    SpoolSkipError,
    read_at,
    read_failure,
    tail_sha256,
)

LONG_LINE_READ = 1024 * 1024
"""The smallest read that goes on through a line longer than what is left of a chunk."""


@dataclass(frozen=True)
class Job:
    """A spool file with bytes to read, and where reading starts."""

    entry: SpoolEntry
    """As ``fstat`` saw it when the job was planned."""
    start: SpoolPosition


@dataclass
class Part:
    """What one read of a spool file covered: where it ended."""

    entry: SpoolEntry
    end: int
    """Byte offset just after the part's last complete line."""
    end_line: int
    lines_before: int
    tail_sha256: str
    """The fingerprint of ``end``."""
    bytes: int = 0


@dataclass
class Parsed:
    """One commit's worth of spool lines, read and validated, not yet committed: a chunk of
    one file, or the whole new tails of several small files (many agents' spool files each
    with a little new: one commit for all of them, not one each)."""

    batch: EventBatch
    bad: list[QuarantinedLine]
    parts: list[Part]

    @property
    def last(self) -> Part:
        return self.parts[-1]

    @property
    def bytes(self) -> int:
        return sum(part.bytes for part in self.parts)


def parse_chunk(
    spool: SpoolDir,
    job: Job,
    offset: int,
    lines: int,
    size: int,
    batch: EventBatch,
    bad: list[QuarantinedLine],
    *,
    tail: str | None = None,
) -> Part | None:
    """Read and validate the complete lines in the ``size`` bytes after ``offset`` (more
    if one line is longer) into ``batch`` and ``bad``; None: nothing complete.

    ``tail`` is the fingerprint expected at ``offset`` (that of the previous part of this
    file; by default the job's start's when reading from there): a file truncated and
    rewritten in place since it was taken is skipped, and read from its start next time."""
    lead = min(TAIL_BYTES, offset)
    if tail is None and offset == job.start.byte_offset:
        tail = job.start.tail_sha256
    fd, info = spool.open(job.entry)
    try:
        if info.st_ino != job.entry.inode:
            raise SpoolSkipError("replaced while it was being read; read again next time")
        data = read_at(fd, offset - lead, lead + size)
        before, data = data[:lead], data[lead:]
        if offset and tail is not None and tail_sha256(before) != tail:
            raise SpoolSkipError(
                "rewritten in place while it was being read; read again from its start next time"
            )
        if data and b"\n" not in data:  # one line longer than size: read on to its end
            pieces, got = [data], len(data)
            step = max(size, LONG_LINE_READ)  # a nearly spent budget must not mean tiny reads
            while b"\n" not in pieces[-1]:  # each piece scanned once, joined once
                more = read_at(fd, offset + got, step)
                if not more:
                    return None  # only a torn last line: wait for the rest
                pieces.append(more)
                got += len(more)
            data = b"".join(pieces)
            data = data[: data.index(b"\n") + 1]  # that one line: the budget is spent
    except OSError as exc:
        raise read_failure(exc) from None
    finally:
        os.close(fd)
    end = data.rfind(b"\n")
    if end < 0:
        return None
    chunk = data[: end + 1]
    tail = tail_sha256(chunk if len(chunk) >= TAIL_BYTES else before + chunk)
    part = Part(job.entry, offset + len(chunk), lines, lines, tail, len(chunk))
    source, at = job.entry.source, offset
    for raw in chunk.split(b"\n")[:-1]:
        part.end_line += 1
        if raw.strip():
            parse_into(raw, source, part.end_line, at, batch, bad)
        at += len(raw) + 1
    return part
