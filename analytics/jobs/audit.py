"""What a compaction kept and lost, and what the agent did after it (issue 19, items 4 and 5).

Per compaction (the harness's own, ``origin = "native"``, or ours):

- **artifacts**: the paths, commands and error lines of the replaced history (the before-side
  messages marked ``summarized``; see :func:`analytics.jobs.artifacts.head_artifacts`), each
  ``kept`` when the compacted view (the summary and the messages kept) names it, else ``lost``.
  One file is one artifact: its forms (``/Users/u/cli/cmd/config.go``, ``cmd/config.go``,
  ``./cmd/config.go``, and ``config.go`` when no other file of the compaction has that name)
  are merged (:mod:`analytics.jobs.file_forms`), relative forms resolved against the session's
  working directory (recorded by the importer, else inferred from the paths), else by suffix
  among the compaction's own paths. A file counts as named when the view holds
  one of its forms, a tail of two or more segments of one (the summary says ``src/cache.py``
  where the tool call said ``/home/u/proj/src/cache.py``), or its file name when no other
  file of that compaction shares it; a name counts only as a whole (``cache.py`` is not named
  by ``mycache.py``).
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
    PATH_KEYS,
    forward_slashes,
    head_artifacts,
    json_commands,
    json_values,
    view_parts,
)
from analytics.jobs.file_forms import artifact_keys, merged_artifacts, working_dirs

READ_TOOLS = ("read", "read_file", "view", "open_file", "readfile", "fileread")
"""Tool names (lowercase) whose path argument is a file read."""
VIEWING_EDITORS = ("str_replace_editor", "str_replace_based_edit_tool", "file_editor")
"""Editor tools that read when their ``command`` is ``view``."""
SHELL_READ = r"^\s*(?:cat|head|tail|less|more|bat|nl)\b(?:\s+-[^\s]+)*\s+([^\s|;&><]+)"
"""A shell command that reads a file: its first file argument."""

ARTIFACT_COLUMNS = ("session_id", "compaction_id", "kind", "artifact", "kept", "forms")
"""``artifact`` is the longest of a file's ``forms`` (every spelling the head used)."""
_BRACES = r"[\w./~-]*/\{[^{}\n]+\}"
"""A brace list of paths: ``service/{base.py, repos.py}``."""
_BEFORE = r"(?:^|[^A-Za-z0-9_.-])"
_PATH_BEFORE = r"(?:^|[^A-Za-z0-9_./\\-]|(?:^|[^A-Za-z0-9_.])\./)"  # ./x counts as own
_AFTER = r"(?:$|[^A-Za-z0-9_-])"
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
    """compaction_id, artifact, needle, tail: the texts that name each artifact. A file is
    named by each of its ``forms`` and its ``key`` (a frame without them: the artifact alone);
    by a ``tail`` of two or more segments of one (``/home/u/src/cache.py``: also
    ``home/u/src/cache.py``, ``u/src/cache.py``, ``src/cache.py``) that is no other file's, said
    as a path of its own (``src/cache.py``, not the end of ``lib/src/cache.py``); by its file
    name (with a dot: ``cache.py``, ``.env``) when no other file of that compaction has the same
    one; a module that an import names without its extension (``./panels/TaskDashboard``) by
    that name when it is not a plain word and no other file has it. A command or an error line
    is named only by itself."""
    if "forms" not in found.columns:
        found = found.with_columns(forms=pl.concat_list("artifact"), key=pl.col("artifact"))
    spelt = (
        found.select("compaction_id", "kind", "artifact", text=pl.concat_list("forms", "key"))
        .explode("text")
        .unique()
    )
    whole = spelt.select("compaction_id", "artifact", needle=pl.col("text"), tail=pl.lit(False))
    parts = pl.col("text").str.strip_chars_start("/").str.split("/")
    tails = (
        spelt.filter(pl.col("kind") == "path")
        .select("compaction_id", "artifact", parts=parts)
        .with_columns(start=pl.int_ranges(0, (pl.col("parts").list.len() - 1).clip(0)))
        .explode("start")
        .filter(pl.col("start").is_not_null())
        .select(
            "compaction_id",
            "artifact",
            needle=pl.col("parts").list.slice(pl.col("start")).list.join("/"),
            tail=pl.col("start") > 0,
        )
        .unique()
        .filter(pl.col("artifact").n_unique().over("compaction_id", "needle") == 1)
        .group_by("compaction_id", "artifact", "needle")
        .agg(pl.col("tail").all())
    )
    files = found.filter(pl.col("kind") == "path")
    name = pl.col("artifact").str.split("/").list.last()
    names = files.select("compaction_id", "artifact", needle=name, tail=pl.lit(False)).filter(
        pl.col("needle").str.contains(r"\.")
        & (pl.len().over("compaction_id", "needle") == 1)  # no other file's name
    )
    stem = name.str.replace(r"\.[^.]*$", "")
    stems = (
        files.select("compaction_id", "artifact", needle=stem, tail=pl.lit(False))
        .filter(pl.len().over("compaction_id", "needle") == 1)
        .join(
            files.filter(
                pl.col("artifact").str.contains(r"^\.{1,2}/")
                & ~name.str.contains(r"\.")
                & name.str.contains(r"^.+[A-Z0-9_-]")  # not a plain word: TaskDashboard
            ).select("compaction_id", "artifact"),
            on=["compaction_id", "artifact"],
            how="semi",
        )
    )
    return (
        pl.concat([whole, tails, names, stems])
        .filter(pl.col("needle") != "")
        .group_by("compaction_id", "artifact", "needle")
        .agg(pl.col("tail").all())
    )


def artifacts_kept(
    compaction_views: pl.DataFrame,
    messages: pl.DataFrame,
    synthetic: pl.DataFrame,
    targets: pl.DataFrame,
    recorded_dirs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """:data:`ARTIFACT_COLUMNS`: every artifact of each target compaction's replaced history,
    one per file (:func:`artifact_keys`; ``recorded_dirs``: session_id, cwd as the importer
    recorded it), ``kept`` when the compacted view names it (:func:`needles`)."""
    found = head_artifacts(compaction_views, messages).join(
        targets.select("compaction_id"), on="compaction_id", how="semi", maintain_order="left"
    )
    if found.is_empty():
        return pl.DataFrame(
            schema={
                **dict.fromkeys(ARTIFACT_COLUMNS, pl.String),
                "kept": pl.Boolean,
                "forms": pl.List(pl.String),
            }
        )
    files = merged_artifacts(artifact_keys(found, working_dirs(found, recorded_dirs)))
    view = readable_view(view_parts(compaction_views, messages, synthetic).collect())
    return _found_in_view(
        files, needles(files), view, "artifact", "needle", ARTIFACT_COLUMNS, whole_words=True
    )


def readable_view(view: pl.DataFrame) -> pl.DataFrame:
    """``view`` (compaction_id, text) as a reader takes it: Windows paths with ``/``
    (``src\\gen\\bad.py``), and each brace list of paths spelt out as well
    (``service/{base.py, repos.py}``: also ``service/base.py``, ``service/repos.py``)."""
    plain = view.select("compaction_id", text=forward_slashes(pl.col("text")))
    group = pl.col("group")
    spelt = (
        plain.select("compaction_id", group=pl.col("text").str.extract_all(_BRACES))
        .explode("group")
        .filter(group.is_not_null())
        .select(
            "compaction_id",
            prefix=group.str.extract(r"^(.*/)\{", 1),
            item=group.str.extract(r"\{([^{}]*)\}", 1).str.split(","),
        )
        .explode("item")
        .select(
            "compaction_id",
            text=pl.concat_str("prefix", pl.col("item").str.strip_chars(" `'\"")),
        )
    )
    return pl.concat([plain, spelt])


def _found_in_view(
    rows: pl.DataFrame,
    texts: pl.DataFrame,
    view: pl.DataFrame,
    key: str,
    needle: str,
    columns: tuple[str, ...],
    *,
    whole_words: bool = False,
) -> pl.DataFrame:
    """``rows`` with ``kept``: whether any ``texts[needle]`` of its (compaction, ``key``)
    occurs literally in a part of its compaction's ``view`` (with ``whole_words``: not inside
    a longer name, ``cache.py`` not in ``mycache.py`` or ``cache.pyc``; a ``tail`` not at the
    end of a longer path either)."""
    tail = [pl.col("tail")] if "tail" in texts.columns else []
    seen = view.join(texts.select("compaction_id", key, needle, *tail), on="compaction_id").filter(
        pl.col("text").str.contains(pl.col(needle), literal=True)
    )
    if whole_words:  # a regex per candidate pair only: the literal test kept few
        word = pl.col(needle).str.contains(r"^[A-Za-z0-9_]")
        end = pl.col(needle).str.contains(r"[A-Za-z0-9_]$")
        before = pl.lit(_BEFORE)
        if tail:
            before = pl.when(pl.col("tail")).then(pl.lit(_PATH_BEFORE)).otherwise(before)
        bounded = pl.concat_str(
            pl.when(word).then(before).otherwise(pl.lit("")),
            pl.col(needle).str.escape_regex(),
            pl.when(end).then(pl.lit(_AFTER)).otherwise(pl.lit("")),
        )
        seen = seen.filter(pl.col("text").str.contains(bounded))
    found = seen.select("compaction_id", key).unique().with_columns(kept=pl.lit(True))
    return (
        rows.join(found, on=["compaction_id", key], how="left", maintain_order="left")
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
    command = json_commands(pl.col("args")).list.first()
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
