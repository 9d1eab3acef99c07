"""A lake that cannot be opened says the real cause (issue 28, item 3).

Every failure to open a lake used to end in "Check that PostgreSQL is running there", even a
collision in PostgreSQL's catalog between two hosts creating the lake at once, and a reader
of a lake nobody made yet. The advice now follows what PostgreSQL or DuckLake said; a lost
conflict with another writer is run again rather than reported (``commits.conflicted``).
"""

from __future__ import annotations

import duckdb
import pytest

from analytics.errors import StoreError
from analytics.store import Lake
from analytics.store.commits import conflicted
from analytics.store.lake import LakeStore, _attach_advice
from tests.analytics.store.conftest import Backend

CATALOG_CONFLICT = (
    'Failed to initialize DuckLake: Failed to execute query "CREATE TABLE '
    '"public"."ducklake_metadata"(...)": ERROR:  duplicate key value violates unique '
    'constraint "pg_type_typname_nsp_index"'
)
SERIALIZATION = (
    "Failed to perform CHECKPOINT; in DuckLake:  Failed to delete flushed inlined data in "
    'DuckLake from table ducklake_inlined_data_8_1: Failed to execute query "DELETE FROM '
    '"public".ducklake_inlined_data_8_1 WHERE ctid IN (\'(0,2)\')": ERROR:  could not '
    "serialize access due to concurrent update"
)
REFUSED = (
    'IO Error: Unable to connect to Postgres at "dbname=x host=127.0.0.1 port=1": connection '
    'to server at "127.0.0.1", port 1 failed: Connection refused'
)


@pytest.mark.parametrize(
    ("said", "advice"),
    [
        (REFUSED, "PostgreSQL did not answer: check that it is running there"),
        ('FATAL:  password authentication failed for user "u"', "refused the login"),
        ('FATAL:  database "nope" does not exist', "Create that database first"),
        (
            'Existing DuckLake at metadata catalog "postgres:dbname=x" does not exist - and '
            "creating a new DuckLake is explicitly disabled",
            "No lake has been made in that database yet",
        ),
        (CATALOG_CONFLICT, "Fix that and try again"),
    ],
)
def test_the_advice_for_a_lake_that_did_not_open_follows_its_cause(said: str, advice: str) -> None:
    given = _attach_advice(said)
    assert advice in given
    assert ("running" in given) == (said == REFUSED)


@pytest.mark.parametrize(
    ("message", "lost"),
    [
        (CATALOG_CONFLICT, True),
        (SERIALIZATION, True),
        ("ERROR:  deadlock detected", True),
        (REFUSED, False),
        ('IO Error: Could not write file "x.parquet": No space left on device', False),
        ('duplicate key value violates unique constraint "ducklake_snapshot_pkey"', True),
        ('duplicate key value violates unique constraint "users_pkey"', False),
    ],
)
def test_only_a_conflict_lost_to_another_writer_is_run_again(message: str, lost: bool) -> None:
    assert conflicted(duckdb.Error(message)) is lost
    assert conflicted(duckdb.TransactionException("Transaction conflict"))


def test_reading_a_lake_nobody_made_says_so_not_that_postgresql_is_down(lake: Backend) -> None:
    where = lake.lake
    assert where is not None
    with pytest.raises(StoreError) as caught:
        LakeStore(Lake(where.conninfo, where.data_path), read_only=True)
    message = str(caught.value)
    assert "No lake has been made in that database yet" in message, message
    assert "running" not in message
