"""Hook payloads from Claude Code and Codex: kept the moment a hook runs, read back later.

A harness runs a hook command with a JSON object on stdin (Claude Code ``PreCompact``:
``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``trigger``,
``custom_instructions``; ``PostCompact`` also ``compact_summary``; Codex's ``PreCompact`` and
``PostCompact``: ``session_id``, ``turn_id``, ``transcript_path``, ``cwd``, ``hook_event_name``,
``model``, ``trigger``). ``receive`` checks it and appends one line to
``<home>/spool/hooks/<harness>.jsonl`` (the payload, when it came, from which harness); a payload
that is not such an object goes, with the reason, to ``<home>/spool/hooks/quarantine.jsonl``.
The event schema has no type for a compaction seen by a hook (a ``compaction_recorded`` needs the
session's stored version and its history), so these lines are facts beside the spool, not events
in it: ``compactlens watch`` reads them back (``read_facts``, ``read_problems``), imports the
transcript each names, and says what it found.

A hook must never slow or break its harness: this module uses the standard library alone, so
that ``python -I <this file> claude-code --home DIR`` (what ``compactlens hook install`` writes)
starts in tens of milliseconds without importing the rest of compactlens; it never opens the
store, and ``main`` exits 0 whatever happens (a payload it cannot keep is said on stderr).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

HARNESSES = ("claude-code", "codex")
HOOKS_DIR = ("spool", "hooks")
"""Where hook lines go, under the home: beside the spool's event files, never among them."""
QUARANTINE = "quarantine.jsonl"
MAX_PAYLOAD_BYTES = 16 * 2**20
"""The largest payload kept (a compaction summary is tens of kilobytes)."""
MAX_RAW_KEPT = 64 * 1024
"""How much of a quarantined payload its quarantine line keeps."""
TEXT_FIELDS = ("compact_summary", "custom_instructions")
"""Text a payload may carry: kept under ``capture=full``, only its size and hash otherwise."""
_OPTIONAL_TEXT = ("transcript_path", "cwd", "trigger", "turn_id", "model", *TEXT_FIELDS)


class PayloadError(ValueError):
    """A hook payload that is not what the harness sends; the message says why."""


@dataclass(frozen=True)
class Received:
    """What ``receive`` did with one payload: the file it wrote, and why it was quarantined
    (empty when it was kept)."""

    path: Path
    problem: str = ""


def hooks_dir(home: Path) -> Path:
    return home.joinpath(*HOOKS_DIR)


def check_payload(raw: bytes) -> dict[str, Any]:
    """The payload as a JSON object, or ``PayloadError`` saying what is wrong with it."""
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise PayloadError(
            f"payload of {len(raw):,} bytes is over the {MAX_PAYLOAD_BYTES:,} a hook payload may "
            "be; not recorded"
        )
    if not raw.strip():
        raise PayloadError("empty payload: the hook got nothing on stdin")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PayloadError(f"not UTF-8 text at byte {exc.start}") from None
    except RecursionError:
        raise PayloadError("JSON nested too deeply to parse") from None
    except json.JSONDecodeError as exc:
        raise PayloadError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise PayloadError(f"expected a JSON object, got {_kind(obj)}")
    for key in ("session_id", "hook_event_name"):
        value = obj.get(key)
        if not isinstance(value, str) or not value.strip():
            raise PayloadError(f"{key}: expected a non-empty string, got {_shown(value)}")
    for key in _OPTIONAL_TEXT:
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            raise PayloadError(f"{key}: expected a string, got {_shown(value)}")
    return obj


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _shown(value: object) -> str:
    if value is None:
        return "nothing"
    text = json.dumps(value)
    return f"{_kind(value)} {text[:60]}{'…' if len(text) > 60 else ''}"


def kept_payload(obj: dict[str, Any], capture: str) -> dict[str, Any]:
    """The payload as recorded: whole under ``full``; under ``metadata`` its texts are replaced
    by their length and sha256 (``<field>_chars``, ``<field>_sha256``)."""
    if capture == "full":
        return obj
    out = {k: v for k, v in obj.items() if k not in TEXT_FIELDS}
    for key in TEXT_FIELDS:
        text = obj.get(key)
        if isinstance(text, str):
            out[f"{key}_chars"] = len(text)
            out[f"{key}_sha256"] = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    return out


def receive(
    harness: str, raw: bytes, home: Path, *, capture: str = "full", now: dt.datetime | None = None
) -> Received:
    """Record one payload of ``harness`` under ``home``: one line in its hook file, or in the
    quarantine file with the reason. Raises ``OSError`` only when neither can be written."""
    at = (now or dt.datetime.now(dt.UTC)).isoformat()
    folder = hooks_dir(home)
    try:
        obj = check_payload(raw)
    except PayloadError as exc:
        shown = raw[:MAX_RAW_KEPT].decode("utf-8", "replace")
        line = {"received_at": at, "harness": harness, "reason": str(exc), "bytes": len(raw)}
        path = folder / QUARANTINE
        _append(path, {**line, "raw": shown})
        return Received(path, str(exc))
    path = folder / f"{harness}.jsonl"
    _append(
        path,
        {
            "received_at": at,
            "harness": harness,
            "capture": capture,
            "pid": os.getpid(),
            "payload": kept_payload(obj, capture),
        },
    )
    return Received(path)


def _append(path: Path, obj: dict[str, Any]) -> None:
    """One line, written whole: one ``write`` under an exclusive lock, so that hooks of several
    sessions running at once never interleave their lines."""
    data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


# ---------------------------------------------------------------- reading back


@dataclass(frozen=True)
class HookFact:
    """One payload a hook kept: which harness and hook event, for which session and
    transcript, and what it said about the compaction."""

    harness: str
    event: str
    session_id: str
    received_at: str
    transcript_path: str | None
    trigger: str | None
    summary_chars: int | None
    """The length of ``compact_summary`` (PostCompact), under either capture."""

    @property
    def compacted(self) -> bool:
        """Whether the harness has compacted when the hook ran (so its transcript says so)."""
        return self.event == "PostCompact"


@dataclass(frozen=True)
class HookProblem:
    """A payload quarantined, or a line of a hook file that cannot be read back."""

    source: str
    line: int
    reason: str
    received_at: str = ""


def fact_of(obj: dict[str, Any]) -> HookFact:
    """The fact a hook line records (``KeyError``/``TypeError``/``ValueError`` if it is not
    one this module wrote)."""
    payload = obj["payload"]
    if not isinstance(payload, dict):
        raise TypeError("payload is not an object")
    summary = payload.get("compact_summary")
    chars = len(summary) if isinstance(summary, str) else payload.get("compact_summary_chars")
    transcript = payload.get("transcript_path")
    trigger = payload.get("trigger")
    return HookFact(
        harness=str(obj["harness"]),
        event=str(payload["hook_event_name"]),
        session_id=str(payload["session_id"]),
        received_at=str(obj.get("received_at", "")),
        transcript_path=transcript if isinstance(transcript, str) and transcript else None,
        trigger=trigger if isinstance(trigger, str) else None,
        summary_chars=chars if isinstance(chars, int) else None,
    )


@dataclass
class Position:
    """How far a hook file has been read: its inode and the offset after the last line read."""

    inode: int = 0
    offset: int = 0


def read_lines(path: Path, at: Position) -> Iterator[tuple[int, bytes]]:
    """The complete lines of ``path`` after ``at`` (advanced past each as it is yielded),
    numbered from 1 within this read; a file replaced or cut short is read from its start."""
    try:
        handle: BinaryIO = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        info = os.fstat(handle.fileno())
        if info.st_ino != at.inode or info.st_size < at.offset:
            at.inode, at.offset = info.st_ino, 0
        handle.seek(at.offset)
        data = handle.read(info.st_size - at.offset)
    end = data.rfind(b"\n") + 1  # a line still being written waits for its end
    for n, raw in enumerate(data[:end].splitlines(), start=1):
        at.offset += len(raw) + 1
        yield n, raw


def read_facts(
    home: Path, positions: dict[str, Position]
) -> tuple[list[HookFact], list[HookProblem]]:
    """The facts every harness's hook file gained since ``positions`` (updated in place), and
    its lines that cannot be read back."""
    facts: list[HookFact] = []
    problems: list[HookProblem] = []
    for harness in HARNESSES:
        name = f"{harness}.jsonl"
        at = positions.setdefault(name, Position())
        for n, raw in read_lines(hooks_dir(home) / name, at):
            try:
                obj = json.loads(raw)
                facts.append(fact_of(obj))
            except (ValueError, KeyError, TypeError) as exc:
                problems.append(HookProblem(name, n, f"not a hook line: {exc}"))
    return facts, problems


def read_problems(home: Path, at: Position | None = None) -> list[HookProblem]:
    """The payloads quarantined since ``at`` (all of them when None), with why."""
    problems: list[HookProblem] = []
    for n, raw in read_lines(hooks_dir(home) / QUARANTINE, at or Position()):
        try:
            obj = json.loads(raw)
            reason, when = str(obj["reason"]), str(obj.get("received_at", ""))
            problems.append(HookProblem(QUARANTINE, n, f"{obj.get('harness')}: {reason}", when))
        except (ValueError, KeyError, TypeError):
            problems.append(HookProblem(QUARANTINE, n, "unreadable quarantine line"))
    return problems


# ---------------------------------------------------------------- the hook command


def run_hook(
    harness: str,
    stdin: BinaryIO,
    home: Path,
    *,
    capture: str = "full",
    stdout: Any = None,
    stderr: Any = None,
) -> int:
    """What the hook command does: read stdin, record it, answer the harness; always 0.

    Codex reads a hook's stdout as JSON (an empty answer fails its ``PreCompact``), so it gets
    ``{}``; Claude Code gets nothing. A quarantined payload, or one that could not be written at
    all, is one line on stderr, which the harness shows in its verbose log only."""
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    with contextlib.suppress(Exception):
        try:
            raw = stdin.read(MAX_PAYLOAD_BYTES + 1)
            received = receive(harness, raw, home, capture=capture)
            if received.problem:
                print(
                    f"compactlens: hook payload quarantined in {received.path}: {received.problem}",
                    file=err,
                )
        except Exception as exc:  # never into the harness: it must go on compacting
            print(f"compactlens: hook payload not recorded: {exc}", file=err)
        if harness == "codex":
            print("{}", file=out)
        out.flush()
        err.flush()
    return 0


def _arguments(argv: list[str]) -> tuple[str, Path, str]:
    """``HARNESS [--home DIR] [--capture full|metadata]`` (the home as the command line
    resolves it: ``--home``, else ``$COMPACTLENS_HOME``, else ``./data``)."""
    harness, home, capture = (argv[0] if argv else ""), None, "full"
    rest = iter(argv[1:])
    for arg in rest:
        flag, _, value = arg.partition("=")
        if flag in ("--home", "--capture") and not value:
            value = next(rest, "")
        if flag == "--home":
            home = value
        elif flag == "--capture":
            capture = value
    if harness not in HARNESSES:
        raise PayloadError(f"unknown harness {harness!r}: expected one of {', '.join(HARNESSES)}")
    if capture not in ("full", "metadata"):
        raise PayloadError(f"--capture {capture!r}: expected full or metadata")
    root = home or os.environ.get("COMPACTLENS_HOME") or "data"
    return harness, Path(root).expanduser(), capture


def main(argv: list[str] | None = None) -> int:
    """``python -I harness_hooks.py claude-code|codex [--home DIR] [--capture C]``: exit 0."""
    try:
        harness, home, capture = _arguments(list(sys.argv[1:] if argv is None else argv))
    except PayloadError as exc:
        with contextlib.suppress(Exception):
            print(f"compactlens: hook not run: {exc}", file=sys.stderr)
        return 0
    return run_hook(harness, sys.stdin.buffer, home, capture=capture)


if __name__ == "__main__":
    sys.exit(main())
