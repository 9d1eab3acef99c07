"""What a compaction kept and lost, and what the agent did after it (issue 19, items 4 and 5).

Per compaction (the harness's own, ``origin = "native"``, or ours):

- **artifacts**: the paths, commands and error lines of the replaced history (the before-side
  messages marked ``summarized``; see :func:`analytics.jobs.artifacts.head_artifacts`), each
  ``kept`` when the compacted view (the summary and the messages kept) names it, else ``lost``.
  A path counts as named when the view holds it or one of its tails of two or more segments:
  the summary says ``src/cache.py`` where the tool call said ``/home/u/proj/src/cache.py``
  (a bare basename, ``cache.py``, names no file and does not count).
- **user messages**: each user message of the replaced history (not a tool result) is kept when
  its text, whitespace collapsed, occurs in the view verbatim.
- **re-reads and re-runs**: the files the agent read (a read tool's path argument, or the file
  of a ``cat``/``head``/``tail``/``less`` command) before the compaction and again after it,
  until the session's next compaction of the same origin; the commands it ran before and again
  after. Cheap, deterministic signs that the summary lost what the agent needed.

A compaction's boundary is the history length when it happened: one past the newest history
message its before-view holds. Pure Polars: frames shaped like the store's tables in, frames
out; no I/O.
"""

from __future__ import annotations

import polars as pl

from analytics.jobs.artifacts import (
    COMMAND_KEYS,
    PATH_KEYS,
    head_artifacts,
    json_values,
    view_parts,
)

READ_TOOLS = ("read", "read_file", "view", "open_file", "readfile", "fileread")
"""Tool names (lowercase) whose path argument is a file read."""
VIEWING_EDITORS = ("str_replace_editor", "str_replace_based_edit_tool", "file_editor")
"""Editor tools that read when their ``command`` is ``view``."""
SHELL_READ = r"^\s*(?:cat|head|tail|less|more|bat|nl)\b(?:\s+-[^\s]+)*\s+([^\s|;&><]+)"
"""A shell command that reads a file: its first file argument."""

ARTIFACT_COLUMNS = ("session_id", "compaction_id", "kind", "artifact", "kept")
USER_COLUMNS = ("session_id", "compaction_id", "history_index", "kept")
AFTER_COLUMNS = ("session_id", "compaction_id", "kind", "target")


def boundaries(compactions: pl.DataFrame, compaction_views: pl.DataFrame) -> pl.DataFrame:
    """session_id, compaction_id, origin, at (history length at the compaction), until (the
    ``at`` of the session's next compaction of the same origin, null for the last)."""
    at = (
        compaction_views.filter(
            (pl.col("side") == "before") & pl.col("history_index").is_not_null()
        )
        .group_by("compaction_id")
        .agg((pl.col("history_index").max() + 1).cast(pl.Int64).alias("at"))
    )
    origin = (
        pl.col("origin").cast(pl.String).fill_null("compactlens")
        if "origin" in compactions.columns
        else pl.lit("compactlens")
    )
    return (
        compactions.filter(pl.col("effective").fill_null(True) & (pl.col("tier") > 0))
        .select(
            pl.col("session_id").cast(pl.String),
            pl.col("id").cast(pl.String).alias("compaction_id"),
            origin.alias("origin"),
            pl.col("seq").cast(pl.Int64),
        )
        .join(at, on="compaction_id")
        .sort("session_id", "origin", "seq")
        .with_columns(pl.col("at").shift(-1).over("session_id", "origin").alias("until"))
        .drop("seq")
    )


def needles(found: pl.DataFrame) -> pl.DataFrame:
    """compaction_id, artifact, needle: the texts that name each artifact. A path is named by
    itself, a tail of two or more segments (``/home/u/src/cache.py``: also
    ``home/u/src/cache.py``, ``u/src/cache.py``, ``src/cache.py``), or its file name when no
    other path artifact of that compaction has the same one (``cache.py``); a command or an
    error line only by itself."""
    whole = found.select("compaction_id", "artifact", needle=pl.col("artifact"))
    parts = pl.col("artifact").str.strip_chars_start("/").str.split("/")
    tails = (
        found.filter(pl.col("kind") == "path")
        .select("compaction_id", "artifact", parts=parts)
        .with_columns(start=pl.int_ranges(0, (pl.col("parts").list.len() - 1).clip(0)))
        .explode("start")
        .filter(pl.col("start").is_not_null())
        .select(
            "compaction_id",
            "artifact",
            needle=pl.col("parts").list.slice(pl.col("start")).list.join("/"),
        )
    )
    base = pl.col("artifact").str.split("/").list.last()
    names = (
        found.filter(pl.col("kind") == "path")
        .select("compaction_id", "artifact", needle=base)
        .filter(pl.len().over("compaction_id", "needle") == 1)  # no other artifact's name
    )
    return pl.concat([whole, tails, names]).filter(pl.col("needle") != "").unique()


def artifacts_kept(
    compaction_views: pl.DataFrame,
    messages: pl.DataFrame,
    synthetic: pl.DataFrame,
    targets: pl.DataFrame,
) -> pl.DataFrame:
    """:data:`ARTIFACT_COLUMNS`: every artifact of each target compaction's replaced history,
    ``kept`` when the compacted view names it (paths by a tail of 2+ segments too)."""
    found = head_artifacts(compaction_views, messages).join(
        targets.select("compaction_id"), on="compaction_id", how="semi", maintain_order="left"
    )
    if found.is_empty():
        return pl.DataFrame(schema=dict.fromkeys(ARTIFACT_COLUMNS, pl.String)).with_columns(
            pl.col("kept").cast(pl.Boolean)
        )
    view = view_parts(compaction_views, messages, synthetic).collect()
    return _found_in_view(found, needles(found), view, "artifact", "needle", ARTIFACT_COLUMNS)


def _found_in_view(
    rows: pl.DataFrame,
    texts: pl.DataFrame,
    view: pl.DataFrame,
    key: str,
    needle: str,
    columns: tuple[str, ...],
) -> pl.DataFrame:
    """``rows`` with ``kept``: whether any ``texts[needle]`` of its (compaction, ``key``)
    occurs literally in a part of its compaction's ``view``."""
    seen = (
        view.join(texts.select("compaction_id", key, needle), on="compaction_id")
        .filter(pl.col("text").str.contains(pl.col(needle), literal=True))
        .select("compaction_id", key)
        .unique()
        .with_columns(kept=pl.lit(True))
    )
    return (
        rows.join(seen, on=["compaction_id", key], how="left", maintain_order="left")
        .with_columns(pl.col("kept").fill_null(False))
        .select(columns)
    )


def user_messages_kept(
    compaction_views: pl.DataFrame,
    messages: pl.DataFrame,
    synthetic: pl.DataFrame,
    targets: pl.DataFrame,
) -> pl.DataFrame:
    """:data:`USER_COLUMNS`: each user message of the replaced history and whether the view
    holds its text verbatim (whitespace collapsed)."""
    squash = pl.col("content").str.replace_all(r"\s+", " ").str.strip_chars()
    users = (
        compaction_views.filter((pl.col("side") == "before") & (pl.col("status") == "summarized"))
        .join(targets.select("compaction_id"), on="compaction_id", how="semi")
        .select(
            pl.col("session_id").cast(pl.String),
            pl.col("compaction_id").cast(pl.String),
            pl.col("history_index").cast(pl.Int64),
        )
        .join(
            messages.filter((pl.col("role") == "user") & pl.col("tool_call_id").is_null()).select(
                pl.col("session_id").cast(pl.String),
                pl.col("idx").cast(pl.Int64).alias("history_index"),
                squash.alias("said"),
            ),
            on=["session_id", "history_index"],
        )
        .filter(pl.col("said").is_not_null() & (pl.col("said") != ""))
    )
    view = (
        view_parts(compaction_views, messages, synthetic)
        .collect()
        .select("compaction_id", pl.col("text").str.replace_all(r"\s+", " ").alias("text"))
    )
    return _found_in_view(users, users, view, "history_index", "said", USER_COLUMNS)


def reads_and_runs(messages: pl.DataFrame) -> pl.DataFrame:
    """session_id, idx, kind (``read`` | ``run``), target: each file a message's tool calls
    read and each command they ran."""
    dtype = messages.schema.get("tool_calls", pl.String())
    calls = (
        messages.filter(pl.col("tool_calls").is_not_null())
        .select(
            pl.col("session_id").cast(pl.String),
            pl.col("idx").cast(pl.Int64),
            (
                pl.col("tool_calls").str.json_decode(
                    pl.List(pl.Struct({"id": pl.String, "name": pl.String, "arguments": pl.String}))
                )
                if dtype == pl.String
                else pl.col("tool_calls")
            ).alias("call"),
        )
        .explode("call")
        .filter(pl.col("call").is_not_null())
        .select(
            "session_id",
            "idx",
            pl.col("call").struct.field("name").str.to_lowercase().alias("tool"),
            pl.col("call").struct.field("arguments").alias("args"),
        )
    )
    command = json_values(pl.col("args"), COMMAND_KEYS).list.first()
    path = json_values(pl.col("args"), PATH_KEYS).list.first()
    viewing = pl.col("args").str.contains(r'"command"\s*:\s*"view"')
    read = (
        pl.when(pl.col("tool").is_in(READ_TOOLS))
        .then(path)
        .when(pl.col("tool").is_in(VIEWING_EDITORS) & viewing)
        .then(path)
        .otherwise(command.str.extract(SHELL_READ, 1))
    )
    run = pl.when(pl.col("tool").is_in(VIEWING_EDITORS)).then(None).otherwise(command)
    both = calls.select("session_id", "idx", read.alias("read"), run.alias("run"))
    out = [
        both.filter(pl.col(kind).is_not_null() & (pl.col(kind) != "")).select(
            "session_id", "idx", pl.lit(kind).alias("kind"), pl.col(kind).alias("target")
        )
        for kind in ("read", "run")
    ]
    return pl.concat(out)


def again_after(bounds: pl.DataFrame, actions: pl.DataFrame) -> pl.DataFrame:
    """:data:`AFTER_COLUMNS`: for each compaction, every file read (command run) both before
    its boundary and again after it, before the next compaction's boundary; once each."""
    joined = bounds.join(actions, on="session_id")
    before = joined.filter(pl.col("idx") < pl.col("at")).select("compaction_id", "kind", "target")
    after = joined.filter(
        (pl.col("idx") >= pl.col("at"))
        & (pl.col("until").is_null() | (pl.col("idx") < pl.col("until")))
    ).select("session_id", "compaction_id", "kind", "target", "idx")
    return (
        after.join(before.unique(), on=["compaction_id", "kind", "target"], how="semi")
        .sort("idx")
        .unique(subset=["compaction_id", "kind", "target"], keep="first", maintain_order=True)
        .select(AFTER_COLUMNS)
    )
