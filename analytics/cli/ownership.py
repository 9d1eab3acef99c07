"""The watcher's hold on a home's store: owned between imports when nobody else owns it.

``compactlens watch`` owns the store as ``ingest --watch`` would when it is free: it projects
what other processes spool, and lends the store to reading commands (``analytics.store.lending``)
so that ``stats`` answers while it runs. During an import it sets the store aside for
``run_import``, which opens, updates and closes it, and takes it again afterwards. When another
process owns the store (the app), the hold stays empty and says so once; readers that hold the
store for a moment are waited for. Nothing here imports or follows a file.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from analytics.errors import StoreError, StoreLockedError
from analytics.store import EventStore, open_store
from analytics.store.lending import StoreLender, lend_store
from analytics.store.projector import IngestResult, Projector

Say = Callable[[str], None]
READER_WAIT_S = 2.0
"""How long a pass waits for commands reading the store (they hold it for a moment) to let go."""
OWNER_NAMED = "held by PID"
"""In the refusal of a store another process owns (readers are not named): not waited for."""


class StoreHold:
    """The watcher's hold on the home's store: open between imports when nobody else owns
    it, its projector, and the lender that hands it to reading commands for a moment.

    ``lock`` is held by the watcher's pass and by every loan, so a loan waits for the pass."""

    def __init__(self, home: Path, say: Say) -> None:
        self.home = home
        self.say = say
        self.lock = threading.Lock()
        self.store: EventStore | None = None
        self.projector: Projector | None = None
        self.lender: StoreLender | None = None
        self._socket_inode = 0
        self._refused = ""
        self._announced = False

    @property
    def owned(self) -> bool:
        return self.store is not None

    def take(self) -> bool:
        """Own the store if nobody else does (said when that changes). Readers that hold it
        for a moment (no owner named) are waited for, up to ``READER_WAIT_S``."""
        if self.store is not None:
            return True
        deadline = time.monotonic() + READER_WAIT_S
        while True:
            try:
                self.store = open_store(self.home)
                break
            except StoreLockedError as exc:
                if OWNER_NAMED in str(exc) or time.monotonic() > deadline:
                    return self._refuse(exc)
                time.sleep(0.05)
            except StoreError as exc:
                return self._refuse(exc)
        if self.lender is None:
            self.lender = lend_store(self.store, self.lock, self._close, self._reopen)
            if self.lender is not None:
                self._socket_inode = os.stat(self.lender.path).st_ino
        if self._refused or not self._announced:
            self.say(
                f"projecting into {self.store.location()} (lent to reading commands meanwhile)"
            )
        self._refused, self._announced = "", True
        return True

    def _refuse(self, exc: StoreError) -> bool:
        if str(exc) != self._refused:
            self._refused = str(exc)
            self.say(
                f"not projecting: {exc}; imports go to the spool for the store's owner to project"
            )
        self._retire_lender()
        return False

    def _close(self) -> None:
        store, self.store, self.projector = self.store, None, None
        if store is not None:
            store.close()

    def _reopen(self) -> None:
        """After a loan; a store another process took meanwhile stays its own."""
        with contextlib.suppress(StoreError):
            self.store = open_store(self.home)

    @contextlib.contextmanager
    def set_aside(self) -> Iterator[None]:
        """The store closed for the duration (``run_import`` opens it), then taken again."""
        held = self.owned
        self._close()
        try:
            yield
        finally:
            if held:
                self.take()

    def project(self) -> IngestResult | None:
        """Project what the spool gained (None when the store is not ours)."""
        if self.store is None:
            return None
        if self.projector is None:
            self.projector = Projector(self.store, self.home / "spool")
        return self.projector.ingest(checkpoint=False)

    def _retire_lender(self) -> None:
        """Stop lending; the socket is left alone if a new owner has put its own there."""
        lender, self.lender = self.lender, None
        if lender is None:
            return
        with contextlib.suppress(OSError):
            if os.stat(lender.path).st_ino != self._socket_inode:
                lender.path = lender.path.with_name(lender.path.name + ".not-ours")
        lender.close()

    def close(self) -> None:
        self._retire_lender()
        with self.lock:
            if self.projector is not None and self.store is not None:
                self.projector.maintain(stopping=True)
            self._close()
