"""Offloaded files (``/offloads?session=ID[&file=PATH]``): browse, preview, download.

The list is the session's ``offloads`` rows (and the regular files in its offload folders);
a file is read only through ``app.files``, confined to the offload root: a ``..`` or a symbolic
link anywhere on the way is refused with one line. The preview is ``st.code`` with a language
guessed from the extension (inert text, never HTML).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import polars as pl
import streamlit as st

from app import files
from app.context import frame, home, known_session, read, session_ids
from app.widgets import EMPTY_STORE, link, md_escape, paginate, param, pick

NOT_HERE = (
    "The file is not on this machine (it lives where the agent ran, or was deleted by "
    "session.delete())."
)


def _dirs(sid: str) -> list[Path]:
    metadata = read("metadata", sid)
    return files.work_dirs(home(), metadata if isinstance(metadata, dict) else {})


def _preview(sid: str, relative: str) -> None:
    st.subheader("Preview")
    st.text(relative)
    try:
        path = files.find_offload(_dirs(sid), relative)
    except files.UnsafePathError as exc:
        st.error(f"Refused: {md_escape(str(exc))}")
        return
    except FileNotFoundError:
        st.warning(NOT_HERE)
        return
    try:
        text, cut = files.read_text(path)
        data = path.read_bytes()
    except OSError as exc:  # removed or made unreadable since it was resolved
        st.warning(f"{NOT_HERE} ({md_escape(exc.strerror or str(exc))})")
        return
    if cut:
        st.caption(f"first {files.PREVIEW_BYTES:,} bytes of {len(data):,}")
    st.download_button(
        "download",
        data=data,
        file_name=path.name,
        mime="text/plain",
        key="download",
    )
    st.code(text, language=files.language_for(path.name, text), line_numbers=True)


def _listing(sid: str, rows: pl.DataFrame) -> list[str]:
    recorded = [str(p) for p in rows.get_column("file_path").drop_nulls().to_list()]
    folders = {PurePosixPath(p).parent.name for p in recorded}
    on_disk = [p for folder in folders for p in files.listed(_dirs(sid), folder)]
    return sorted(set(recorded) | set(on_disk))


def _files(sid: str, paths: list[str], sizes: dict[str, int]) -> None:
    st.subheader(f"Files ({len(paths):,})")
    frame = pl.DataFrame({"path": paths}, schema={"path": pl.String})
    for path in paginate(frame, "files_page", page_size=30).get_column("path").to_list():
        size = f"{sizes[path]:,} bytes" if path in sizes else "on disk, not in the store"
        link("offloads", f"{PurePosixPath(path).name} ({size})", session=sid, file=path)


def render() -> None:
    st.title("Offloaded files")
    sid = pick("session", session_ids(), "session", empty=EMPTY_STORE)
    if sid is None or not known_session(sid):
        return
    st.text(sid)
    rows = frame("offloads", sid)
    chosen = param("file")
    if chosen:
        _preview(sid, chosen)
    if rows.height == 0:
        st.info(
            "No tool result of this session was offloaded (none was above the offload "
            "threshold, or its context never reached Warn)."
        )
        return
    shown = rows.select("tool_name", "file_path", "bytes", "lines", "tool_call_id", "occurred_at")
    st.dataframe(paginate(shown, "offloads_page", page_size=50), hide_index=True)
    sizes = {str(p): int(b or 0) for p, b in rows.select("file_path", "bytes").iter_rows()}
    _files(sid, _listing(sid, rows), sizes)


render()
