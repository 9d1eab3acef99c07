"""harness9 compaction-record JSONL (as the Go original's RecordStore writes it) → records.

These files hold ``CompactionRecord``s, not conversations, so this module yields records, not
sessions. Each line is validated with ``CompactionRecord.model_validate``, which accepts the Go
shapes unchanged (``tier`` an integer, ``duration`` integer nanoseconds, nanosecond timestamps,
``null`` lists). A bad line is reported with its number and skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from analytics.importers.reading import Reporter, first_error, iter_json_lines
from compactor import CompactionRecord


def iter_harness9_records(path: Path, report: Reporter) -> Iterator[CompactionRecord]:
    """Every valid record of the file, in order; every bad line reported."""
    for lineno, obj in iter_json_lines(path, report):
        try:
            yield CompactionRecord.model_validate(obj)
        except ValidationError as exc:
            report(f"not a compaction record: {first_error(exc)}; line skipped", lineno)


def looks_like_record(obj: dict[str, object]) -> bool:
    """True for a JSON object with the fields every harness9 record has."""
    return "tier" in obj and "tokens_before" in obj and "tokens_after" in obj
