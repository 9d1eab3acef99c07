"""The app process owns the store: one read-write ``EventStore``, a projector on a timer.

SPEC 6: agents only append to the spool; the app server is the one process that opens the DuckDB
file, and it projects the spool itself, on start and every ``interval_s`` seconds, in a daemon
thread. A DuckDB connection is not safe to share between threads, so the projector and every
page read take the same lock. ``version`` grows by one each time the stored data changed (an
ingest added events, or a job was run on request); pages key their caches on it and the
refresher reruns a page when it moves. ``shared_owner`` keeps one owner per home and process:
the server (``app.server``) opens it at start-up, before any browser connects, and every page
reuses it. Each ingest that stored events, and each new failure, is logged on
``compactlens.app``. What the command line gave the app (``--home``, ``--store``,
``--lake-data``, ``--allow-path``) is read here. On a lake the owner is one writer of many: it
holds no lock, so the command line reads and writes the same lake while the app runs; its
projector runs the lake's maintenance (``Projector.maintain``: flush, merge, expire) every few
minutes or few hundred commits while it commits, and once at close. Nothing here renders
anything or computes a figure.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from analytics import (
    EventStore,
    Job,
    Projector,
    Selection,
    StoreError,
    StoreLender,
    event_count,
    lend_store,
    open_store,
    redact_url,
    refresh_jobs,
)

T = TypeVar("T")
LOG = logging.getLogger("compactlens.app")

INGEST_INTERVAL_S = 1.5
"""How often the spool is projected: spooled events show within this plus one page refresh."""


def _flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """Every value of ``flag VALUE`` or ``flag=VALUE`` in ``argv``, in order."""
    args, out = list(argv), []
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            out.append(args[i + 1])
        elif arg.startswith(f"{flag}="):
            out.append(arg.split("=", 1)[1])
    return out


def home_from(argv: Sequence[str], environ: dict[str, str] | os._Environ[str]) -> Path:
    """``--home DIR`` after ``streamlit run app/main.py --``, else ``$COMPACTLENS_HOME``, else
    ``./data`` (the same default as the command line)."""
    given = _flag_values(argv, "--home")
    return Path(given[0] if given else environ.get("COMPACTLENS_HOME") or "data").expanduser()


def store_from(argv: Sequence[str], environ: dict[str, str] | os._Environ[str]) -> Selection:
    """``--store URL`` and ``--lake-data DIR`` after ``--``, else ``$COMPACTLENS_STORE`` and
    ``$COMPACTLENS_LAKE_DATA`` (which ``compactlens ui`` hands its server), else the defaults:
    the home's local file."""
    store, data = _flag_values(argv, "--store"), _flag_values(argv, "--lake-data")
    url = store[0] if store else environ.get("COMPACTLENS_STORE") or None
    folder = data[0] if data else environ.get("COMPACTLENS_LAKE_DATA") or None
    return Selection(url, Path(folder).expanduser() if folder else None)


def current_home() -> Path:
    return home_from(sys.argv[1:], os.environ).resolve()


def allowed_roots(argv: Sequence[str] | None = None) -> list[Path]:
    """The folders the tuning form may read transcripts from: the home, then each
    ``--allow-path DIR`` the app was started with (``compactlens ui --allow-path``)."""
    args = sys.argv[1:] if argv is None else argv
    extra = [Path(p).expanduser().resolve() for p in _flag_values(args, "--allow-path")]
    return [home_from(args, os.environ).resolve(), *extra]


@dataclass
class StoreOwner:
    """The open store of one home, its projector thread and what the last ingest did."""

    home: Path
    store: EventStore
    interval_s: float = INGEST_INTERVAL_S
    version: int = 0
    events: int = -1
    last_error: str | None = None
    ingested_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    projector: Projector | None = None
    """One projector for the owner's life: its maintenance counts commits across ticks."""
    lender: StoreLender | None = None
    """Lends a local store to reading commands (``compactlens stats`` while the app runs)."""

    @classmethod
    def open(cls, home: Path, *, interval_s: float = INGEST_INTERVAL_S) -> StoreOwner:
        """Open the store read-write (``StoreLockedError`` when another process owns it), ingest
        once, and start the projector thread."""
        home.mkdir(parents=True, exist_ok=True)
        owner = cls(home, open_store(home), interval_s)
        owner.ingest()
        owner.thread = threading.Thread(
            target=owner._run, name="compactlens-projector", daemon=True
        )
        owner.thread.start()
        owner.lender = lend_store(owner.store, owner.lock, owner._release, owner._reopen)
        return owner

    def _release(self) -> None:
        self.store.close()

    def _reopen(self) -> None:
        """After a loan: the store again, and pages re-read (the borrower may have refreshed
        job tables)."""
        self.store = open_store(self.home)
        self.projector = None
        self.version += 1

    def read(self, query: Callable[[EventStore], T]) -> T:
        """Run ``query`` on the store under the lock shared with the projector."""
        with self.lock:
            return query(self.store)

    def ingest(self) -> None:
        """Project what agents spooled since the last time; refresh the job tables if anything
        new arrived. A failure is kept for the pages to show, never raised into the thread."""
        try:
            with self.lock:
                projector = self._projector()
                projector.ingest(checkpoint=False)
                if projector.maintain():
                    LOG.info("ran the store's maintenance on %s", self.store.location())
                count = event_count(self.store)
                if count != self.events:
                    refresh_jobs(self.store)
                    if count > max(self.events, 0):
                        LOG.info(
                            "projected %s new events from %s (store: %s events)",
                            f"{count - max(self.events, 0):,}",
                            self.home / "spool",
                            f"{count:,}",
                        )
                    self.events = count
                    self.version += 1
            self.last_error = None
        except Exception as exc:  # a daemon thread must not die: the pages show the error
            # every visitor of a page sees this, and the log may be shared: no password
            error = redact_url(f"projecting the spool failed: {exc}")
            if error != self.last_error:  # once per failure, not every tick
                LOG.warning("%s", error)
            self.last_error = error
        self.ingested_at = time.time()

    def _projector(self) -> Projector:
        if self.projector is None:
            self.projector = Projector(self.store, self.home / "spool")
        return self.projector

    def run_jobs(self, jobs: Sequence[Job]) -> None:
        """Bring extra materialised jobs (the counterfactual replays) up to date, on request. A
        store that fails meanwhile is kept in ``last_error`` for the pages to show, as the
        projector's failures are."""
        with self.lock:
            try:
                refresh_jobs(self.store, jobs)
            except StoreError as exc:
                self.last_error = redact_url(f"computing {len(jobs)} jobs failed: {exc}")
                LOG.warning("%s", self.last_error)
                return
            self.version += 1

    def _run(self) -> None:
        while not self.stop.wait(self.interval_s):
            self.ingest()

    def close(self) -> None:
        self.stop.set()
        if self.lender is not None:
            self.lender.close()
        if self.thread is not None:
            self.thread.join(timeout=10)
        with self.lock:
            try:
                self._projector().maintain(stopping=True)
            except Exception as exc:  # closing goes on: the next maintenance catches up
                LOG.warning("the store's maintenance at close failed: %s", redact_url(str(exc)))
            finally:
                self.store.close()


_OWNERS: dict[Path, StoreOwner] = {}
_OWNERS_LOCK = threading.Lock()


def shared_owner(home: Path) -> StoreOwner:
    """This process's owner of ``home``'s store, opened on first use (``StoreLockedError``
    when another process owns it: the next call tries again)."""
    home = Path(home).resolve()
    with _OWNERS_LOCK:
        found = _OWNERS.get(home)
        if found is None or found.stop.is_set():
            found = _OWNERS[home] = StoreOwner.open(home)
        return found


def release_owner(owner: StoreOwner) -> None:
    """Close ``owner`` and forget it (the next ``shared_owner`` of its home opens afresh)."""
    with _OWNERS_LOCK:
        if _OWNERS.get(owner.home.resolve()) is owner:
            del _OWNERS[owner.home.resolve()]
    owner.close()


def release_all() -> None:
    """Close every owner of this process (the server's last act: the store is checkpointed
    and its lock released before the process ends)."""
    with _OWNERS_LOCK:
        owners = list(_OWNERS.values())
    for owner in owners:
        release_owner(owner)
