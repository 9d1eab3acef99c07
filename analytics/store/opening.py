"""Opening the store a home selected: the one place that knows both backends.

``location.store_location`` says which store a home uses (the local DuckDB file, or a DuckLake
named by ``--store``/``COMPACTLENS_STORE``); ``open_store`` opens it as an ``EventStore`` (a
``LakeStore`` for a lake, which builds on the local one), so no backend needs to know another.
"""

from __future__ import annotations

import os

from analytics.store.eventstore import EventStore
from analytics.store.lake import LakeStore
from analytics.store.location import Lake, store_location


def open_store(home: str | os.PathLike[str], *, read_only: bool = False) -> EventStore:
    """The store of ``home`` this process selected (``location.select``): the local file
    ``<home>/compactlens.duckdb`` by default, or a lake (a ``LakeStore``)."""
    where = store_location(home)
    if isinstance(where, Lake):
        return LakeStore(where, read_only=read_only)
    return EventStore(where.path, read_only=read_only)
