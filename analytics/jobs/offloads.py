"""Offloads (issue 8, job 8): what was offloaded per tool, and whether the agent needed it again.

Inputs are the store's ``offloads``, ``messages`` and ``sessions`` frames (deleted sessions
ignored). An offload is *read back* when a later message of its session names the offload file:
its ``content`` or its ``tool_calls`` text (the JSON of name and arguments) contains the
offload's ``file_path`` or its file name. "Later" means a history index greater than that of the
tool result the offload came from (the message with the offload's ``tool_call_id``); when that
result is not in ``messages``, any message counts. For sessions captured as metadata nothing can
be read, so ``read_back`` is null there ("no content"), never false.

This module does no I/O: it never opens the offload files, and does not judge whether offloading
was right.
"""

from __future__ import annotations

import polars as pl

from analytics.jobs.common import conform, drop_deleted, live_sessions

_OFFLOADS = {
    "record_id": pl.String(),
    "session_id": pl.String(),
    "tool_call_id": pl.String(),
    "tool_name": pl.String(),
    "file_path": pl.String(),
    "bytes": pl.Int64(),
    "lines": pl.Int64(),
}
_MESSAGES = {
    "session_id": pl.String(),
    "idx": pl.Int64(),
    "tool_call_id": pl.String(),
    "tool_calls": pl.String(),
    "content": pl.String(),
}


def _result_indexes(messages: pl.DataFrame) -> pl.DataFrame:
    """session_id, tool_call_id → result_index: where each tool result sits in the history."""
    return (
        messages.filter(pl.col("tool_call_id").is_not_null())
        .group_by("session_id", "tool_call_id")
        .agg(result_index=pl.col("idx").min())
    )


_FILE_NAME = r"[\w.\-]+\.txt"
"""Offload files are ``<sanitised id>[-<hash>].txt``: a mention is such a name in the text."""


def _first_mentions(offloads: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    """offload_row → first_read_index: the first later message naming each offload's file.

    Names are pulled out of every message once (a regex) and joined to the offloads, so the
    cost grows with the messages plus the offloads, not with their product; a file whose name
    is not ``*.txt`` (not written by compactlens) is matched by substring instead.
    """
    texts = messages.select(
        "session_id",
        "idx",
        text=pl.concat_str(["content", "tool_calls"], separator="\n", ignore_nulls=True),
    ).filter(pl.col("text").is_not_null())
    later = pl.col("idx") > pl.col("result_index").fill_null(-1)
    wanted = offloads.select("offload_row", "session_id", "file_path", "file_name", "result_index")
    txt = wanted.filter(pl.col("file_name").str.ends_with(".txt"))
    names = (
        texts.select("session_id", "idx", file_name=pl.col("text").str.extract_all(_FILE_NAME))
        .explode("file_name")
        .filter(pl.col("file_name").is_not_null())
        .unique()
    )
    found = txt.join(names, on=["session_id", "file_name"], how="inner").filter(later)
    other = wanted.filter(~pl.col("file_name").str.ends_with(".txt"))
    if other.height:
        named = (pl.col("file_path").str.len_chars() > 0) & pl.col("text").str.contains(
            pl.col("file_path"), literal=True
        )
        by_name = (pl.col("file_name").str.len_chars() > 0) & pl.col("text").str.contains(
            pl.col("file_name"), literal=True
        )
        slow = other.join(texts, on="session_id", how="inner").filter(
            later & (named | by_name).fill_null(False)
        )
        found = pl.concat([found.select("offload_row", "idx"), slow.select("offload_row", "idx")])
    return found.group_by("offload_row").agg(first_read_index=pl.col("idx").min())


def offload_read_backs(
    offloads: pl.DataFrame, messages: pl.DataFrame, sessions: pl.DataFrame
) -> pl.DataFrame:
    """One row per offload of a live session: session_id, record_id, tool_call_id, tool_name,
    file_path, bytes, lines, result_index (history index of the tool result, null if unknown),
    read_back (bool; null for metadata-capture sessions), first_read_index (history index of the
    first later message naming the file, null if none)."""
    frame = drop_deleted(conform(offloads, _OFFLOADS), sessions).with_row_index("offload_row")
    history = drop_deleted(conform(messages, _MESSAGES), sessions)
    # only the messages of sessions that offloaded something can read an offload back
    history = history.filter(pl.col("session_id").is_in(frame["session_id"].unique().implode()))
    metadata = (
        conform(live_sessions(sessions), {"session_id": pl.String(), "capture": pl.String()})
        .filter(pl.col("capture") == "metadata")
        .select("session_id", no_content=pl.lit(True))
        .unique("session_id")
    )
    frame = frame.join(
        _result_indexes(history), on=["session_id", "tool_call_id"], how="left"
    ).with_columns(
        file_name=pl.col("file_path")
        .str.replace_all("\\", "/", literal=True)
        .str.split("/")
        .list.last()
    )
    mentions = _first_mentions(frame, history)
    return (
        frame.join(mentions, on="offload_row", how="left")
        .join(metadata, on="session_id", how="left")
        .with_columns(
            read_back=pl.when(pl.col("no_content").is_null()).then(
                pl.col("first_read_index").is_not_null()
            )
        )
        .sort("offload_row")
        .select(
            "session_id",
            "record_id",
            "tool_call_id",
            "tool_name",
            "file_path",
            "bytes",
            "lines",
            "result_index",
            "read_back",
            "first_read_index",
        )
    )


def offloads_by_tool(
    offloads: pl.DataFrame, messages: pl.DataFrame, sessions: pl.DataFrame
) -> pl.DataFrame:
    """One row per tool: tool_name, files (offloads), bytes, lines, sessions, read_back
    (offloads read back), read_back_known (offloads whose session has content),
    read_back_rate (read_back / read_back_known; null when none is known). Largest first."""
    per_offload = offload_read_backs(offloads, messages, sessions)
    return (
        per_offload.group_by("tool_name")
        .agg(
            files=pl.len().cast(pl.Int64),
            bytes=pl.col("bytes").sum().cast(pl.Int64),
            lines=pl.col("lines").sum().cast(pl.Int64),
            sessions=pl.col("session_id").n_unique().cast(pl.Int64),
            read_back=pl.col("read_back").sum().cast(pl.Int64),
            read_back_known=pl.col("read_back").count().cast(pl.Int64),
        )
        .with_columns(
            read_back_rate=pl.when(pl.col("read_back_known") > 0).then(
                pl.col("read_back") / pl.col("read_back_known")
            )
        )
        .sort(["bytes", "tool_name"], descending=[True, False], nulls_last=True)
    )
