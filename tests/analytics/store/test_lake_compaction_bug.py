"""DuckLake's merge of adjacent files can fail with an INTERNAL error while other hosts commit
("DuckLakeCompaction - expected a single output file", DuckLake issues 525 and 1025; a fresh-
clone CI run saw one of three hosts ingesting into a fresh lake exit 1 on it). The merge is all
or nothing, so the maintenance runs again on a new connection before it is reported.

The fault is injected at the statement: a real lake on a real PostgreSQL whose CHECKPOINT
statement raises DuckDB's own ``InternalException`` with that message the first N times."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from analytics.errors import StoreError
from analytics.store.lake import COMPACTION_BUG_RETRIES, LakeStore
from analytics.store.projector import Projector
from tests.analytics.spool_helpers import usage_lines, write_lines
from tests.analytics.store.conftest import Backend

pytestmark = pytest.mark.e2e

BUG = (
    "INTERNAL Error: Failed to perform CHECKPOINT; in DuckLake:  DuckLakeCompaction - expected "
    "a single output file for 18446744073709551615 rows"
)


class FlakyCheckpoint(LakeStore):
    """A lake whose first ``failures`` CHECKPOINT statements fail as DuckLake's bug does."""

    failures = 0
    checkpoints = 0

    def _run_step(self, sql: str) -> None:
        if sql.startswith("CHECKPOINT"):
            type(self).checkpoints += 1
            if type(self).checkpoints <= type(self).failures:
                raise duckdb.InternalException(BUG)
        super()._run_step(sql)


def _store(lake: Backend, failures: int) -> FlakyCheckpoint:
    FlakyCheckpoint.failures, FlakyCheckpoint.checkpoints = failures, 0
    where = lake.lake
    assert where is not None
    return FlakyCheckpoint(where)


def test_a_merge_that_hits_the_bug_is_run_again_and_the_events_stay(
    lake: Backend, tmp_path: Path
) -> None:
    write_lines(tmp_path / "spool" / "agent.jsonl", usage_lines("s", 30))
    with _store(lake, failures=2) as store:
        result = Projector(store, tmp_path / "spool").ingest()  # its maintenance at the end
        assert result.new_events == 30 and result.maintained == 1
        assert FlakyCheckpoint.checkpoints == 3  # two failures, then the merge ran
        assert store.counts()["events"] == 30  # the new connection sees every event


def test_a_bug_that_lasts_is_reported_after_the_retries_with_the_events_stored(
    lake: Backend, tmp_path: Path
) -> None:
    write_lines(tmp_path / "spool" / "agent.jsonl", usage_lines("s", 30))
    with _store(lake, failures=COMPACTION_BUG_RETRIES + 1) as store:
        with pytest.raises(StoreError) as raised:
            Projector(store, tmp_path / "spool").ingest()
        assert FlakyCheckpoint.checkpoints == COMPACTION_BUG_RETRIES + 1
        said = str(raised.value)
        assert "expected a single output file" in said and "30 new events" in said, said
    assert lake.lake is not None
    with LakeStore(lake.lake, read_only=True) as reader:
        assert reader.counts()["events"] == 30
