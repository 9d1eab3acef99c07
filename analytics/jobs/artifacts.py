"""Artifact retention (issue 8, item 5): which file paths, commands and error lines of the
summarised head are still in the compacted view.

For every effective compaction that summarised something (``summarized > 0``) the *head* is the
messages whose before-side status is ``summarized``: the artifacts are the paths, error lines and
``$``-prompt commands in their text, and the commands (``command``/``cmd``/``script``, a string or
an argument list) and paths (``path``, ``file_path``, ...) in their tool-call arguments. A path
found in text needs evidence (:data:`EVIDENT`, or an evident path of the head under it): a
branch, a Go import path or a web route is none (issue 27). The *view* is the compacted
context: every message the compaction created (the compaction message with its summary, anchors
and offload references; placeholders; cut copies) and the text and tool-call arguments of the
messages it kept. An artifact is retained when its exact text occurs in one message of the view
(a literal substring test). A path mentioned only by its basename is *not* retained: ``cache.py``
does not say which ``cache.py``. A path inside a tool call's command is part of that command, not
a separate artifact. Synthetic messages in the head (an earlier compaction message) are not
history and are skipped: their artifacts were counted when their own head was summarised.
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
_PART = rf"(?:{_SEG}|\.\.)"  # a name, or .. after the first one: src/bin/../x.rs
PATH_PATTERN = (
    rf"(?:(?:\.{{1,2}}/)+{_SEG}(?:/{_PART})*"  # ./x, ../a/b, ../../a
    rf"|/?{_SEG}/(?:{_PART}/)*\.?{_W}+(?:\.{_W}+)*\.[A-Za-z0-9]{{1,8}}\b"  # src/x.py
    rf"|/?{_SEG}/(?:{_PART}/)+{_SEG}"  # a/b/c (one slash, no extension: and/or)
    rf"|/{_SEG}/{_SEG}"  # /etc/hosts, /tmp/build_x1: rooted, two names
    rf"|(?:\B\.)?\b[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.(?:{_EXT})"  # setup.py, .mcp.json
    r"(?:\.(?:old|bak|orig|backup))?\b)"  # auth.rs.old
)
"""Path-like tokens in text: ./x, ../../x, a/b/c, src/x.py, /etc/hosts, setup.py, .mcp.json,
auth.rs.old."""
WINDOWS_PATHS = (
    r"\b[A-Za-z]:[\\/][^\s\"'`<>|*?,;()\[\]{}]*",  # a drive's: G:\repo\src, g:/repo/x.rs
    rf"[\w.@+/-]*[\w.@+-]\\[\w.@+\\/-]*\.(?:{_EXT})\b",  # with a \ and an extension
)
"""Windows paths: read apart from the rest of the text, their ``\\`` taken for ``/`` (two
patterns, each fast alone: together they are three times slower)."""
_DRIVE_PATH = rf"\b[A-Za-z]:/(?:{_PART}/)+{_SEG}|{PATH_PATTERN}"  # g:/repo, not C:/Program
ERROR_PATTERN = (
    r"(?m)(?:\b[A-Z][A-Za-z0-9_]*(?:Error|Exception)\b:(?:[^:\n][^\n]*|$)"  # KeyError: 'user'
    r"|^[ \t]*(?:error|fatal|ERROR|FATAL)(?:\[[^\]\n]*\])?:[^\n]*"  # error: ..., error[E0425]: ...
    r"|^[ \t]*FAILED\b[^\n]*"  # FAILED tests/x.py::test_y - ...
    r"|^[ \t]*[A-Z][a-z]+-[A-Z][A-Za-z]+ : [^\n]*)"  # Get-ChildItem : Cannot find path ...
)
"""Error lines: ``FooError: ...`` (not Rust's ``FooError::Variant``), ``error: ...``,
``FAILED ...`` and a PowerShell cmdlet's ``Verb-Noun : ...`` at a line start."""
PROMPT_COMMANDS = r"(?m)^[ \t]*(?:\[[\w:.-]+\][ \t]*)?\$[ \t]+(\S[^\n]*?)[ \t]*$"
"""A command a tool's output shows it ran, after a ``$`` prompt: ``[test] $ go test ./...``."""
NOT_ERRORS = (
    r"""^(?:error|ERROR|fatal|FATAL):\s*(?:['"`]|.*(?:\|\||\?\?)|.*[,;{(\[]$)"""
    r"|^[A-Za-z0-9_]+:$"
    r"|^[A-Za-z0-9_]+: (?:If|When|Raised|Thrown)\b"
    r"""|^FAILED(?:['"`]|.*['"`]\)?;$)"""
)
"""Error lines that are code, not messages: an object's field (``error: 'Bad input',``,
``error: e.message || 'failed',``), a type (``error: string;``), an ``except KeyError:``,
a docstring's ``Raises`` entry (``ValueError: If the file is missing``), a string in code
(``'FAILED'``, ``log("FAILED - buzzer");``)."""
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


EDITOR_VERBS = r"^(?:view|create|str_replace|insert|undo_edit)$"
"""A file editor's ``command`` argument (OpenHands', SWE-agent's): no shell command."""
SHELL_FLAGS = ("-c", "-lc", "-ic", "-Command", "-command", "/c", "/C")
"""The flag before the script when a command is an argument list: ``["bash", "-lc", "ls"]``."""
_ARGUMENT_LIST = r'"(?:command|cmd)"\s*:\s*\[\s*(?:"(?:[^"\\]|\\.)*"\s*,?\s*)*\]'


def json_commands(arguments: pl.Expr) -> pl.Expr:
    """The shell commands in tool-call ``arguments`` (a list per row): each string value of
    :data:`COMMAND_KEYS` but an editor's verb (:data:`EDITOR_VERBS`), and each argument list
    (Codex's ``{"command": ["powershell.exe", "-NoLogo", "-Command", "Get-ChildItem"]}``) as the
    script it hands its shell (``Get-ChildItem``), else its words joined."""
    said = json_values(arguments, COMMAND_KEYS).list.eval(
        pl.element().filter(~pl.element().str.contains(EDITOR_VERBS))
    )
    lists = arguments.str.extract_all(_ARGUMENT_LIST).list.eval(
        pl.element().str.replace(r'^"[^"]*"\s*:\s*', "").str.json_decode(pl.List(pl.String))
    )
    word = pl.element().list
    script = (
        pl.when((word.len() >= 3) & word.get(-2, null_on_oob=True).is_in(SHELL_FLAGS))
        .then(word.last())
        .otherwise(word.join(" "))
    )
    return pl.concat_list(said.fill_null([]), lists.list.eval(script).fill_null([])).list.eval(
        pl.element().filter(pl.element().is_not_null() & (pl.element() != ""))
    )


NOT_PATHS = (
    r"^\d+(?:/\d+)+$"  # dates and ratios: 12/2/2025, 3/4
    r"|^[A-Z][A-Za-z0-9]*\.js$"  # Node.js, Vue.js: names of tools, not files
    r"|^[A-Za-z0-9@+~]+(?:/[A-Za-z0-9@+~]+)+$"  # words with slashes: pros/cons, P1/P2/P3
    r"|^/dev/(?:null|tty|zero|u?random|std(?:in|out|err))$"  # 2>/dev/null: a sink, no file
)
"""Path-like tokens that are not paths: dates and ratios, ``Name.js`` tool names, devices
(``/dev/null``) and slash-separated plain words (no root, no extension, no ``_``, ``-`` or
``.`` in any part: a relative folder named only by plain words is dropped too, for
precision)."""
DIFF_PREFIX = r"^[ab]/(\S+/\S+|\S+\.[A-Za-z0-9]{1,8})$"
"""git diff's ``a/`` and ``b/`` before a path: the path is what follows."""
EVIDENT = (
    r"(?:^|/)\.?[^/.][^/]*\.(?:[A-Za-z]|[0-9][A-Za-z]|[0-9]{2}[A-Za-z])[A-Za-z0-9]{0,7}$"  # x.py
    r"|^\.{1,2}/|^~/|^[A-Za-z]:/"  # ./x, ../x, ~/x, g:/x
    r"|^\.[A-Za-z0-9_-]|^[^/].*/\.[A-Za-z0-9_-]"  # a hidden file or folder: .github/CODEOWNERS
    r"|^/(?:Users|home|root|tmp|var|etc|usr|opt|private|Volumes|workspace|mnt|srv|bin|sbin"
    r"|lib|lib64|dev|proc|sys|run|nix|app|data)/"  # under a root every machine has
)
"""What makes a path found in text a path by itself: an extension (a short one, with a
letter: not ``/rest/api/1.0``, not Go's ``pkg/id.MustCheckpointID``), ``./``, ``../``, ``~/``,
a drive, a hidden file or folder of a relative path (``.github/CODEOWNERS``; not
``/repository/files/.env/raw``, a web route) or a well-known root. Without it
(``origin/feat/x``, ``/api/users/list``, ``github.com/org/mod/v5``), a path needs a path of its
head that has it, under it."""
NOT_IN_PATHS = (
    r"[^\s\"'`]*\.\.\.[^\s\"'`]*"  # an elision: diff --stat's .../cli/x.go, G:\\H...v.log
    r"|\$\{?\w+\}?/\S*"  # ${PROJECT_DIR}/cmd/main.go: where it is depends on the variable
)
"""Text that is no path though it looks like one (or a piece of one): taken out before paths
are read."""
_AT_ROOT = r"^@(/)"
"""curl's ``-d @/tmp/body.json``: the ``@`` is no part of the path."""
_NAME = r"[\w.@+-]"
_BACKSLASH_DEPTH = 8
"""Windows separators turned into ``/``, one per pass: folders deeper than this keep the rest."""


def readable(text: pl.Expr) -> pl.Expr:
    """``text`` as its reader saw it: a tool result stored as the JSON object
    ``{"output": ...}`` (Codex 0.58's shell results) is that output, decoded, so that its
    ``\\r\\n`` escapes are line breaks and not letters glued to the next word."""
    decoded = text.str.json_path_match("$.output")
    return (
        pl.when(text.str.starts_with('{"output"')).then(pl.coalesce(decoded, text)).otherwise(text)
    )


def forward_slashes(text: pl.Expr) -> pl.Expr:
    """Windows paths written with ``/``: a drive's path (``G:\\repo\\src``) and a relative path
    that ends in a known extension (``src\\gen\\about.py``); a backslash elsewhere (an escape in
    code, ``\\n``) is left alone."""
    out = text.str.replace_all(r"(^|[^\w])([A-Za-z]):\\", "$1$2:/")
    for _ in range(_BACKSLASH_DEPTH):
        out = out.str.replace_all(rf"([A-Za-z]:/(?:{_NAME}+/)*{_NAME}+)\\({_NAME})", "$1/$2")
    for _ in range(_BACKSLASH_DEPTH):
        out = out.str.replace_all(
            rf"({_NAME})\\({_NAME}+(?:[\\/]{_NAME}+)*\.(?:{_EXT})\b)", "$1/$2"
        )
    return out


def text_paths(text: pl.Expr) -> pl.Expr:
    """Path-like tokens in ``text`` (a list per row); URLs, dates, ``Name.js``, slash-separated
    words, method calls (``console.log(``) and :data:`NOT_IN_PATHS` are not paths, and a diff's
    ``a/``/``b/`` prefix (curl's ``@``) is not part of one. A tool result stored as JSON is read
    decoded (:func:`readable`); Windows paths (:data:`WINDOWS_PATHS`) come with ``/``
    (``g:/repo/src/x.rs``), after the others of the text."""
    rest, windows = readable(text), []
    for pattern in WINDOWS_PATHS:
        windows.append(rest.str.extract_all(pattern))
        rest = rest.str.replace_all(pattern, " ")
    spelt = (
        pl.concat_list(windows).list.eval(pl.element().str.replace_all(r"\\+", "/")).list.join(" ")
    )
    path = pl.element().str.replace(DIFF_PREFIX, "$1").str.replace(_AT_ROOT, "$1")
    return pl.concat_list(
        _readable_paths(rest).str.extract_all(PATH_PATTERN),
        _readable_paths(spelt).str.extract_all(_DRIVE_PATH),
    ).list.eval(path.filter(~path.str.contains(NOT_PATHS)))


def _readable_paths(text: pl.Expr) -> pl.Expr:
    """``text`` without what only looks like paths: URLs, :data:`NOT_IN_PATHS`, method calls."""
    return (
        text.str.replace_all(r"[A-Za-z][A-Za-z0-9+.-]*://\S*", " ")
        .str.replace_all(NOT_IN_PATHS, " ")
        .str.replace_all(rf"(\w)\.(?:{_EXT})\(", "$1(")  # a method call: console.log(, x.lock(
    )


def prompt_commands(text: pl.Expr) -> pl.Expr:
    """The commands ``text`` shows run after a ``$`` prompt (a list per row)."""
    return (
        readable(text)
        .str.extract_all(PROMPT_COMMANDS)
        .list.eval(pl.element().str.replace(PROMPT_COMMANDS, "$1"))
    )


def error_lines(text: pl.Expr) -> pl.Expr:
    """Error lines in ``text`` (a list per row), surrounding whitespace stripped; a tool result
    stored as JSON is read decoded, so a line ends where its output's line did, and a field
    of code named ``error`` is no error line (:data:`NOT_ERRORS`). A tool result that is a JSON
    object reports its ``error`` (OpenHands' ``{"kind": ..., "error": "No replacement was
    performed, ..."}``): the first line of it is one."""
    line = pl.element().str.strip_chars()
    said = (
        readable(text)
        .str.extract_all(ERROR_PATTERN)
        .list.eval(line.filter(~line.str.contains(NOT_ERRORS)))
    )
    reported = (
        pl.when(text.str.starts_with("{"))
        .then(json_values(text, ("error",)))
        .list.eval(pl.element().str.split("\n").list.first().str.strip_chars())
    )
    return pl.concat_list(said.fill_null([]), reported.fill_null([])).list.eval(
        pl.element().filter(pl.element().is_not_null() & (pl.element() != ""))
    )


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
    artifacts of each compaction's summarised head, in head order. A path found in text needs
    evidence (:data:`EVIDENT`, or a file or folder of that head's other paths lies under it);
    a tool call's path argument is evidence itself."""
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
            text_path=text_paths(pl.col("content")).fill_null([]),
            argument_path=json_values(pl.col("arguments"), PATH_KEYS).fill_null([]),
            command=pl.concat_list(
                json_commands(pl.col("arguments")).fill_null([]),
                prompt_commands(pl.col("content")).fill_null([]),
            ),
            error=error_lines(pl.col("content")),
        )
        .with_columns(
            path=pl.concat_list("text_path", "argument_path"),
            evident=pl.concat_list(
                pl.col("text_path").list.eval(pl.element().str.contains(EVIDENT)),
                pl.col("argument_path").list.eval(pl.element().is_not_null()),
            ),
        )
        .collect()
        .lazy()
    )
    paths = (
        head.select("session_id", "compaction_id", artifact="path", evident="evident")
        .filter(pl.col("artifact").list.len() > 0)
        .explode("artifact", "evident")
        .filter(pl.col("artifact").is_not_null() & (pl.col("artifact") != ""))
    )
    found = [
        paths.pipe(_evidenced).select(
            "session_id", "compaction_id", "artifact", kind=pl.lit("path")
        ),
        *(
            head.select("session_id", "compaction_id", kind=pl.lit(kind), artifact=kind)
            .filter(pl.col("artifact").list.len() > 0)
            .explode("artifact")
            for kind in ("command", "error")
        ),
    ]
    return (
        pl.concat(found, how="diagonal")
        .select("session_id", "compaction_id", "kind", "artifact")
        .filter(pl.col("artifact").is_not_null() & (pl.col("artifact") != ""))
        .unique(subset=["compaction_id", "kind", "artifact"], keep="first", maintain_order=True)
        .collect()
    )


def _evidenced(paths: pl.LazyFrame) -> pl.LazyFrame:
    """``paths`` (compaction_id, artifact, evident) without the ones that lack evidence: a
    path that is not :data:`EVIDENT` stays when an evident path of its compaction lies under it
    (``src-tauri/src/alden`` beside ``g:/repo/src-tauri/src/alden/chat.rs``; two doubtful paths
    do not vouch for each other). A branch
    (``origin/feat/x``), a Go import path or a web route (``/api/users/list``) has none."""
    folder = pl.col("artifact").str.strip_chars_start("/")
    doubtful = paths.filter(~pl.col("evident")).select("compaction_id", folder=folder).unique()
    others = paths.filter("evident").select("compaction_id", other="artifact").unique()
    under = (
        doubtful.join(others, on="compaction_id")
        .filter(
            pl.col("other").str.starts_with(pl.concat_str("folder", pl.lit("/")))
            | pl.col("other").str.contains(
                pl.concat_str(pl.lit("/"), "folder", pl.lit("/")), literal=True
            )
        )
        .select("compaction_id", "folder", under=pl.lit(value=True))
        .unique()
    )
    return (
        paths.with_columns(folder=folder)
        .join(under, on=["compaction_id", "folder"], how="left", maintain_order="left")
        .filter(pl.col("evident") | pl.col("under").fill_null(value=False))
    )


def view_parts(
    compaction_views: pl.DataFrame, messages: pl.DataFrame, synthetic: pl.DataFrame
) -> pl.LazyFrame:
    """compaction_id, text: the parts of each compacted view (the messages the compaction
    created, and the content and tool-call arguments of the messages it kept, the arguments'
    commands and paths also as plain text: a command with quotes is ``"`` there, not ``\\"``)."""
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
            text=pl.concat_str(
                "content",
                "arguments",
                pl.concat_list(
                    json_commands(pl.col("arguments")).fill_null([]),
                    json_values(pl.col("arguments"), PATH_KEYS).fill_null([]),
                ).list.join("\n"),
                separator="\n",
                ignore_nulls=True,
            ),
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
