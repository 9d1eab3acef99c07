"""Artifact retention (issue 8, item 5): which file paths, commands and error lines of the
summarised head are still in the compacted view.

For every effective compaction that summarised something (``summarized > 0``) the *head* is the
messages whose before-side status is ``summarized``: the artifacts are the paths and error lines
in their text, and the commands (``command``/``cmd``/``script``) and paths (``path``,
``file_path``, ...) in their tool-call arguments. The *view* is the compacted context: every
message the compaction created (the compaction message with its summary, anchors and offload
references; placeholders; cut copies) and the text and tool-call arguments of the messages it
kept. An artifact is retained when its exact text occurs in one message of the view (a literal
substring test). A path mentioned only by its basename is *not* retained: ``cache.py`` does not say
which ``cache.py``. A path inside a tool call's command is part of that command, not a separate
artifact. Synthetic messages in the head (an earlier compaction message) are not history and are
skipped: their artifacts were counted when their own head was summarised.
Sessions captured as metadata have no text: their rate is null with ``no_content`` true, never 0.

Extraction is this module's own (regexes below); it reads nothing and writes nothing.
"""

from __future__ import annotations

import polars as pl

from analytics.jobs.common import is_effective

_W = r"[A-Za-z0-9_@+~-]"
_SEG = rf"\.?{_W}+(?:\.{_W}+)*"  # a name; dots inside (or leading: .github), never trailing
_EXT = (
    "py|pyi|js|mjs|ts|tsx|jsx|go|rs|java|kt|c|h|cc|cpp|hpp|rb|php|cs|swift|sh|md|rst|txt|"
    "json|jsonl|yaml|yml|toml|ini|cfg|conf|sql|html|css|csv|lock|xml|ipynb|log"
)
PATH_PATTERN = (
    rf"(?:\.{{1,2}}/{_SEG}(?:/{_SEG})*"  # ./x, ../a/b
    rf"|/?(?:{_SEG}/)+\.?{_W}+(?:\.{_W}+)*\.[A-Za-z0-9]{{1,8}}\b"  # src/x.py, /etc/a.conf
    rf"|/?(?:{_SEG}/){{2,}}{_SEG}"  # a/b/c, /etc/hosts (one slash and no extension: and/or)
    rf"|\b[A-Za-z0-9_-]+\.(?:{_EXT})\b)"  # setup.py
)
"""Path-like tokens in text: ./x, a/b/c, src/x.py, /etc/hosts, setup.py."""
ERROR_PATTERN = (
    r"(?m)(?:\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b:[^\n]*"  # KeyError: 'user'
    r"|^[ \t]*(?:error|fatal|ERROR|FATAL)(?:\[[^\]\n]*\])?:[^\n]*"  # error: ..., error[E0425]: ...
    r"|\bFAILED\b[^\n]*)"  # FAILED tests/x.py::test_y - ...
)
"""Error lines: ``FooError: ...``, ``error: ...`` at a line start, ``FAILED ...``."""
_JSON_STRING = r'"((?:[^"\\]|\\.)*)"'
COMMAND_KEYS = ("command", "cmd", "script")
PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "target_file", "notebook_path")
_TOOL_CALLS = pl.List(pl.Struct({"id": pl.String, "name": pl.String, "arguments": pl.String}))

DETAIL_SCHEMA: dict[str, type[pl.DataType]] = {
    "session_id": pl.String,
    "compaction_id": pl.String,
    "kind": pl.String,
    "artifact": pl.String,
    "retained": pl.Boolean,
}
LOSS_COLUMNS = ("session_id", "compaction_id", "kind", "artifact")


def _valued(keys: tuple[str, ...]) -> str:
    return '"(?:' + "|".join(keys) + r')"\s*:\s*' + _JSON_STRING


def json_values(arguments: pl.Expr, keys: tuple[str, ...]) -> pl.Expr:
    """The string values of ``keys`` anywhere in JSON text, unescaped (a list per row)."""
    return (
        arguments.str.extract_all(_valued(keys))
        .list.eval(
            pl.element()
            .str.replace(r'^"[^"]*"\s*:\s*', "")
            .str.json_decode(pl.String)
            .str.strip_chars()
        )
        .list.eval(pl.element().filter(pl.element().is_not_null() & (pl.element() != "")))
    )


NOT_PATHS = (
    r"^\d+(?:/\d+)+$"  # dates and ratios: 12/2/2025, 3/4
    r"|^[A-Z][A-Za-z0-9]*\.js$"  # Node.js, Vue.js: names of tools, not files
    r"|^[A-Za-z0-9@+~]+(?:/[A-Za-z0-9@+~]+)+$"  # words with slashes: pros/cons, P1/P2/P3
)
"""Path-like tokens that are not paths: dates and ratios, ``Name.js`` tool names, and
slash-separated plain words (no root, no extension, no ``_``, ``-`` or ``.`` in any part: a
relative folder named only by plain words is dropped too, for precision)."""
DIFF_PREFIX = r"^[ab]/(\S+/\S+|\S+\.[A-Za-z0-9]{1,8})$"
"""git diff's ``a/`` and ``b/`` before a path: the path is what follows."""


def text_paths(text: pl.Expr) -> pl.Expr:
    """Path-like tokens in ``text`` (a list per row); URLs, dates, ``Name.js`` and
    slash-separated words are not paths, and a diff's ``a/``/``b/`` prefix is not part of one."""
    without_urls = text.str.replace_all(r"[A-Za-z][A-Za-z0-9+.-]*://\S*", " ")
    return without_urls.str.extract_all(PATH_PATTERN).list.eval(
        pl.element()
        .str.replace(DIFF_PREFIX, "$1")
        .filter(~pl.element().str.replace(DIFF_PREFIX, "$1").str.contains(NOT_PATHS))
    )


def error_lines(text: pl.Expr) -> pl.Expr:
    """Error lines in ``text`` (a list per row), surrounding whitespace stripped."""
    return text.str.extract_all(ERROR_PATTERN).list.eval(pl.element().str.strip_chars())


def _arguments(tool_calls: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """All tool-call arguments of a message as one text (tool_calls as JSON text or decoded)."""
    calls = tool_calls.str.json_decode(_TOOL_CALLS) if dtype == pl.String else tool_calls
    return calls.list.eval(pl.element().struct.field("arguments")).list.join("\n")


def _with_messages(rows: pl.LazyFrame, messages: pl.DataFrame) -> pl.LazyFrame:
    """``rows`` (session_id, idx, ...) joined to their message's content and tool-call
    arguments (all of a message's arguments as one text), in the order of ``rows``; a row
    whose message is not in ``messages`` has no text and is left out."""
    dtype = messages.schema.get("tool_calls", pl.String())
    text = messages.lazy().select(
        pl.col("session_id").cast(pl.String),
        pl.col("idx").cast(pl.Int64),
        pl.col("content").cast(pl.String),
        pl.col("tool_calls"),
    )
    return (
        rows.join(text, on=["session_id", "idx"], how="inner", maintain_order="left")
        .with_columns(
            arguments=_arguments(pl.col("tool_calls"), dtype)
            if dtype != pl.Null
            else pl.lit(None, dtype=pl.String)
        )
        .drop("tool_calls")
    )


def _targets(compactions: pl.DataFrame, sessions: pl.DataFrame) -> pl.LazyFrame:
    """Effective compactions that summarised something, of live sessions, with ``no_content``
    (the session was captured as metadata)."""
    live = sessions.lazy().select(
        pl.col("session_id").cast(pl.String),
        metadata=pl.col("capture").cast(pl.String) == "metadata",
        deleted=pl.col("deleted_at").is_not_null(),
    )
    return (
        compactions.lazy()
        .filter(is_effective() & (pl.col("summarized") > 0))
        .select(
            pl.col("session_id").cast(pl.String),
            pl.col("id").cast(pl.String).alias("compaction_id"),
            pl.col("seq").cast(pl.Int64).alias("compaction_seq"),
        )
        .join(live, on="session_id", how="left")
        .filter(~pl.col("deleted").fill_null(value=False))
        .select(
            "session_id",
            "compaction_id",
            "compaction_seq",
            no_content=pl.col("metadata").fill_null(value=False),
        )
    )


def head_artifacts(compaction_views: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    """session_id, compaction_id, kind ("path"|"command"|"error"), artifact: the distinct
    artifacts of each compaction's summarised head, in head order."""
    head = (
        compaction_views.lazy()
        .filter((pl.col("side") == "before") & (pl.col("status") == "summarized"))
        .select(
            pl.col("session_id").cast(pl.String),
            pl.col("compaction_id").cast(pl.String),
            pl.col("position").cast(pl.Int64),
            pl.col("history_index").cast(pl.Int64).alias("idx"),
        )
        .pipe(_with_messages, messages)
        .select(
            "session_id",
            "compaction_id",
            path=pl.concat_list(
                text_paths(pl.col("content")).fill_null([]),
                json_values(pl.col("arguments"), PATH_KEYS).fill_null([]),
            ),
            command=json_values(pl.col("arguments"), COMMAND_KEYS),
            error=error_lines(pl.col("content")),
        )
        .collect()
        .lazy()
    )
    found = [
        head.select("session_id", "compaction_id", kind=pl.lit(kind), artifact=kind)
        .filter(pl.col("artifact").list.len() > 0)
        .explode("artifact")
        for kind in ("path", "command", "error")
    ]
    return (
        pl.concat(found)
        .filter(pl.col("artifact").is_not_null() & (pl.col("artifact") != ""))
        .unique(subset=["compaction_id", "kind", "artifact"], keep="first", maintain_order=True)
        .collect()
    )


def view_parts(
    compaction_views: pl.DataFrame, messages: pl.DataFrame, synthetic: pl.DataFrame
) -> pl.LazyFrame:
    """compaction_id, text: the parts of each compacted view (the messages the compaction
    created, and the content and tool-call arguments of the messages it kept)."""
    created = synthetic.lazy().select(
        pl.col("compaction_id").cast(pl.String), text=pl.col("content").cast(pl.String)
    )
    kept = (
        compaction_views.lazy()
        .filter(
            (pl.col("side") == "after")
            & pl.col("status").is_in(["kept", "system"])
            & pl.col("history_index").is_not_null()
        )
        .select(
            pl.col("session_id").cast(pl.String),
            pl.col("compaction_id").cast(pl.String),
            pl.col("history_index").cast(pl.Int64).alias("idx"),
        )
        .pipe(_with_messages, messages)
        .select(
            "compaction_id",
            text=pl.concat_str("content", "arguments", separator="\n", ignore_nulls=True),
        )
    )
    return pl.concat([created, kept]).filter(pl.col("text").is_not_null())


def artifact_detail(
    compactions: pl.DataFrame,
    compaction_views: pl.DataFrame,
    messages: pl.DataFrame,
    synthetic: pl.DataFrame,
    sessions: pl.DataFrame,
) -> pl.DataFrame:
    """One row per head artifact of each target compaction: session_id, compaction_id, kind,
    artifact, retained (its exact text occurs in a message of the compacted view)."""
    targets = _targets(compactions, sessions).filter(~pl.col("no_content"))
    found = (
        head_artifacts(compaction_views, messages)
        .lazy()
        .join(
            targets.select("compaction_id"), on="compaction_id", how="semi", maintain_order="left"
        )
    )
    # a substring test per (view part, artifact): cheap literal searches, no automaton per row
    seen = (
        view_parts(compaction_views, messages, synthetic)
        .join(found.select("compaction_id", "artifact"), on="compaction_id")
        .filter(pl.col("text").str.contains(pl.col("artifact"), literal=True))
        .select("compaction_id", "artifact", retained=pl.lit(value=True))
        .unique(subset=["compaction_id", "artifact"])
    )
    return (
        found.join(seen, on=["compaction_id", "artifact"], how="left", maintain_order="left")
        .with_columns(pl.col("retained").fill_null(value=False))
        .select(pl.col(c).cast(t) for c, t in DETAIL_SCHEMA.items())
        .collect()
    )


def artifact_retention(
    compactions: pl.DataFrame, sessions: pl.DataFrame, detail: pl.DataFrame
) -> pl.DataFrame:
    """Per target compaction: session_id, compaction_id, compaction_seq, artifacts (in the
    head), retained (in the view), rate (null without artifacts), no_content (metadata
    capture: counts and rate null)."""
    counts = detail.group_by("compaction_id").agg(
        artifacts=pl.len().cast(pl.Int64), retained=pl.col("retained").sum().cast(pl.Int64)
    )
    rows = (
        _targets(compactions, sessions)
        .join(counts.lazy(), on="compaction_id", how="left")
        .with_columns(
            artifacts=pl.when(~pl.col("no_content")).then(pl.col("artifacts").fill_null(0)),
            retained=pl.when(~pl.col("no_content")).then(pl.col("retained").fill_null(0)),
        )
        .with_columns(rate=_rate(pl.col("retained"), pl.col("artifacts")))
    )
    return (
        rows.select(
            "session_id",
            "compaction_id",
            "compaction_seq",
            "artifacts",
            "retained",
            "rate",
            "no_content",
        )
        .sort("session_id", "compaction_seq", "compaction_id")
        .collect()
    )


def _rate(retained: pl.Expr, artifacts: pl.Expr) -> pl.Expr:
    return pl.when(artifacts > 0).then(retained / artifacts).cast(pl.Float64)


def artifact_losses(detail: pl.DataFrame) -> pl.DataFrame:
    """session_id, compaction_id, kind, artifact: the head artifacts missing from the view."""
    return detail.filter(~pl.col("retained")).select(LOSS_COLUMNS)


def session_artifact_retention(per_compaction: pl.DataFrame) -> pl.DataFrame:
    """Per session (from :func:`artifact_retention`): compactions, artifacts, retained, rate
    (retained / artifacts over its compactions) and no_content (rate null, never 0)."""
    return (
        per_compaction.group_by("session_id")
        .agg(
            compactions=pl.len().cast(pl.Int64),
            no_content=pl.col("no_content").all(),
            artifacts=pl.col("artifacts").sum().cast(pl.Int64),
            retained=pl.col("retained").sum().cast(pl.Int64),
        )
        .with_columns(
            artifacts=pl.when(~pl.col("no_content")).then(pl.col("artifacts")),
            retained=pl.when(~pl.col("no_content")).then(pl.col("retained")),
        )
        .with_columns(rate=_rate(pl.col("retained"), pl.col("artifacts")))
        .select("session_id", "compactions", "artifacts", "retained", "rate", "no_content")
        .sort("session_id")
    )


def overall_artifact_retention(per_compaction: pl.DataFrame) -> pl.DataFrame:
    """One row for ``stats --json`` ``artifact_retention``: rate (over every artifact of
    sessions with content), lost (artifacts not retained), sessions (with content), and
    no_content_sessions."""
    sessions = session_artifact_retention(per_compaction)
    with_content = sessions.filter(~pl.col("no_content"))
    artifacts = pl.col("artifacts").sum()
    retained = pl.col("retained").sum()
    return with_content.select(
        rate=_rate(retained, artifacts),
        lost=(artifacts - retained).cast(pl.Int64),
        sessions=pl.len().cast(pl.Int64),
    ).with_columns(no_content_sessions=pl.lit(sessions.height - with_content.height, pl.Int64))
