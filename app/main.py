"""The compactlens app: ``streamlit run app/main.py -- --home DIR`` (or ``$COMPACTLENS_HOME``).

Navigation and layout only: the pages and their URL paths (SPEC 6), the store's owner opened
once per process (it projects the spool on a timer), and a small refresher that reruns the page
when an ingest brought new events. Each page lives in ``app/views/``, not ``pages/``: Streamlit
treats a ``pages/`` folder beside the entry script as its old file-based navigation and then
never runs ``st.navigation``.
"""

from __future__ import annotations

import streamlit as st

from analytics import redact_url
from app.context import owner
from app.widgets import keep_query, md_escape
from app.words import plural

PAGES = [
    st.Page("views/overview.py", title="Overview", url_path="", default=True),
    st.Page("views/sessions.py", title="Sessions", url_path="sessions"),
    st.Page("views/timeline.py", title="Timeline", url_path="timeline"),
    st.Page("views/diff.py", title="Compaction diff", url_path="diff"),
    st.Page("views/offloads.py", title="Offloaded files", url_path="offloads"),
    st.Page("views/retention.py", title="Anchor retention", url_path="retention"),
    st.Page("views/emergencies.py", title="Emergencies", url_path="emergencies"),
    st.Page("views/harness.py", title="Harness compactions", url_path="harness"),
    st.Page("views/live.py", title="Live sessions", url_path="live"),
    st.Page("views/tuning.py", title="Tuning lab", url_path="tuning"),
]
REFRESH_S = 1.0  # how often the refresher compares the store's version with the page's


@st.fragment(run_every=REFRESH_S)
def _refresher(drawn_at: int) -> None:
    """Rerun the whole page when the projector stored new events since it was drawn."""
    own = owner()
    if own.version != drawn_at:
        st.rerun(scope="app")
    st.caption(f"store: {md_escape(str(own.home))} · {plural(own.events, 'event')}")
    if own.last_error:
        st.error(md_escape(redact_url(own.last_error)))


def main() -> None:
    st.set_page_config(page_title="compactlens", layout="wide")
    page = st.navigation(PAGES)
    keep_query()
    own = owner()
    with st.sidebar:
        _refresher(own.version)
    page.run()


main()
