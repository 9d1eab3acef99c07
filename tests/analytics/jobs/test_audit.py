"""The audit of a harness's own compaction on hand-built frames, answers written by hand.

Session s: the task names ``/home/u/proj/src/cache.py``; the agent reads it, runs the tests
(which fail with a KeyError), the user adds a request; the harness then compacts all six
messages into a summary that names ``src/cache.py``, the test command and the user's request,
but not the failure. After it, the agent reads the file again, cats the README (never read
before) and runs the tests again.
"""

from __future__ import annotations

import json

import polars as pl

from analytics.jobs.artifacts import head_artifacts
from analytics.jobs.audit import (
    again_after,
    artifacts_kept,
    boundaries,
    needles,
    reads_and_runs,
    user_messages_kept,
)
from analytics.jobs.file_forms import working_dirs

FILE = "/home/u/proj/src/cache.py"
TESTS = "pytest -x tests/test_cache.py"
FAILURE = "FAILED tests/test_cache.py::test_get - KeyError: 'k'"
SUMMARY = (
    "Primary Request: fix the cache bug in src/cache.py.\n"
    f"Ran {TESTS}.\nAll user messages: Also keep the API stable"
)


def _call(name: str, **args: str) -> str:
    return json.dumps([{"id": f"c-{name}", "name": name, "arguments": json.dumps(args)}])


def _messages() -> pl.DataFrame:
    rows = [
        ("user", f"Fix the cache bug in {FILE}", None, None),
        ("assistant", "Reading it.", _call("Read", file_path=FILE), None),
        ("tool", "def get(key): return cache[key]", None, "c-Read"),
        ("assistant", "Running the tests.", _call("Bash", command=TESTS), None),
        ("tool", FAILURE, None, "c-Bash"),
        ("user", "Also keep   the API stable", None, None),
        ("assistant", "Reading it again.", _call("Read", file_path=FILE), None),
        ("tool", "def get(key): return cache[key]", None, "c-Read"),
        ("assistant", "And the readme.", _call("Bash", command="cat README.md"), None),
        ("assistant", "Tests again.", _call("Bash", command=TESTS), None),
    ]
    return pl.DataFrame(
        {
            "session_id": ["s"] * len(rows),
            "idx": list(range(len(rows))),
            "role": [r[0] for r in rows],
            "content": [r[1] for r in rows],
            "tool_calls": [r[2] for r in rows],
            "tool_call_id": [r[3] for r in rows],
        },
        schema_overrides={"tool_calls": pl.String, "tool_call_id": pl.String},
    )


def _frames() -> dict[str, pl.DataFrame]:
    before = [("before", i, i, "summarized") for i in range(6)]
    views = pl.DataFrame(
        {
            "compaction_id": ["n1"] * 7,
            "session_id": ["s"] * 7,
            "side": [b[0] for b in before] + ["after"],
            "position": [b[1] for b in before] + [0],
            "history_index": [b[2] for b in before] + [None],
            "status": [b[3] for b in before] + ["synthetic"],
        },
        schema_overrides={"history_index": pl.Int64},
    )
    compactions = pl.DataFrame(
        {
            "id": ["n1"],
            "session_id": ["s"],
            "seq": [7],
            "tier": [3],
            "effective": [True],
            "origin": ["native"],
        }
    )
    synthetic = pl.DataFrame({"compaction_id": ["n1"], "session_id": ["s"], "content": [SUMMARY]})
    return {"views": views, "compactions": compactions, "synthetic": synthetic}


def test_a_compaction_starts_where_its_before_view_ends_and_lasts_to_the_next() -> None:
    f = _frames()
    bounds = boundaries(f["compactions"], f["views"])
    assert bounds.select("compaction_id", "origin", "at", "until").rows() == [
        ("n1", "native", 6, None)
    ]


def test_a_path_the_summary_names_by_its_tail_is_kept_and_a_dropped_failure_is_lost() -> None:
    f = _frames()
    bounds = boundaries(f["compactions"], f["views"])
    found = artifacts_kept(f["views"], _messages(), f["synthetic"], bounds)
    kept = {(r["kind"], r["artifact"]): r["kept"] for r in found.iter_rows(named=True)}
    assert kept[("path", FILE)] is True  # the summary says src/cache.py
    assert kept[("command", TESTS)] is True
    assert kept[("error", FAILURE)] is False


def test_a_file_name_names_a_path_only_when_no_other_artifact_has_it() -> None:
    one = pl.DataFrame({"compaction_id": ["c"], "kind": ["path"], "artifact": ["/a/b/cache.py"]})
    named = set(needles(one)["needle"].to_list())
    assert named == {"/a/b/cache.py", "a/b/cache.py", "b/cache.py", "cache.py"}
    two = pl.DataFrame(
        {
            "compaction_id": ["c", "c"],
            "kind": ["path"] * 2,
            "artifact": ["/a/cache.py", "x/cache.py"],
        }
    )
    assert "cache.py" not in set(needles(two)["needle"].to_list())


def test_user_messages_are_kept_only_verbatim() -> None:
    f = _frames()
    bounds = boundaries(f["compactions"], f["views"])
    users = user_messages_kept(f["views"], _messages(), f["synthetic"], bounds)
    assert users.select("history_index", "kept").rows() == [(0, False), (5, True)]


def test_files_read_and_commands_run_again_after_the_compaction() -> None:
    f = _frames()
    bounds = boundaries(f["compactions"], f["views"])
    actions = reads_and_runs(_messages())
    assert sorted(actions.select("idx", "kind", "target").rows()) == [
        (1, "read", FILE),
        (3, "run", TESTS),
        (6, "read", FILE),
        (8, "read", "README.md"),
        (8, "run", "cat README.md"),
        (9, "run", TESTS),
    ]
    again = again_after(bounds, actions)
    assert again.select("kind", "target").rows() == [("read", FILE), ("run", TESTS)]


def test_reading_stops_counting_at_the_next_compaction_of_the_same_origin() -> None:
    f = _frames()
    second = pl.DataFrame(
        {
            "compaction_id": ["n2"] * 8,
            "session_id": ["s"] * 8,
            "side": ["before"] * 8,
            "position": list(range(8)),
            "history_index": list(range(8)),
            "status": ["summarized"] * 8,
        }
    )
    views = pl.concat([f["views"], second])
    compactions = pl.concat(
        [f["compactions"], f["compactions"].with_columns(id=pl.lit("n2"), seq=pl.lit(20, pl.Int64))]
    )
    bounds = boundaries(compactions, views)
    assert bounds.select("compaction_id", "at", "until").rows() == [("n1", 6, 8), ("n2", 8, None)]
    again = again_after(bounds, reads_and_runs(_messages()))
    # n1 ends at 8: its re-read (6) counts, the re-run (9) falls after n2's boundary
    assert again.filter(pl.col("compaction_id") == "n1")["target"].to_list() == [FILE]


def _head(texts: list[str], summary: str, sid: str = "s") -> dict[str, pl.DataFrame]:
    """One compaction ``c`` of session ``sid`` whose head is ``texts`` (user messages) and
    whose view is ``summary``."""
    n = len(texts)
    messages = pl.DataFrame(
        {
            "session_id": [sid] * n,
            "idx": list(range(n)),
            "role": ["user"] * n,
            "content": texts,
            "tool_calls": [None] * n,
            "tool_call_id": [None] * n,
        },
        schema_overrides={"tool_calls": pl.String, "tool_call_id": pl.String},
    )
    views = pl.DataFrame(
        {
            "compaction_id": ["c"] * (n + 1),
            "session_id": [sid] * (n + 1),
            "side": ["before"] * n + ["after"],
            "position": [*range(n), 0],
            "history_index": [*range(n), None],
            "status": ["summarized"] * n + ["synthetic"],
        },
        schema_overrides={"history_index": pl.Int64},
    )
    synthetic = pl.DataFrame({"compaction_id": ["c"], "session_id": [sid], "content": [summary]})
    targets = pl.DataFrame({"compaction_id": ["c"]})
    return {"messages": messages, "views": views, "synthetic": synthetic, "targets": targets}


def _kept(
    texts: list[str], summary: str, dirs: pl.DataFrame | None = None
) -> dict[str, tuple[bool, list[str]]]:
    f = _head(texts, summary)
    rows = artifacts_kept(f["views"], f["messages"], f["synthetic"], f["targets"], dirs)
    return {r["artifact"]: (r["kept"], r["forms"]) for r in rows.iter_rows(named=True)}


CWD = pl.DataFrame({"session_id": ["s"], "cwd": ["/Users/u/cli"]})


def test_the_forms_of_one_file_are_one_artifact_resolved_against_the_working_directory() -> None:
    found = _kept(
        [
            "Read /Users/u/cli/cmd/entire/config.go and cmd/entire/config.go",
            "then ./cmd/entire/config.go; config.go again; also .worktrees/t/cmd/entire/run.go",
            "and cmd/entire/run.go, which is /Users/u/cli/cmd/entire/run.go",
        ],
        "Fixed `cmd/entire/config.go`.",
        CWD,
    )
    assert found == {
        "/Users/u/cli/cmd/entire/config.go": (
            True,
            [
                "/Users/u/cli/cmd/entire/config.go",
                "cmd/entire/config.go",
                "./cmd/entire/config.go",
                "config.go",
            ],
        ),
        # two files: the worktree's, and the checkout's that the working directory resolves to
        ".worktrees/t/cmd/entire/run.go": (False, [".worktrees/t/cmd/entire/run.go"]),
        "/Users/u/cli/cmd/entire/run.go": (
            False,
            ["cmd/entire/run.go", "/Users/u/cli/cmd/entire/run.go"],
        ),
    }


def test_without_a_recorded_directory_it_is_inferred_from_the_paths() -> None:
    texts = ["/home/u/p/src/a.py, /home/u/p/lib/b.py, src/a.py and lib/b.py"]
    f = _head(texts, "")
    found = head_artifacts(f["views"], f["messages"])
    assert working_dirs(found).rows() == [("s", "/home/u/p", "inferred")]
    recorded = pl.DataFrame({"session_id": ["s"], "cwd": ["g:\\Repo\\"]})
    assert working_dirs(found, recorded).rows() == [("s", "g:/Repo", "recorded")]
    assert set(_kept(texts, "")) == {"/home/u/p/src/a.py", "/home/u/p/lib/b.py"}


def test_a_path_said_from_a_sub_folder_is_the_one_file_it_is_a_tail_of() -> None:
    found = _kept(["cmd/cli/checkpoint/id.go and checkpoint/id.go"], "", CWD)
    assert list(found) == ["cmd/cli/checkpoint/id.go"]


def test_an_agent_working_in_another_repository_than_its_cwd_still_has_one_file_per_path() -> None:
    # the session started in /Users/u/cli, the agent read and edited files of /Users/u/other
    texts = [
        "Read /Users/u/other/src/authorship/post_commit.rs, then src/authorship/post_commit.rs, "
        "authorship/post_commit.rs and post_commit.rs"
    ]
    found = _kept(texts, "", CWD)
    assert list(found) == ["/Users/u/other/src/authorship/post_commit.rs"]
    assert sorted(found["/Users/u/other/src/authorship/post_commit.rs"][1]) == sorted(
        [
            "/Users/u/other/src/authorship/post_commit.rs",
            "src/authorship/post_commit.rs",
            "authorship/post_commit.rs",
            "post_commit.rs",
        ]
    )


def test_a_file_name_two_files_share_stays_apart_and_names_neither() -> None:
    found = _kept(["src/a/util.py, src/b/util.py and util.py"], "Edited util.py")
    assert found == {
        "src/a/util.py": (False, ["src/a/util.py"]),
        "src/b/util.py": (False, ["src/b/util.py"]),
        "util.py": (True, ["util.py"]),  # said as such: the summary gives it whole
    }


def test_a_name_counts_whole_and_a_tail_only_as_a_path_of_its_own() -> None:
    texts = ["Read /x/src/gen/bad.py and /y/other/gen/bad.py and /z/cache.py"]
    found = _kept(texts, "See src/gen/bad.py, mycache.py and lib/other/gen/bad.py")
    assert {a: kept for a, (kept, _) in found.items()} == {
        "/x/src/gen/bad.py": True,  # its tail src/gen/bad.py
        "/y/other/gen/bad.py": False,  # other/gen/bad.py only at the end of a longer path
        "/z/cache.py": False,  # not inside mycache.py
    }


def test_brace_lists_and_windows_separators_in_the_view_name_their_files() -> None:
    texts = ["Read svc/gitlab/repos.py, svc/gitlab/prs.py and src/win/gen/about.py"]
    found = _kept(texts, "Touched svc/gitlab/{repos.py, prs.py} and src\\win\\gen\\about.py")
    assert all(kept for kept, _ in found.values()), found


def test_a_codex_argument_list_is_a_command_run() -> None:
    call = json.dumps(
        [
            {
                "id": "c1",
                "name": "shell",
                "arguments": json.dumps({"command": ["bash", "-lc", "pytest -x"]}),
            }
        ]
    )
    messages = pl.DataFrame(
        {
            "session_id": ["s"],
            "idx": [0],
            "role": ["assistant"],
            "content": [""],
            "tool_calls": [call],
        }
    )
    assert reads_and_runs(messages).select("kind", "target").rows() == [("run", "pytest -x")]
