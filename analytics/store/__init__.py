"""The store: the only users of duckdb in analytics.

The event store and its schema (``eventstore``, ``schema``, ``sql``), what a bad file is
(``diagnosis``, ``files``), batch commits (``batch``, ``commits``), the projector that loads the
spool (``projector``: which spool files may be read in ``spoolfiles``, one line in ``lines``),
``rebuilding`` (a new database built beside the old one), materialised job tables (``results``)
and exports (``export``). Two backends (``location`` says which, ``opening`` opens it): the
local DuckDB file, one owner at a time, and a DuckLake on PostgreSQL (``lake``, its SQL derived
in ``lake_sql``), many writers and readers. Above it, ``analytics.queries`` reads and nothing
else opens a connection.
"""

from analytics.errors import (
    StoreCorruptError,
    StoreError,
    StoreIncompleteError,
    StoreLockedError,
    StoreUnwritableError,
    StoreVersionError,
)
from analytics.store.batch import EventBatch, QuarantinedLine, SpoolPosition
from analytics.store.diagnosis import storage_version
from analytics.store.eventstore import EventStore
from analytics.store.files import claim_parent
from analytics.store.lake import LakeStore
from analytics.store.location import (
    Lake,
    LocalFile,
    Selection,
    redact_url,
    select,
    selected,
    store_exists,
    store_location,
)
from analytics.store.opening import open_store
from analytics.store.schema import DB_NAME, STORE_SCHEMA_VERSION
from analytics.store.sql import PROJECTIONS, TABLES

__all__ = [
    "DB_NAME",
    "PROJECTIONS",
    "STORE_SCHEMA_VERSION",
    "TABLES",
    "EventBatch",
    "EventStore",
    "Lake",
    "LakeStore",
    "LocalFile",
    "QuarantinedLine",
    "Selection",
    "SpoolPosition",
    "StoreCorruptError",
    "StoreError",
    "StoreIncompleteError",
    "StoreLockedError",
    "StoreUnwritableError",
    "StoreVersionError",
    "claim_parent",
    "open_store",
    "redact_url",
    "select",
    "selected",
    "storage_version",
    "store_exists",
    "store_location",
]
