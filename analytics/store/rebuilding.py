"""``rebuild``: the database recreated from the spool alone, built beside the one in place.

The new database is made under a temporary name in the same folder (``files.build_path``) and
swapped in by renaming only once it is complete; only then is the old file moved aside as a
backup and are older backups pruned. A rebuild that fails, on a full disk say, deletes its
partial file and leaves the database in place and every backup as they were, so a second
failure can never prune the last good backup. It holds the database's owner lock throughout.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path

from analytics.errors import StoreError
from analytics.store import DB_NAME, EventStore, claim_parent
from analytics.store.files import (
    BACKUP_STAMP,
    OwnerLock,
    build_path,
    discard_builds,
    foreign_lock_pid,
    locked,
    move_aside,
    private_files,
    prune_backups,
    swap_in,
    unwritable,
    unwritable_reason,
)
from analytics.store.projector import IngestResult, Progress, Projector


@dataclass
class RebuildResult:
    ingest: IngestResult
    backup: Path | None
    """Where the old database file was moved (None if there was none); its write-ahead log,
    if it had one, is beside it with ``.wal`` appended."""
    backup_bytes: int = 0
    """Size of that backup (database file plus write-ahead log)."""
    pruned: list[Path] = field(default_factory=list)
    """Older backups deleted because only the newest ``keep_backups`` are kept."""


def rebuild(
    home: str | os.PathLike[str], progress: Progress | None = None, *, keep_backups: int = 1
) -> RebuildResult:
    """Recreate the database from the spool alone, whatever state the old file is in (corrupt,
    half-created, another version, a directory, read-only). The new database is built beside
    the old one and swapped in only when complete: the old file is then kept as a full backup
    and only the newest ``keep_backups`` backups are kept. A rebuild that fails (a full disk)
    leaves the database in place and every backup as they were. Refuses (StoreLockedError)
    while a live process holds the database, and StoreUnwritableError when the home itself
    cannot be written."""
    if keep_backups < 1:
        raise ValueError(
            f"keep_backups must be at least 1 (every rebuild keeps its backup), got {keep_backups}"
        )
    root = Path(home)
    db = root / DB_NAME
    with private_files():
        claim_parent(db)
        lock = OwnerLock(db, exclusive=True)  # held until the new store is in place
        try:
            pid = foreign_lock_pid(db)
            if pid is not None:
                raise locked(db, pid, "another program")
            stamp = dt.datetime.now(dt.UTC).strftime(BACKUP_STAMP)
            result = _build_beside(db, stamp, progress)
            try:
                moved = move_aside(db, stamp)
                swap_in(build_path(db, stamp), db)
                pruned = prune_backups(db, keep_backups)
            except OSError as exc:
                raise unwritable(db, unwritable_reason(db) or exc.strerror or str(exc)) from exc
        finally:
            lock.release()
    return RebuildResult(result, moved.path if moved else None, moved.bytes if moved else 0, pruned)


def _build_beside(db: Path, stamp: str, progress: Progress | None) -> IngestResult:
    """The spool projected into a new database at ``build_path(db, stamp)``; on any failure
    that file is deleted and the error says the database in place was left as it was."""
    reason = unwritable_reason(build_path(db, stamp))
    if reason is not None:
        raise unwritable(db, reason)
    discard_builds(db)  # what a killed rebuild left behind
    try:
        with EventStore(build_path(db, stamp)) as store:
            return Projector(store, db.parent / "spool").ingest(progress)
    except StoreError as exc:
        discard_builds(db)
        raise type(exc)(
            f"rebuild of {db} stopped; the database there and its backups are left as they "
            f"were: {exc}",
            str(db),
        ) from exc
    except BaseException:
        discard_builds(db)
        raise
