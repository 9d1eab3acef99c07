"""``compactlens hook claude-code|codex`` and ``hook install claude-code`` (issue 30, item 2).

Every hook here is a real process fed a payload on stdin, as the harness runs it: it exits 0 on
a valid payload and on a malformed one (quarantined, with a line saying why), the command
``install`` writes imports nothing but the standard library, and a ``PostCompact`` payload
leads to the harness's compaction in the store after the next ``watch`` pass. The install is run
twice on a settings file full of someone else's settings and hooks: it keeps every one of them,
and the second run changes nothing, not even the file's time. The commands a user types
(``hook install``, ``watch --once``) run in this process with the test's own ``HOME``: a process
of their own would add seconds of imports each and prove nothing more about them.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from analytics.cli.hooks import HOOK_EVENTS, hook_command, with_hooks
from analytics.cli.main import app
from analytics.cli.watching import catch_up, watch_lock
from analytics.importers import harness_hooks
from analytics.importers.harness_hooks import HookFact, Position, read_facts, read_problems
from analytics.store import open_store
from tests.transcripts import NATIVE

CLAUDE = NATIVE / "claude-code" / "a6" / "e4c2a0fbd1" / "0" / "full.jsonl"
TIMEOUT_S = 300.0
SUMMARY = "This session is being continued from a previous conversation that ran out of context."
FOREIGN: dict[str, Any] = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "model": "opus",
    "permissions": {"allow": ["Bash(git diff:*)"], "deny": []},
    "env": {"FOO": "1"},
    "hooks": {
        "PreCompact": [
            {
                "matcher": "manual",
                "hooks": [{"type": "command", "command": 'cp "$T" backups/'}],
            }
        ],
        "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "fmt"}]}],
    },
}


def _payload(transcript: Path | str, **extra: Any) -> bytes:
    return json.dumps(
        {
            "session_id": "198393f2-22db-477b-ac77-1825bea883ae",
            "transcript_path": str(transcript),
            "cwd": "/work/project",
            "hook_event_name": "PostCompact",
            "trigger": "auto",
            "compact_summary": SUMMARY,
            **extra,
        }
    ).encode()


def _env(tmp_path: Path) -> dict[str, str]:
    user = tmp_path / "user"
    user.mkdir(exist_ok=True)
    return {**os.environ, "HOME": str(user), "COLUMNS": "200"}


def _cli(
    tmp_path: Path, *args: str | Path, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "analytics.cli", *map(str, args)],
        input=stdin,
        capture_output=True,
        env=_env(tmp_path),
        timeout=TIMEOUT_S,
        check=False,
    )


def _typed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str | Path) -> Result:
    """``compactlens ARGS`` as a user types it, run in this process with the ``HOME`` that
    ``_env`` gives a process; a crash is a failure, not an exit code."""
    monkeypatch.setenv("HOME", _env(tmp_path)["HOME"])
    done = CliRunner().invoke(app, list(map(str, args)))
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    return done


def _installed(
    tmp_path: Path, home: Path, stdin: bytes
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """The command ``hook install`` writes, run as Claude Code runs it (through a shell)."""
    started = time.monotonic()
    done = subprocess.run(
        ["/bin/sh", "-c", hook_command(home)],
        input=stdin,
        capture_output=True,
        env=_env(tmp_path),
        timeout=TIMEOUT_S,
        check=False,
    )
    return done, time.monotonic() - started


def _facts(home: Path) -> list[HookFact]:
    facts, problems = read_facts(home, {})
    assert problems == []
    return facts


@pytest.mark.integration
def test_the_installed_hook_records_a_postcompact_payload_and_exits_0(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done, seconds = _installed(tmp_path, home, _payload("/work/t.jsonl"))
    print(f"the installed hook took {seconds * 1000:.0f} ms (process start included)")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    (fact,) = _facts(home)
    assert (fact.harness, fact.event, fact.trigger) == ("claude-code", "PostCompact", "auto")
    assert fact.transcript_path == "/work/t.jsonl" and fact.summary_chars == len(SUMMARY)
    line = json.loads((home / "spool" / "hooks" / "claude-code.jsonl").read_text())
    assert line["payload"]["compact_summary"] == SUMMARY and line["capture"] == "full"


@pytest.mark.integration
def test_the_installed_hook_imports_the_standard_library_alone(tmp_path: Path) -> None:
    """What keeps it fast on any machine: no compactlens package, no pydantic, no duckdb (the
    figure printed is this machine's; the assertion is about what is imported, not time)."""
    command = shlex.split(hook_command(tmp_path / "home"))
    command[1:1] = ["-X", "importtime"]
    done = subprocess.run(
        command, input=_payload("/t.jsonl"), capture_output=True, timeout=TIMEOUT_S, check=False
    )
    assert done.returncode == 0
    rows = [r for r in done.stderr.decode().splitlines() if r.startswith("import time:")]
    names = [r.rsplit("|", 1)[1].strip() for r in rows[1:]]
    total_us = sum(int(r.split("|")[1]) for r in rows[1:] if not r.split("|")[2].startswith("  "))
    print(f"hook imports: {len(names)} modules, {total_us / 1000:.1f} ms cumulative")
    foreign = {n.split(".")[0] for n in names} & {
        "analytics",
        "compactor",
        "pydantic",
        "duckdb",
        "polars",
        "typer",
        "rich",
    }
    assert not foreign, names


@pytest.mark.integration
def test_compactlens_hook_claude_code_records_too_and_codex_gets_its_json_answer(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    claude = _cli(tmp_path, "hook", "claude-code", "--home", home, stdin=_payload("/t.jsonl"))
    assert (claude.returncode, claude.stdout) == (0, b"")
    codex_payload = {
        "session_id": "019a9013-a57c-7252-8f75-f99631732eda",
        "turn_id": "t1",
        "transcript_path": None,
        "cwd": "/w",
        "hook_event_name": "PreCompact",
        "model": "gpt-5",
        "trigger": "manual",
    }
    codex = _cli(
        tmp_path, "hook", "codex", "--home", home, stdin=json.dumps(codex_payload).encode()
    )
    assert (codex.returncode, codex.stdout.strip()) == (0, b"{}")
    assert [(f.harness, f.event, f.transcript_path) for f in _facts(home)] == [
        ("claude-code", "PostCompact", "/t.jsonl"),
        ("codex", "PreCompact", None),
    ]


MALFORMED = [
    (b"", "empty payload"),
    (b"not json at all", "not JSON"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (b'{"hook_event_name": "PostCompact"}', "session_id: expected a non-empty string"),
    (b'{"session_id": "s", "hook_event_name": 3}', "hook_event_name: expected a non-empty"),
    (
        b'{"session_id": "s", "hook_event_name": "PostCompact", "transcript_path": 7}',
        "transcript_path: expected a string, got int 7",
    ),
    (b'{"session_id": "\xff"}', "not UTF-8 text at byte"),
]


@pytest.mark.integration
@pytest.mark.parametrize(("raw", "why"), MALFORMED)
def test_a_malformed_payload_exits_0_and_is_quarantined_with_why(
    tmp_path: Path, raw: bytes, why: str
) -> None:
    home = tmp_path / "home"
    done, _ = _installed(tmp_path, home, raw)
    assert done.returncode == 0 and done.stdout == b""
    assert b"quarantined" in done.stderr and why.encode() in done.stderr
    (problem,) = read_problems(home)
    assert why in problem.reason and problem.reason.startswith("claude-code: ")
    line = json.loads((home / "spool" / "hooks" / "quarantine.jsonl").read_text())
    assert line["bytes"] == len(raw) and line["raw"] == raw.decode("utf-8", "replace")
    assert _facts(home) == []


@pytest.mark.integration
def test_a_hook_with_nowhere_to_write_still_exits_0(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    done, _ = _installed(tmp_path, blocker / "home", _payload("/t.jsonl"))
    assert done.returncode == 0 and b"not recorded" in done.stderr
    unknown = subprocess.run(
        [sys.executable, "-I", "-S", harness_hooks.__file__, "opencode"],
        input=b"{}",
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert unknown.returncode == 0 and b"unknown harness 'opencode'" in unknown.stderr


def test_metadata_capture_keeps_the_summary_size_and_hash_not_its_text(tmp_path: Path) -> None:
    harness_hooks.receive("claude-code", _payload("/t.jsonl"), tmp_path, capture="metadata")
    text = (tmp_path / "spool" / "hooks" / "claude-code.jsonl").read_text()
    assert SUMMARY not in text
    (fact,) = _facts(tmp_path)
    assert fact.summary_chars == len(SUMMARY)


def test_facts_are_read_once_and_a_half_written_line_waits(tmp_path: Path) -> None:
    harness_hooks.receive("claude-code", _payload("/a.jsonl"), tmp_path)
    positions: dict[str, Position] = {}
    assert [f.transcript_path for f in read_facts(tmp_path, positions)[0]] == ["/a.jsonl"]
    assert read_facts(tmp_path, positions) == ([], [])
    path = tmp_path / "spool" / "hooks" / "claude-code.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"harness": "claude-code", "payl')
    assert read_facts(tmp_path, positions) == ([], [])
    with path.open("ab") as handle:
        handle.write(b'oad": {"session_id": "s", "hook_event_name": "PreCompact"}}\n')
    (fact,) = read_facts(tmp_path, positions)[0]
    assert (fact.session_id, fact.event, fact.compacted) == ("s", "PreCompact", False)


# ------------------------------------------------------------------ install


def _settings(project: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((project / ".claude" / "settings.json").read_text())
    return data


def _ours(settings: dict[str, Any], event: str) -> list[str]:
    return [
        h["command"]
        for entry in settings["hooks"].get(event, [])
        for h in entry["hooks"]
        if "harness_hooks.py" in h["command"]
    ]


@pytest.mark.integration
def test_install_is_idempotent_keeps_every_other_setting_and_shows_the_diff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    (project / ".claude").mkdir(parents=True)
    path = project / ".claude" / "settings.json"
    path.write_text(json.dumps(FOREIGN, indent=4) + "\n")

    install = ("hook", "install", "claude-code", "--project", project)
    first = _typed(monkeypatch, tmp_path, *install, "--home", home)
    assert first.exit_code == 0, first.stderr
    out = first.stdout
    assert out.startswith(f"--- {path} (before)") and "+" in out and "harness_hooks.py" in out
    settings = _settings(project)
    for key in ("$schema", "model", "permissions", "env"):
        assert settings[key] == FOREIGN[key]
    assert settings["hooks"]["PostToolUse"] == FOREIGN["hooks"]["PostToolUse"]
    assert settings["hooks"]["PreCompact"][0] == FOREIGN["hooks"]["PreCompact"][0]
    for event in HOOK_EVENTS:
        assert _ours(settings, event) == [hook_command(home)]

    before, stamp = path.read_bytes(), path.stat().st_mtime_ns
    second = _typed(monkeypatch, tmp_path, *install, "--home", home)
    assert second.exit_code == 0 and second.stdout == ""
    assert "already installed; nothing changed" in second.stderr
    assert (path.read_bytes(), path.stat().st_mtime_ns) == (before, stamp)

    elsewhere = tmp_path / "other-home"
    moved = _typed(monkeypatch, tmp_path, *install, "--home", elsewhere)
    assert moved.exit_code == 0
    for event in HOOK_EVENTS:  # the earlier entry replaced, not doubled
        assert _ours(_settings(project), event) == [hook_command(elsewhere)]


@pytest.mark.integration
def test_install_for_the_user_and_what_it_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    user = _typed(monkeypatch, tmp_path, "hook", "install", "claude-code", "--user", "--home", home)
    assert user.exit_code == 0, user.stderr
    written = tmp_path / "user" / ".claude" / "settings.json"
    assert _ours(json.loads(written.read_text()), "PostCompact") == [hook_command(home)]

    both = _typed(
        monkeypatch, tmp_path, "hook", "install", "claude-code", "--user", "--project", tmp_path
    )
    assert both.exit_code == 2

    broken = tmp_path / "broken"
    (broken / ".claude").mkdir(parents=True)
    (broken / ".claude" / "settings.json").write_text('{"model": "opus",')
    refused = _typed(monkeypatch, tmp_path, "hook", "install", "claude-code", "--project", broken)
    assert refused.exit_code == 1 and "not valid JSON" in refused.stderr
    assert (broken / ".claude" / "settings.json").read_text() == '{"model": "opus",'

    dry = tmp_path / "dry"
    dry.mkdir()
    shown = _typed(
        monkeypatch, tmp_path, "hook", "install", "claude-code", "--project", dry, "--dry-run"
    )
    assert shown.exit_code == 0 and "harness_hooks.py" in shown.stdout
    assert not (dry / ".claude").exists()


def test_with_hooks_refuses_hooks_of_another_shape() -> None:
    from analytics.cli.hooks import SettingsError

    with pytest.raises(SettingsError, match="'hooks' is list"):
        with_hooks({"hooks": []}, "cmd")
    with pytest.raises(SettingsError, match=r"'hooks\.PostCompact' is dict"):
        with_hooks({"hooks": {"PostCompact": {}}}, "cmd")


# ------------------------------------------------------------------ into the store


@pytest.mark.integration
@pytest.mark.skipif(not CLAUDE.is_file(), reason=f"no transcript at {CLAUDE}")
def test_a_postcompact_hook_puts_the_compaction_in_the_store_at_the_next_watch_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    transcript = tmp_path / "elsewhere" / "198393f2-22db-477b-ac77-1825bea883ae.jsonl"
    transcript.parent.mkdir()
    transcript.write_text(CLAUDE.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    home = tmp_path / "home"
    done, _ = _installed(tmp_path, home, _payload(transcript))
    assert done.returncode == 0
    bad, _ = _installed(tmp_path, home, b"{oops")
    assert bad.returncode == 0

    passed = _typed(monkeypatch, tmp_path, "watch", "--once", "--home", home)  # no folder at all
    assert passed.exit_code == 0, passed.stderr
    out = passed.stdout
    assert "hook claude-code PostCompact (auto)" in out and f"following {transcript}" in out
    assert "hook payload quarantined" in out and "not JSON" in out
    assert f"{transcript} (new +" in out and "1 harness compaction" in out
    with open_store(home, read_only=True) as store:
        found = store.query(
            "SELECT c.harness, c.trigger, s.metadata->>'source_file' FROM compactions c "
            "JOIN sessions s USING (session_id) WHERE c.origin = 'native' "
            "AND s.deleted_at IS NULL"
        ).rows()
    assert found == [("claude-code", "auto", str(transcript.resolve()))]

    again = _typed(monkeypatch, tmp_path, "watch", "--once", "--home", home)
    assert again.exit_code == 0 and "hook claude-code" not in again.stdout  # read once


@pytest.mark.integration
@pytest.mark.skipif(not CLAUDE.is_file(), reason=f"no transcript at {CLAUDE}")
def test_catch_up_imports_what_hooks_named_unless_a_watcher_does(tmp_path: Path) -> None:
    """What ``ingest`` would call before projecting (see docs/guides/live.md)."""
    transcript = tmp_path / "t" / "s.jsonl"
    transcript.parent.mkdir()
    transcript.write_text(CLAUDE.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    home = tmp_path / "home"
    harness_hooks.receive("claude-code", _payload(transcript), home)
    said: list[str] = []
    with watch_lock(home):
        assert catch_up(home, said.append) is False and said == []
    assert catch_up(home, said.append) is True
    assert any("1 harness compaction" in line for line in said), said
    with open_store(home, read_only=True) as store:
        assert store.query("SELECT count(*) FROM compactions WHERE origin = 'native'").item() == 1
