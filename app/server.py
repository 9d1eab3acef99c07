"""The app's server process: ``python -m app.server run app/main.py [flags] -- --home DIR``.

It opens the store and starts the projector (``app.owner.shared_owner``) as Streamlit starts
to serve, so the spool is projected from start-up whether or not a browser ever opens a page
(Streamlit runs ``app/main.py`` only per browser session). Then it hands its arguments to
Streamlit's own command line, and when the server stops it closes the store. A store owned by
another process is one line on stderr, and the pages say the same. The owner's log
(``compactlens.app``) goes to stderr. Nothing here renders a page.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

from streamlit.web import cli as streamlit_cli

from analytics import StoreError, select
from app.owner import LOG, home_from, release_all, shared_owner, store_from

OPEN_WAIT_S = 5.0
"""At exit, how long to wait for the store's first opening before closing what is open."""


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("compactlens: %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


def _open_store(home: Path) -> None:
    try:
        owner = shared_owner(home)
    except StoreError as exc:  # the pages say so too, and try again on each new session
        LOG.warning("%s", exc)
        return
    except OSError as exc:  # an unwritable or vanished home: the pages try again
        LOG.warning("cannot open the store of %s: %s", home, exc.strerror or exc)
        return
    where = owner.store.location()
    LOG.info("store %s open (%s); projecting its spool every %g s", home, where, owner.interval_s)


def main(argv: list[str] | None = None) -> None:
    """Open the store of the ``--home`` after ``--`` (in a thread: the server answers while a
    large spool is first projected), then run ``streamlit <argv>``; close the store at exit."""
    args = sys.argv[1:] if argv is None else argv
    script_args = args[args.index("--") + 1 :] if "--" in args else []
    home = home_from(script_args, os.environ).resolve()
    select(store_from(script_args, os.environ))  # every page opens the same store
    _log_to_stderr()
    opener = threading.Thread(
        target=_open_store, args=(home,), name="compactlens-open-store", daemon=True
    )
    opener.start()
    sys.argv = ["streamlit", *args]
    try:
        streamlit_cli.main(prog_name="streamlit")
    finally:
        opener.join(OPEN_WAIT_S)  # a first projection still running is committed in steps
        release_all()


if __name__ == "__main__":
    main()
