"""Artifact retention on hand-built store frames whose answers are written as literals."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from analytics.jobs.artifacts import (
    artifact_detail,
    artifact_losses,
    artifact_retention,
    error_lines,
    head_artifacts,
    json_commands,
    overall_artifact_retention,
    prompt_commands,
    session_artifact_retention,
    text_paths,
)

BASH_TESTS = json.dumps(
    [
        {
            "id": "call_1",
            "name": "bash",
            "arguments": json.dumps({"command": "pytest -x tests/test_cache.py"}),
        }
    ]
)
HEAD = [
    "Fix the stale entries",  # no artifact
    "Looking at src/cache.py first.",
    None,  # the assistant's tool call: content-less, the command is in its arguments
    "E   KeyError: 'user'\n1 failed in 0.2s",
]


@dataclass
class Store:
    """The frames of the store (column names as in analytics/store_sql.py), built row by row."""

    sessions: list[tuple[str, str]] = field(default_factory=list)
    compactions: list[tuple[str, str, int, bool, int]] = field(default_factory=list)
    messages: list[tuple[str, int, str | None, str | None]] = field(default_factory=list)
    views: list[tuple[str, str, str, int, int | None, str]] = field(default_factory=list)
    synthetic: list[tuple[str, str, str | None]] = field(default_factory=list)

    def session(self, sid: str, contents: list[str | None], capture: str = "full") -> None:
        self.sessions.append((sid, capture))
        for idx, content in enumerate(contents):
            calls = BASH_TESTS if content is None and capture == "full" else None
            text = content if capture == "full" else None
            self.messages.append((sid, idx, text, calls))

    def compaction(
        self,
        cid: str,
        sid: str,
        seq: int,
        summarized: list[int],
        kept: list[int],
        created: list[str | None],
        effective: bool = True,
    ) -> None:
        self.compactions.append((cid, sid, seq, effective, len(summarized)))
        for pos, idx in enumerate(summarized):
            self.views.append((cid, sid, "before", pos, idx, "summarized"))
        for pos, idx in enumerate(kept, start=len(summarized)):
            self.views.append((cid, sid, "before", pos, idx, "kept"))
        for pos, text in enumerate(created):
            self.views.append((cid, sid, "after", pos, None, "synthetic"))
            self.synthetic.append((cid, sid, text))
        for pos, idx in enumerate(kept, start=len(created)):
            self.views.append((cid, sid, "after", pos, idx, "kept"))

    def frames(self) -> dict[str, pl.DataFrame]:
        return {
            "compactions": pl.DataFrame(
                self.compactions,
                schema={
                    "id": pl.String,
                    "session_id": pl.String,
                    "seq": pl.Int64,
                    "effective": pl.Boolean,
                    "summarized": pl.Int64,
                },
                orient="row",
            ),
            "compaction_views": pl.DataFrame(
                self.views,
                schema={
                    "compaction_id": pl.String,
                    "session_id": pl.String,
                    "side": pl.String,
                    "position": pl.Int64,
                    "history_index": pl.Int64,
                    "status": pl.String,
                },
                orient="row",
            ),
            "messages": pl.DataFrame(
                self.messages,
                schema={
                    "session_id": pl.String,
                    "idx": pl.Int64,
                    "content": pl.String,
                    "tool_calls": pl.String,
                },
                orient="row",
            ),
            "synthetic": pl.DataFrame(
                self.synthetic,
                schema={"compaction_id": pl.String, "session_id": pl.String, "content": pl.String},
                orient="row",
            ),
            "sessions": pl.DataFrame(
                [(sid, capture, None) for sid, capture in self.sessions],
                schema={
                    "session_id": pl.String,
                    "capture": pl.String,
                    "deleted_at": pl.Datetime("us", "UTC"),
                },
                orient="row",
            ),
        }


def run(store: Store) -> tuple[pl.DataFrame, pl.DataFrame]:
    f = store.frames()
    detail = artifact_detail(
        f["compactions"], f["compaction_views"], f["messages"], f["synthetic"], f["sessions"]
    )
    return detail, artifact_retention(f["compactions"], f["sessions"], detail)


def cache_session(store: Store, sid: str = "s1", capture: str = "full") -> None:
    """A head with src/cache.py, the pytest command and a KeyError; the compaction message
    mentions only the path; the last message is kept."""
    store.session(sid, [*HEAD, "Now editing the invalidation"], capture)
    store.compaction(
        f"{sid}-c1",
        sid,
        7,
        summarized=[0, 1, 2, 3],
        kept=[4],
        created=["[Context Compaction]\n## Summary\n~~~\nEdited src/cache.py.\n~~~"],
    )


def test_a_summary_that_keeps_only_the_path_retains_one_artifact_in_three() -> None:
    store = Store()
    cache_session(store)
    detail, per_compaction = run(store)
    assert per_compaction.rows() == [("s1", "s1-c1", 7, 3, 1, 1 / 3, False)]
    assert artifact_losses(detail).to_dicts() == [
        {
            "session_id": "s1",
            "compaction_id": "s1-c1",
            "kind": "command",
            "artifact": "pytest -x tests/test_cache.py",
        },
        {
            "session_id": "s1",
            "compaction_id": "s1-c1",
            "kind": "error",
            "artifact": "KeyError: 'user'",
        },
    ]


def test_artifacts_come_in_head_order_on_every_run() -> None:
    """Polars' engine may run a join in parallel and hand rows back in another order; the
    detail is in head order (paths, commands, errors) every time, not most times. The old
    code flipped in about 1 run in 40, so 300 runs catch it all but about once in 2,000."""
    store = Store()
    cache_session(store)
    orders = {tuple(run(store)[0]["kind"]) for _ in range(300)}
    assert orders == {("path", "command", "error")}


def test_a_metadata_session_says_no_content_instead_of_zero() -> None:
    store = Store()
    cache_session(store, "m1", capture="metadata")
    detail, per_compaction = run(store)
    assert detail.height == 0
    assert per_compaction.rows() == [("m1", "m1-c1", 7, None, None, None, True)]
    assert session_artifact_retention(per_compaction).rows() == [("m1", 1, None, None, None, True)]


def test_session_rate_pools_its_compactions_and_overall_skips_metadata_sessions() -> None:
    store = Store()
    cache_session(store)
    store.compaction(
        "s1-c2",
        "s1",
        12,
        summarized=[4],
        kept=[],
        created=["Summary: we ran `pytest -x tests/test_cache.py` and fixed KeyError: 'user'"],
    )
    store.messages[4] = ("s1", 4, "Edit core/db.py and ./scripts/reset.sh", None)
    cache_session(store, "m1", capture="metadata")
    _detail, per_compaction = run(store)
    assert per_compaction.select("compaction_id", "artifacts", "retained").rows() == [
        ("m1-c1", None, None),
        ("s1-c1", 3, 1),
        ("s1-c2", 2, 0),
    ]
    assert session_artifact_retention(per_compaction).rows() == [
        ("m1", 1, None, None, None, True),
        ("s1", 2, 5, 1, 0.2, False),
    ]
    assert overall_artifact_retention(per_compaction).to_dicts() == [
        {"rate": 0.2, "lost": 4, "sessions": 1, "no_content_sessions": 1}
    ]


def test_kept_messages_and_offload_references_count_as_present() -> None:
    store = Store()
    store.session("s1", ["Read docs/design.md and core/models.py", "see core/models.py"])
    store.compaction(
        "c1",
        "s1",
        3,
        summarized=[0],
        kept=[1],
        created=["- .compactlens/offload/s1/docs/design.md (40 lines) - read result"],
    )
    detail, _ = run(store)
    assert sorted(detail.select("artifact", "retained").rows()) == [
        ("core/models.py", True),
        ("docs/design.md", True),
    ]


def test_a_basename_alone_does_not_retain_a_path() -> None:
    store = Store()
    store.session("s1", ["The bug is in services/billing.py"])
    store.compaction("c1", "s1", 3, summarized=[0], kept=[], created=["Fixed billing.py"])
    detail, per_compaction = run(store)
    assert detail.select("artifact", "retained").rows() == [("services/billing.py", False)]
    assert per_compaction["rate"].to_list() == [0.0]


def test_no_ops_and_compactions_that_summarised_nothing_are_not_counted() -> None:
    store = Store()
    cache_session(store)
    store.compaction("noop", "s1", 9, summarized=[0, 1], kept=[], created=[], effective=False)
    store.compaction("offload-only", "s1", 10, summarized=[], kept=[4], created=[])
    _detail, per_compaction = run(store)
    assert per_compaction["compaction_id"].to_list() == ["s1-c1"]


def test_a_head_without_artifacts_has_a_null_rate_not_zero() -> None:
    store = Store()
    store.session("s1", ["hello", "thanks"])
    store.compaction("c1", "s1", 3, summarized=[0], kept=[1], created=["Summary: greetings"])
    _detail, per_compaction = run(store)
    assert per_compaction.rows() == [("s1", "c1", 3, 0, 0, None, False)]


def test_head_artifacts_come_from_text_and_tool_call_arguments() -> None:
    calls = json.dumps(
        [
            {
                "id": "a",
                "name": "edit",
                "arguments": json.dumps({"file_path": "README", "old": "x"}),
            },
            {"id": "b", "name": "sh", "arguments": json.dumps({"cmd": 'grep -n "TODO" .'})},
            {"id": "c", "name": "broken", "arguments": '{"command": '},
        ]
    )
    messages = pl.DataFrame(
        {
            "session_id": ["s"],
            "idx": [0],
            "content": ["error: linker failed"],
            "tool_calls": [calls],
        }
    )
    views = pl.DataFrame(
        {
            "compaction_id": ["c"],
            "session_id": ["s"],
            "side": ["before"],
            "position": [0],
            "history_index": [0],
            "status": ["summarized"],
        }
    )
    assert head_artifacts(views, messages).select("kind", "artifact").rows() == [
        ("path", "README"),
        ("command", 'grep -n "TODO" .'),
        ("error", "error: linker failed"),
    ]


def test_paths_and_error_lines_found_in_text() -> None:
    text = (
        "Edit src/cache.py, then ./run.sh and src/my_pkg/util. Not and/or, 1/2 or "
        "https://example.com/a/b; setup.py too. Not 12/2/2025, P1/P2/P3, pros/cons/effort, "
        "Small/Medium/Large or Node.js; diff --git a/lib/io.go b/lib/io.go\n"
        "KeyError: 'user'\nerror: cannot find module\n"
        "FAILED tests/test_cache.py::test_write - AssertionError\n"
    )
    found = pl.DataFrame({"t": [text]}).select(
        paths=text_paths(pl.col("t")), errors=error_lines(pl.col("t"))
    )
    assert found.row(0) == (
        [
            "src/cache.py",
            "./run.sh",
            "src/my_pkg/util",
            "setup.py",
            "lib/io.go",  # a diff's a/ and b/ are no part of the path
            "lib/io.go",
            "tests/test_cache.py",
        ],
        [
            "KeyError: 'user'",
            "error: cannot find module",
            "FAILED tests/test_cache.py::test_write - AssertionError",
        ],
    )


def test_empty_inputs_give_empty_outputs_with_their_columns() -> None:
    detail, per_compaction = run(Store())
    assert detail.columns == ["session_id", "compaction_id", "kind", "artifact", "retained"]
    assert per_compaction.columns == [
        "session_id",
        "compaction_id",
        "compaction_seq",
        "artifacts",
        "retained",
        "rate",
        "no_content",
    ]
    assert per_compaction.height == 0
    assert artifact_losses(detail).columns == ["session_id", "compaction_id", "kind", "artifact"]
    assert session_artifact_retention(per_compaction).height == 0
    assert overall_artifact_retention(per_compaction).to_dicts() == [
        {"rate": None, "lost": 0, "sessions": 0, "no_content_sessions": 0}
    ]


def _paths_in(text: str) -> list[str]:
    found: list[str] = pl.DataFrame({"t": [text]}).select(text_paths(pl.col("t"))).row(0)[0]
    return found


def test_windows_paths_come_with_slashes_and_codex_json_results_are_read_decoded() -> None:
    listing = json.dumps(
        {"output": "Directory: G:\\Repo\\src\r\nauth.rs.old\r\nsrc\\gen\\about.py:3: E1\r\n"}
    )
    # Windows paths are read apart, after the others: their \\ is a separator, not an escape
    assert _paths_in(listing) == ["auth.rs.old", "G:/Repo/src", "src/gen/about.py"]


def test_pieces_and_garblings_of_paths_are_not_paths() -> None:
    text = (
        "cmd/cli/a.go | 3 +\n .../cli/strategy/b.go | 4 +\n"  # diff --stat elides the head
        "go run ${PROJECT_DIR}/cmd/main.go; cat x 2>/dev/null; console.log(x); ipc.0.lock()\n"
        'import { A } from "../../contexts/Auth"; see src/bin/../alden/c.rs and .mcp.json\n'
        "Created test directory: /tmp/build_x1\n"
    )
    assert _paths_in(text) == [
        "cmd/cli/a.go",
        "../../contexts/Auth",
        "src/bin/../alden/c.rs",
        ".mcp.json",
        "/tmp/build_x1",
    ]


def test_code_that_names_an_error_is_no_error_line() -> None:
    text = (
        "  error: 'Bridge not initialized',\n  error: e.message || 'failed',\n  error: string;\n"
        "except KeyError:\n    ValueError: If the file is missing\n"
        'GitAiError::Generic("x")\n  log("FAILED - buzzer");\n'
        "error[E0432]: unresolved import `crate::vault`\n"
        "Get-ChildItem : Cannot find path 'G:\\x' because it does not exist.\n"
    )
    result = (
        '{"kind": "StrReplaceEditorObservation", "error": "No replacement was performed\\nmore"}'
    )
    found = pl.DataFrame({"t": [text, result]}).select(error_lines(pl.col("t")))["t"].to_list()
    assert found == [
        [
            "error[E0432]: unresolved import `crate::vault`",
            "Get-ChildItem : Cannot find path 'G:\\x' because it does not exist.",
        ],
        ["No replacement was performed"],
    ]


def test_commands_are_shell_commands_from_arguments_and_prompts() -> None:
    arguments = [
        json.dumps({"command": ["powershell.exe", "-NoLogo", "-Command", "Get-ChildItem"]}),
        json.dumps({"command": ["git", "status"]}),
        json.dumps({"command": "view", "path": "/repo/a.py"}),  # an editor's verb
        json.dumps({"cmd": "ls -la"}),
    ]
    found = pl.DataFrame({"a": arguments}).select(json_commands(pl.col("a")))["a"].to_list()
    assert found == [["Get-ChildItem"], ["git status"], [], ["ls -la"]]
    output = "ok  pkg 0.2s\n[test] $ go test ./...\n$ make lint\nprice: $5\n"
    prompts = pl.DataFrame({"t": [output]}).select(prompt_commands(pl.col("t"))).row(0)[0]
    assert prompts == ["go test ./...", "make lint"]


def test_a_path_without_evidence_needs_a_file_under_it() -> None:
    text = (
        "On branch origin/feat/new-thing; import github.com/org/mod/v5/plumbing; "
        "GET /api/users/list; read src-tauri/src/alden/chat.rs in src-tauri/src/alden"
    )
    messages = pl.DataFrame(
        {"session_id": ["s"], "idx": [0], "content": [text], "tool_calls": [None]},
        schema_overrides={"tool_calls": pl.String},
    )
    views = pl.DataFrame(
        {
            "compaction_id": ["c"],
            "session_id": ["s"],
            "side": ["before"],
            "position": [0],
            "history_index": [0],
            "status": ["summarized"],
        }
    )
    assert head_artifacts(views, messages)["artifact"].to_list() == [
        "src-tauri/src/alden/chat.rs",
        "src-tauri/src/alden",
    ]
