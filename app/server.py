"""The app's server process: ``python -m app.server run app/main.py [flags] -- --home DIR``.

It opens the store and starts the projector (``app.owner.shared_owner``) before Streamlit
serves, so the spool is projected from start-up whether or not a browser ever opens a page
(Streamlit runs ``app/main.py`` only per browser session). Then it hands its arguments to
Streamlit's own command line, and when the server stops it closes the store. A store owned by
another process is one line on stderr, and the pages say the same. The owner's log
(``compactlens.app``) goes to stderr. Nothing here renders a page.
"""

from __future__ import annotations

import logging
import os
import sys

from streamlit.web import cli as streamlit_cli

from analytics import StoreError
from app.owner import LOG, home_from, release_all, shared_owner


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("compactlens: %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


def main(argv: list[str] | None = None) -> None:
    """Open the store of the ``--home`` after ``--``, then run ``streamlit <argv>``."""
    args = sys.argv[1:] if argv is None else argv
    script_args = args[args.index("--") + 1 :] if "--" in args else []
    home = home_from(script_args, os.environ).resolve()
    _log_to_stderr()
    try:
        owner = shared_owner(home)
        LOG.info("store %s open; projecting its spool every %g s", home, owner.interval_s)
    except StoreError as exc:  # the pages say so too, and try again on each new session
        LOG.warning("%s", exc)
    sys.argv = ["streamlit", *args]
    try:
        streamlit_cli.main(prog_name="streamlit")
    finally:
        release_all()


if __name__ == "__main__":
    main()
