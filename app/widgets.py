"""Small Streamlit pieces every page uses: pickers, pagination, links, empty states, text.

Content from transcripts is shown with ``st.text``/``st.code`` (inert) or, inside a link label,
with markdown's special characters escaped; nothing here ever passes ``unsafe_allow_html``.
It reads nothing from the store itself: the options it offers are handed to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl
import streamlit as st

PAGE_FILES = {
    "overview": "views/overview.py",
    "sessions": "views/sessions.py",
    "timeline": "views/timeline.py",
    "diff": "views/diff.py",
    "offloads": "views/offloads.py",
    "retention": "views/retention.py",
    "emergencies": "views/emergencies.py",
    "harness": "views/harness.py",
    "tuning": "views/tuning.py",
}
EMPTY_STORE = (
    "No sessions in this store yet. Import a transcript: `compactlens import PATH`, replay one "
    "through the compactor: `compactlens replay PATH --window 32000`, or run `compactlens demo`."
)
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def md_escape(text: str) -> str:
    """``text`` with every markdown (and HTML) special character escaped."""
    return _MARKDOWN.sub(r"\\\1", text.replace("\n", " "))


def keep_query() -> None:
    """Write the query the page runs with back into the browser's address bar.

    A link to the page already shown (the emergencies list to one session, a file of the
    offloads page) runs the page with the link's query, but the browser keeps the old address:
    the next click (a button) reruns with that old query, and a copied address shares the
    old view. Sending the query back makes the address the view's, on every run."""
    st.query_params.from_dict({key: st.query_params.get_all(key) for key in st.query_params})


def param(name: str) -> str | None:
    value = st.query_params.get(name)
    return str(value) if value else None


def pick(
    name: str,
    options: Sequence[str],
    label: str,
    *,
    empty: str,
    labels: Mapping[str, str] | None = None,
) -> str | None:
    """The value of query parameter ``name`` if given, else a picker over ``options`` that
    writes its choice back into the URL (so the view can be shared). ``labels`` say what each
    option is (the URL keeps the option itself). None: nothing chosen."""
    chosen = param(name)
    if chosen is not None:
        return chosen
    if not options:
        st.info(empty)
        return None
    shown = labels or {}
    value = st.selectbox(
        label,
        list(options),
        index=None,
        placeholder="choose one",
        key=name,
        format_func=lambda option: shown.get(option, option),
    )
    if value is None:
        return None
    st.query_params[name] = value
    return str(value)


def _url_state(name: str, default: Any, read: Callable[[str], Any]) -> Callable[[], None]:
    """Seed widget ``name``'s state from the URL (``read`` of its text; ``default`` when the URL
    has none) and return the ``on_change`` that writes a choice back, leaving the default out."""
    asked = param(name)
    st.session_state[name] = default if asked is None else read(asked)

    def _keep() -> None:
        chosen = st.session_state[name]
        if chosen == default:
            st.query_params.pop(name, None)
        else:
            st.query_params[name] = "1" if chosen is True else str(chosen)

    return _keep


def url_choice(
    name: str,
    options: Sequence[str],
    label: str,
    *,
    default: str,
    words: Mapping[str, str] | None = None,
    column: Any = st,
) -> str:
    """A picker whose choice is query parameter ``name``: the URL's value when it is one of
    ``options`` (a shared link opens on it), else ``default``, which the URL leaves out.
    A choice writes the URL before the page reruns; ``words`` say what each option is;
    ``column`` is where it is drawn (a column of ``st.columns``)."""
    keep = _url_state(name, default, lambda asked: asked if asked in options else default)
    shown = words or {}
    value = column.selectbox(
        label,
        list(options),
        key=name,
        on_change=keep,
        format_func=lambda option: shown.get(option, option),
    )
    return str(value)


def url_text(name: str, label: str, *, column: Any = st) -> str:
    """A text input whose text is query parameter ``name`` (left out when empty)."""
    keep = _url_state(name, "", str)
    return str(column.text_input(label, key=name, on_change=keep))


def url_flag(name: str, label: str, *, column: Any = st) -> bool:
    """A checkbox that is query parameter ``name`` (``1`` when ticked, left out when not)."""
    keep = _url_state(name, False, lambda asked: asked not in ("", "0", "false"))
    return bool(column.checkbox(label, key=name, on_change=keep))


def paginate(frame: pl.DataFrame, key: str, *, page_size: int = 50) -> pl.DataFrame:
    """One page of ``frame`` with a page number input and a caption of what is shown."""
    if frame.height <= page_size:
        return frame
    pages = (frame.height + page_size - 1) // page_size
    page = int(
        st.number_input(
            f"page (of {pages:,})", min_value=1, max_value=pages, value=1, step=1, key=key
        )
    )
    start = (page - 1) * page_size
    st.caption(f"rows {start + 1:,}–{min(start + page_size, frame.height):,} of {frame.height:,}")
    return frame.slice(start, page_size)


def marker_label(row: Mapping[str, Any]) -> str:
    """A compaction (a ``compaction_turns`` row with its tokens) as the timeline and the diff
    picker name it: turn, tier, tokens before and after."""
    turn = "after the last turn" if row["turn"] is None else f"turn {row['turn']}"
    tokens = f"{row['tokens_before']:,} → {row['tokens_after']:,} tokens"
    return f"{turn} · {row['tier_name']} · {tokens}"


def link(page: str, label: str, **params: str) -> None:
    """A link to another page of the app with query parameters; ``label`` is escaped."""
    st.page_link(PAGE_FILES[page], label=md_escape(label), query_params=params)


def not_found(what: str, value: str, page: str) -> None:
    st.warning(
        f"No {what} {md_escape(value)} in this store (deleted, superseded, or another store)."
    )
    st.page_link(PAGE_FILES[page], label=f"choose another {what}")
