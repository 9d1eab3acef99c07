"""``compactlens hook claude-code|codex`` and ``compactlens hook install claude-code``.

The hook commands hand the payload on stdin to ``analytics.importers.harness_hooks`` (kept in the
home's hook spool, or quarantined with the reason) and always exit 0: a hook must never break
its harness. Run as ``compactlens hook …`` they pay for starting the whole command line (a
second or more); the command ``hook install`` writes into Claude Code's settings runs the hook
module itself by path with the standard library alone (``python -I -S …/harness_hooks.py``),
which starts in tens of milliseconds. ``install`` merges the ``PreCompact`` and ``PostCompact``
entries into ``.claude/settings.json`` of a project (or ``~/.claude/settings.json`` with
``--user``): every other setting and hook is kept, an entry of an earlier install is replaced
rather than doubled, a second run changes nothing, and the diff is shown before anything is
written. Nothing here imports a transcript or opens the store.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from analytics.cli.common import Group, HomeOption, resolve_home
from analytics.cli.terminal import console, print_error, print_note
from analytics.importers import harness_hooks
from analytics.importers.harness_hooks import run_hook

HOOK_EVENTS = ("PreCompact", "PostCompact")
HOOK_TIMEOUT_S = 10
"""What Claude Code allows the hook before it gives up on it (it takes well under a second)."""
MARKERS = ("harness_hooks.py", "compactlens hook claude-code")
"""What tells an entry of ours (of any earlier install) from the user's own hooks."""

hook_app = typer.Typer(
    no_args_is_help=True,
    help="Hook commands for Claude Code and Codex (JSON on stdin, exit 0 always), and their "
    "installation.",
    cls=Group,
)
install_app = typer.Typer(
    no_args_is_help=True, help="Write the hook entries into a harness's settings.", cls=Group
)
hook_app.add_typer(install_app, name="install")

CaptureOption = Annotated[
    str,
    typer.Option(
        "--capture",
        metavar="full|metadata",
        help="metadata: the summary's size and hash, not its text",
    ),
]


def _hook(harness: str, home: Path | None, capture: str) -> None:
    try:
        root = resolve_home(home)
    except typer.Exit:  # said on stderr; the harness goes on
        raise typer.Exit(0) from None
    if capture not in ("full", "metadata"):
        print_error(f"--capture {capture!r}: expected full or metadata; recorded as full")
        capture = "full"
    raise typer.Exit(run_hook(harness, sys.stdin.buffer, root, capture=capture))


@hook_app.command("claude-code")
def claude_code(home: HomeOption = None, capture: CaptureOption = "full") -> None:
    """Record a Claude Code hook payload (PreCompact, PostCompact) from stdin into the home's
    hook spool; a malformed one is quarantined with the reason. Always exits 0."""
    _hook("claude-code", home, capture)


@hook_app.command("codex")
def codex(home: HomeOption = None, capture: CaptureOption = "full") -> None:
    """Record a Codex hook payload (PreCompact, PostCompact) from stdin into the home's hook
    spool, and answer `{}`; a malformed one is quarantined with the reason. Always exits 0."""
    _hook("codex", home, capture)


# ---------------------------------------------------------------- install


class SettingsError(ValueError):
    """A settings file this command will not rewrite; the message says why and what to do."""


def hook_command(home: Path, python: str | None = None) -> str:
    """The command Claude Code runs: this Python, isolated and without site packages, on the
    hook module's file, with the home made absolute."""
    script = Path(harness_hooks.__file__).resolve()
    parts = [python or sys.executable, "-I", "-S", str(script), "claude-code"]
    return shlex.join([*parts, "--home", str(home.resolve())])


def _ours(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    hooks = entry.get("hooks")
    return isinstance(hooks, list) and any(
        isinstance(h, dict) and any(m in str(h.get("command", "")) for m in MARKERS) for h in hooks
    )


def with_hooks(settings: dict[str, Any], command: str) -> dict[str, Any]:
    """``settings`` with one entry running ``command`` for each of ``HOOK_EVENTS``: an entry of
    ours already there is replaced in place (a second one dropped), else one is appended; every
    other key and entry is kept as it was. ``SettingsError`` if ``hooks`` is not the shape
    Claude Code reads."""
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError(f"'hooks' is {type(hooks).__name__}, not an object")
    hooks = dict(hooks)
    wanted = {
        "matcher": "",
        "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}],
    }
    for event in HOOK_EVENTS:
        entries = hooks.get(event, [])
        if not isinstance(entries, list):
            raise SettingsError(f"'hooks.{event}' is {type(entries).__name__}, not a list")
        out: list[Any] = []
        placed = False
        for entry in entries:
            if not _ours(entry):
                out.append(entry)
            elif not placed:
                out.append(entry if entry == wanted else wanted)
                placed = True
        if not placed:
            out.append(wanted)
        hooks[event] = out
    return {**settings, "hooks": hooks}


def settings_text(settings: dict[str, Any]) -> str:
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"


def read_settings(path: Path) -> tuple[str, dict[str, Any]]:
    """(the file's text, its object); empty for a file that does not exist yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read it: {exc}") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SettingsError(
            f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"holds a JSON {type(data).__name__}, not an object")
    return text, data


def install_hooks(path: Path, command: str, *, write: bool = True) -> tuple[str, bool]:
    """(the unified diff, whether the file changed) of installing ``command`` into the
    settings file ``path``. Nothing is written when nothing changes (the file keeps its bytes
    and its time) or when ``write`` is false; a write replaces the file whole."""
    text, settings = read_settings(path)
    updated = with_hooks(settings, command)
    if updated == settings:
        return "", False
    new = settings_text(updated)
    diff = "".join(
        difflib.unified_diff(
            text.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"{path} (before)",
            tofile=str(path),
        )
    )
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(new, encoding="utf-8")
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    return diff, True


@install_app.command("claude-code")
def install_claude_code(
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            metavar="DIR",
            file_okay=False,
            help="The project whose .claude/settings.json gets the hooks (default: the current "
            "folder)",
        ),
    ] = None,
    user: Annotated[
        bool, typer.Option("--user", help="Install into ~/.claude/settings.json instead")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the diff, write nothing")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Add PreCompact and PostCompact hooks that record each compaction into the home's hook
    spool (`compactlens watch` imports the transcript they name). Idempotent; every other
    setting is kept; the diff is shown."""
    if user and project is not None:
        raise typer.BadParameter("give --project or --user, not both", param_hint="--user")
    root = resolve_home(home)
    base = Path("~").expanduser() if user else (project or Path.cwd())
    path = base / ".claude" / "settings.json"
    try:
        diff, changed = install_hooks(path, hook_command(root), write=not dry_run)
    except (SettingsError, OSError) as exc:
        print_error(f"{path}: {exc}; nothing was changed")
        raise typer.Exit(1) from None
    if not changed:
        print_note(f"{path}: the hooks are already installed; nothing changed")
        return
    console.print(diff, end="", soft_wrap=True, highlight=False, markup=False)
    verb = "would write" if dry_run else "wrote"
    print_note(
        f"{verb} {path}: {' and '.join(HOOK_EVENTS)} record into {root.resolve()} "
        "(run `compactlens watch` to import the transcripts they name)"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(hook_app, name="hook")
