"""The command line on bad input and a bad environment (issue 7, items 7 to 13 and CLI polish).

Every case runs the real CLI (in process, or as a subprocess where a hang or a closed pipe is
the point) on real files in tmp_path and a real DuckDB store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analytics.importers import import_path
from compactor import estimate_tokens
from tests.analytics.cli_helpers import MINI_FILE, SWE_FILE, count, run, subprocess_env
from tests.cli import unwrapped
from tests.transcripts import DEV

TRANSCRIPTS = SWE_FILE.parents[3]
TAU_FILE = TRANSCRIPTS / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"
GOOD_ROWS = ['{"role": "user", "content": "good"}', '{"role": "assistant", "content": "fine"}']


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def _write(path: Path, *rows: str) -> Path:
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def _surrogate_file(tmp_path: Path) -> Path:
    return _write(
        tmp_path / "a-surrogate.jsonl",
        '{"role": "user", "content": "hi \\ud800 there"}',
        '{"role": "assistant", "content": "ok"}',
    )


# ------------------------------------------------------------------ item 7: lone surrogates


def test_a_lone_surrogate_is_one_line_and_the_files_after_it_still_load(
    tmp_path: Path, home: Path
) -> None:
    bad = _surrogate_file(tmp_path)
    good = _write(tmp_path / "b-good.jsonl", *GOOD_ROWS)
    result = run("import", bad, good, "--home", home)
    assert result.exit_code == 1, result.output
    naming = [line for line in result.output.splitlines() if bad.name in line]
    assert len(naming) == 1 and f"{bad}:1:" in naming[0] and "U+FFFD" in naming[0]
    for path in (bad, good):  # every message of both files is stored, none lost
        (session,), _ = import_path(path)
        where = f"WHERE session_id = '{session.session_id}'"
        assert count(home, f"SELECT count(*) FROM messages {where}") == len(session.messages)


def test_replaying_a_file_with_a_lone_surrogate_exits_1_and_records_every_event(
    tmp_path: Path, home: Path
) -> None:
    bad = _surrogate_file(tmp_path)
    result = run("replay", bad, "--window", "16000", "--home", home)
    assert result.exit_code == 1 and f"{bad}:1:" in result.output
    appended = "SELECT count(*) FROM events WHERE type = 'message_appended'"
    assert count(home, appended) == 2
    assert count(home, "SELECT count(*) FROM sessions WHERE source = 'replay'") == 1


# ------------------------------------------------------------------ item 8: FIFOs


def test_import_of_a_folder_with_a_fifo_skips_it_and_does_not_hang(
    tmp_path: Path, home: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    _write(folder / "chat.jsonl", *GOOD_ROWS)
    os.mkfifo(folder / "pipe.jsonl")
    cmd = [sys.executable, "-m", "analytics.cli", "import", str(folder), "--home", str(home)]
    # The timeout is a guard against the hang this test reproduces, not a speed limit.
    done = subprocess.run(cmd, capture_output=True, text=True, env=subprocess_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"skipped: {folder / 'pipe.jsonl'}: not a regular file (a FIFO" in done.stderr
    assert count(home, "SELECT count(*) FROM messages") == len(GOOD_ROWS)


# ------------------------------------------------------------------ item 9: --window


@pytest.mark.parametrize("window", ["0", "-5", "99999999999999999999"])
@pytest.mark.parametrize("command", ["demo", "replay"])
def test_a_window_out_of_range_is_a_usage_error(home: Path, command: str, window: str) -> None:
    args = [MINI_FILE] if command == "replay" else ["--no-serve", "--sessions", "1"]
    result = run(command, *args, "--window", window, "--home", home)
    assert result.exit_code == 2, result.output
    assert "--window" in result.output and "pydantic" not in result.output
    assert not home.exists()


def test_replay_says_when_the_window_is_smaller_than_the_agents_prompt(home: Path) -> None:
    (imported,), _ = import_path(MINI_FILE)
    system = imported.messages[0]
    assert system.role == "system"
    window = estimate_tokens([system]) - 1  # the system prompt alone does not fit
    result = run("replay", MINI_FILE, "--window", str(window), "--home", home)
    assert result.exit_code == 0, result.output
    assert "smaller than the agent's own prompt" in result.output
    (row,) = [r for r in result.output.splitlines() if "│ sessions with a view over" in r]
    assert row.split("│")[-2].strip() == "1"  # the one session replayed


def test_demo_says_when_the_window_is_smaller_than_its_system_prompt(home: Path) -> None:
    result = run("demo", "--window", "20", "--no-serve", "--sessions", "1", "--home", home)
    assert result.exit_code == 0, result.output
    assert "smaller than the agent's own prompt" in result.output


# ------------------------------------------------------------------ item 10: forced formats


def test_forced_aider_format_rejects_a_json_transcript(home: Path) -> None:
    result = run("import", TAU_FILE, "--format", "aider", "--home", home)
    assert result.exit_code == 1
    assert f"rejected: {TAU_FILE}: --format aider" in result.output
    assert count(home, "SELECT count(*) FROM messages") == 0


# ------------------------------------------------------------------ item 11: folder walks


def _mixed_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "transcripts"
    folder.mkdir()
    (folder / "README.md").write_text("# My transcripts\n\nSome notes.\n")
    (folder / "manifest.json").write_text(json.dumps({"files": ["a.traj"], "count": 1}))
    (folder / "a.traj").symlink_to(SWE_FILE)
    return folder


def test_files_in_a_folder_that_are_not_transcripts_are_skipped_and_exit_0(
    tmp_path: Path, home: Path
) -> None:
    folder = _mixed_folder(tmp_path)
    result = run("import", folder, "--home", home)
    assert result.exit_code == 0, result.output
    for name in ("README.md", "manifest.json"):
        assert f"skipped: {folder / name}:" in result.output
    assert "rejected" not in result.output
    (session,), _ = import_path(SWE_FILE)
    assert count(home, "SELECT count(*) FROM messages") == len(session.messages)


def test_a_file_named_on_the_command_line_that_nothing_recognises_is_rejected(
    tmp_path: Path, home: Path
) -> None:
    readme = _mixed_folder(tmp_path) / "README.md"
    result = run("import", readme, SWE_FILE, "--home", home)
    assert result.exit_code == 1
    assert f"rejected: {readme}:" in result.output and "skipped: " not in result.output


def test_a_folder_of_real_transcripts_imports_with_exit_0(home: Path) -> None:
    result = run("import", *DEV, "--home", home)
    assert result.exit_code == 0, result.output
    assert "rejected:" not in result.output


def test_empty_aider_chats_are_not_imported_again(tmp_path: Path, home: Path) -> None:
    chat = tmp_path / "chat.md"
    chat.write_text(
        "# aider chat started at 2024-08-05 19:33:32\n\n"
        "# aider chat started at 2024-08-05 20:00:00\n#### hello\n\nHi there.\n"
    )
    assert run("import", chat, "--home", home).exit_code == 0
    events = count(home, "SELECT count(*) FROM events")
    again = run("import", chat, "--home", home)
    assert again.exit_code == 0
    assert count(home, "SELECT count(*) FROM events") == events
    (row,) = [r for r in again.output.splitlines() if "sessions imported" in r]
    assert row.split("│")[-2].strip() == "0"


# ------------------------------------------------------------------ item 12: messages


def test_nothing_else_was_loaded_is_not_claimed_when_nothing_else_was_given(
    tmp_path: Path, home: Path
) -> None:
    bad = tmp_path / "null.json"
    bad.write_text("null\n")
    alone = run("import", bad, "--home", home)
    assert alone.exit_code == 1
    assert "nothing was loaded" in alone.output and "everything else" not in alone.output
    beside = run("import", bad, SWE_FILE, "--home", home)
    assert "everything else was loaded" in beside.output


@pytest.mark.parametrize("command", ["import", "stats", "ingest", "demo"])
def test_a_home_that_is_a_file_says_so_in_one_line(tmp_path: Path, command: str) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    extra: dict[str, list[str | Path]] = {
        "import": [SWE_FILE],
        "demo": ["--no-serve", "--sessions", "1"],
    }
    args = extra.get(command, [])
    result = run(command, *args, "--home", home)
    assert result.exit_code == 1
    assert result.output.strip() == f"error: --home {home} is a file, not a folder; pass a folder"
    assert home.read_text() == "not a folder"


def test_export_parquet_refuses_an_empty_folder_name(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run("import", SWE_FILE, "--home", home).exit_code == 0
    monkeypatch.chdir(tmp_path)
    result = run("export", "parquet", "", "--home", home)
    assert result.exit_code == 2 and "name the folder" in result.output
    assert not list(tmp_path.glob("*.parquet"))


def test_a_closed_stdout_pipe_ends_quietly(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cmd = [sys.executable, "-m", "analytics.cli", "demo", "--no-serve", "--sessions", "1"]
    proc = subprocess.Popen(
        [*cmd, "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away at once, as `| head -0` would
    err = proc.stderr.read().decode()
    proc.wait(timeout=600)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "BrokenPipe" not in err


# ------------------------------------------------------------------ item 13: demo, unwritable


def test_demo_on_an_unwritable_home_is_one_line_and_exit_1(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    home = blocker / "home"  # under a regular file: no one, root included, can create it
    result = run("demo", "--no-serve", "--sessions", "1", "--home", home)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"{blocker} is a file, not a folder" in lines[0], lines


# ------------------------------------------------------------------ CLI polish


@pytest.mark.parametrize("args", [["ingest", "--help"], ["--help"], ["export", "--help"]])
def test_help_shows_flags_without_a_bool_type(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 0
    assert "--help" in result.output and "<bool>" not in result.output
    if args[0] == "ingest":
        assert "--watch" in result.output


def test_stats_explains_emergencies_and_ratios_and_warns_about_an_unprojected_spool(
    tmp_path: Path, home: Path
) -> None:
    assert run("replay", MINI_FILE, "--window", "4000", "--home", home).exit_code == 0
    other = tmp_path / "other"
    assert run("import", SWE_FILE, "--home", other).exit_code == 0
    (spooled,) = (other / "spool").glob("*.jsonl")
    waiting = home / "spool" / "waiting.jsonl"
    waiting.write_bytes(spooled.read_bytes())
    table = run("stats", "--home", home)
    assert table.exit_code == 0
    assert "truncations" in table.output and "emergency offloads" in table.output
    assert "after/before" in table.output
    assert "not projected yet" in table.output and "compactlens ingest" in table.output
    figures = json.loads(run("stats", "--json", "--home", home).stdout)
    assert figures["unprojected_spool_bytes"] == waiting.stat().st_size
    truncations = count(
        home,
        "SELECT count(*) FROM compactions WHERE tier = 4 AND effective"
        " AND (n_dropped > 0 OR cut > 0)",
    )
    assert figures["emergency"]["truncations"] == truncations


@pytest.mark.parametrize("command", ["postmortem", "retention"])
def test_a_session_id_that_is_not_text_is_a_usage_error_naming_it(
    tmp_path: Path, command: str
) -> None:
    home = tmp_path / "home"
    assert run("replay", SWE_FILE, "--window", "4000", "--home", home).exit_code == 0
    argv: list[str | bytes | Path] = [sys.executable, "-m", "analytics.cli", command]
    argv += [b"run-\xff\xfe", "--home", home]  # bytes no UTF-8 decoder accepts, as argv

    done = subprocess.run(argv, capture_output=True, env=subprocess_env(), timeout=300)

    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err
    assert "Traceback" not in err
    assert "run-\\xff\\xfe" in unwrapped(err) and "notUTF-8text" in unwrapped(err)
