"""Reading transcript files: sniffing the head, streaming JSONL lines, loading JSON documents.

Turns I/O and decoding failures into a ``TranscriptError`` (the whole file is unusable) or an
``ImportIssue`` (one line or record is bad; the rest goes on), refuses files that must not be
opened at all (``check_readable``: devices, FIFOs, kernel files such as ``/proc/kmsg``), and
offers the small field checks the format modules use to say exactly which field had which
wrong value. It knows nothing about any particular format, except which folders are one
transcript (``event_service``: an OpenHands SDK conversation), so that nothing refuses them as
"not a regular file".
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from analytics.errors import TranscriptError, UnknownFormatError
from analytics.importers.session import ImportIssue
from analytics.text import (
    BOM,
    JsonTooDeepError,
    decode_error,
    line_of,
    parse_json,
)

HEAD_BYTES = 64 * 1024
"""How much of a file detection looks at."""

IssueSink = Callable[[ImportIssue], None]


class RecordError(Exception):
    """One record (a line, a message, a run) cannot be imported; becomes an ``ImportIssue``."""


@dataclass(frozen=True)
class Reporter:
    """Reports issues for one file to a sink: ``report("why", line=7)``."""

    path: Path
    sink: IssueSink

    def __call__(self, reason: str, line: int | None = None) -> None:
        self.sink(ImportIssue(path=str(self.path), line=line, reason=reason))


# ---------------------------------------------------------------- whole-file reads


_SPECIAL_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def event_service(path: Path) -> Path | None:
    """The ``event_service`` folder of an OpenHands SDK conversation folder (or of itself): a
    folder that is one transcript, read whole. None for any other path."""
    for folder in (path / "event_service", path):
        if folder.name == "event_service" and (
            (folder / "base_state.json").is_file() or (folder / "events").is_dir()
        ):
            return folder
    return None


def check_readable(path: Path) -> None:
    """Refuse, from ``stat`` alone and without opening it, a file that must not be read: not
    a regular file (a device or FIFO can block a read for ever), or one whose size is 0, which
    is either empty or a kernel file such as ``/proc/kmsg`` (its reads block, and take the
    messages from the kernel's log). ``TranscriptError`` (``UnknownFormatError`` for an empty
    file, which a folder walk skips) naming the path."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise TranscriptError(str(path), f"cannot read the file: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode) and event_service(path) is not None:
        return  # a conversation folder: its importer checks each file it reads
    if not stat.S_ISREG(info.st_mode):
        kind = next((k for test, k in _SPECIAL_KINDS if test(info.st_mode)), "a special file")
        raise TranscriptError(str(path), f"not a regular file ({kind}); not read")
    if info.st_size == 0:
        raise UnknownFormatError(
            str(path),
            "the file is empty (a size of 0 bytes, as kernel files such as /proc/kmsg also "
            "report: not opened); nothing to import",
        )


def read_head(path: Path, size: int = HEAD_BYTES) -> str:
    """The first ``size`` bytes as text; ``TranscriptError`` if empty, binary or unreadable."""
    check_readable(path)
    try:
        with path.open("rb") as fh:
            raw = fh.read(size)
            at_end = not fh.read(1)
    except OSError as exc:
        raise TranscriptError(str(path), f"cannot read the file: {exc.strerror or exc}") from None
    if not raw.removeprefix(BOM.encode()).strip():
        reason = "the file is empty" if not raw else "the file holds only whitespace"
        raise UnknownFormatError(str(path), f"{reason}; nothing to import")
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise UnknownFormatError(
            str(path), f"binary file (NUL byte at offset {nul}); not a text transcript, skipped"
        )
    try:
        # final=False when the head is cut mid-file: a character split at the cut is not an error.
        return codecs.getincrementaldecoder("utf-8")().decode(raw, final=at_end).lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise UnknownFormatError(
            str(path),
            f"binary or non-UTF-8 file (invalid UTF-8 at byte {exc.start}); not a text "
            "transcript, skipped",
        ) from None


def file_sha256(path: Path) -> str:
    """SHA-256 of the file's bytes, read in chunks (never the whole file at once)."""
    check_readable(path)
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise TranscriptError(str(path), f"cannot read the file: {exc.strerror or exc}") from None
    return digest.hexdigest()


def load_json_object(
    path: Path, document: object | None = None, report: Reporter | None = None
) -> dict[str, Any]:
    """The file's top-level JSON object (``document`` if the caller already parsed it)."""
    doc = load_json_document(path, report) if document is None else document
    if not isinstance(doc, dict):
        raise TranscriptError(str(path), f"expected a JSON object, got {describe(doc)}")
    return doc


def load_json_document(path: Path, report: Reporter | None = None) -> Any:
    """Parse the whole file as one JSON document (once); clear errors for truncated or bad JSON.

    A leading BOM is accepted; lone surrogates are replaced with U+FFFD and reported to
    ``report`` (with the line of the first); nesting too deep to parse fails the file.
    """
    try:
        with path.open(encoding="utf-8") as fh:
            text = fh.read()
        parsed = parse_json(text)
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(exc.doc.rstrip())
        hint = "; the file ends mid-document (truncated?)" if truncated else ""
        raise TranscriptError(
            str(path),
            f"{decode_error(exc, with_line=True)}{hint}",
            line=exc.lineno,
        ) from None
    except JsonTooDeepError as exc:
        raise TranscriptError(str(path), str(exc)) from None
    except UnicodeDecodeError as exc:
        raise TranscriptError(
            str(path), f"not UTF-8 text (invalid byte at offset {exc.start}); skipped"
        ) from None
    except OSError as exc:
        raise TranscriptError(str(path), f"cannot read the file: {exc.strerror or exc}") from None
    if parsed.replaced and report is not None:
        report(parsed.note(), line_of(text, parsed.offset))
    return parsed.value


def first_jsonl_objects(path: Path, max_lines: int = 5) -> list[dict[str, Any]]:
    """The JSON objects written on one unindented line each, among the first non-blank lines.

    Empty means the file is not JSON Lines (e.g. a pretty-printed document, whose nested
    objects are indented or span lines).
    """
    found: list[dict[str, Any]] = []
    seen = 0
    try:
        with path.open("rb") as fh:
            for raw in fh:
                if not seen:
                    raw = raw.removeprefix(BOM.encode())
                if not raw.strip():
                    continue
                seen += 1
                if raw.startswith(b"{"):
                    try:
                        value = json.loads(raw)
                    except (ValueError, RecursionError):
                        value = None
                    if isinstance(value, dict):
                        found.append(value)
                if seen >= max_lines:
                    break
    except OSError as exc:
        raise TranscriptError(str(path), f"cannot read the file: {exc.strerror or exc}") from None
    return found


def iter_json_lines(path: Path, report: Reporter) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each valid JSON-object line; every bad line is reported."""
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                value = _decode_line(raw.removeprefix(BOM.encode()), lineno, report)
                if value is not None:
                    yield lineno, value
    except OSError as exc:
        raise TranscriptError(str(path), f"cannot read the file: {exc.strerror or exc}") from None


def _decode_line(raw: bytes, lineno: int, report: Reporter) -> dict[str, Any] | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        report(f"not UTF-8 text (invalid byte at column {exc.start + 1}); line skipped", lineno)
        return None
    text = text.rstrip("\r\n")  # a string cut at the line end is unterminated, not a control char
    try:
        parsed = parse_json(text)
    except json.JSONDecodeError as exc:
        # a JSON Lines string cannot hold a raw newline: unterminated means cut at the line end
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        hint = "; the line is cut short (truncated?)" if truncated else ""
        report(f"{decode_error(exc, with_line=False)}{hint}; line skipped", lineno)
        return None
    except JsonTooDeepError as exc:
        report(f"{exc}; line skipped", lineno)
        return None
    if parsed.replaced:
        report(parsed.note(), lineno)
    value = parsed.value
    if not isinstance(value, dict):
        report(f"expected a JSON object, got {describe(value)}; line skipped", lineno)
        return None
    return value


# ---------------------------------------------------------------- field checks


def describe(value: object) -> str:
    """A short description of a JSON value for error messages: kind and a clipped repr."""
    if value is None:
        return "null"
    kinds: dict[type, str] = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    kind = kinds.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )
    if isinstance(value, dict | list):
        return kind
    text = repr(value)
    return f"{kind} {text[:57] + '...' if len(text) > 60 else text}"


def as_dict(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordError(f"{where}: expected an object, got {describe(value)}")
    return value


def sub(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is an object, else ``{}``: for optional parts of formats read
    tolerantly, where a missing or odd part only means less to read."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def as_list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise RecordError(f"{where}: expected a list, got {describe(value)}")
    return value


def opt_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise RecordError(f"{where}.{key}: expected a string, got {describe(value)}")


def req_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = opt_str(obj, key, where)
    if value is None:
        raise RecordError(f"{where}.{key}: missing (expected a string)")
    return value


MAX_COUNT = 10**12
"""The largest count (tokens, a context window) read from a transcript: a thousand times any
model's context, so a larger figure is a corrupt one; a million of them still sum within the
64-bit integers that events and the store hold (``10**30`` did not, and failed the file)."""


def opt_int(obj: Mapping[str, Any], key: str, where: str) -> int | None:
    """A count: a whole number from 0 to ``MAX_COUNT``, or None when absent."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    raise RecordError(
        f"{where}.{key}: expected a whole number from 0 to {MAX_COUNT:,}, got {describe(value)}"
    )


@dataclass
class Figures:
    """The counts of one record, read so that a bad one costs only itself: it reads as None,
    and ``problem`` names every bad field for one issue on the record's line."""

    where: str
    bad: list[str] = field(default_factory=list)

    def count(self, obj: object, key: str, where: str | None = None) -> int | None:
        """``obj[key]`` as a count (None when absent, or when ``obj`` is no object)."""
        if not isinstance(obj, Mapping):
            return None
        try:
            return opt_int(obj, key, self.where if where is None else where)
        except RecordError as exc:
            self.bad.append(str(exc))
            return None

    def failed(self, key: str) -> bool:
        """Whether the field ``key`` was there but no count."""
        return any(f".{key}: " in problem for problem in self.bad)

    @property
    def problem(self) -> str | None:
        """One issue's reason for every bad figure (None if none was bad)."""
        if not self.bad:
            return None
        left = "that figure is" if len(self.bad) == 1 else "those figures are"
        return f"{'; '.join(self.bad)}; {left} left empty, everything else kept"


def opt_bool(obj: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = obj.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise RecordError(f"{where}.{key}: expected true or false, got {describe(value)}")


def parse_timestamp(value: object) -> datetime | None:
    """An ISO 8601 timestamp (``Z`` accepted; one without a zone is taken as UTC), or None when
    absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def first_error(exc: ValidationError) -> str:
    """The first validation error as ``field.path: message``."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "value"
    return f"{loc}: {err['msg']}"


def file_stem(path: Path) -> str:
    """The file name without its transcript suffix (``x.traj.json`` → ``x``)."""
    name = path.name
    for suffix in (".traj.json", ".jsonl", ".json", ".traj", ".md"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


@dataclass(frozen=True)
class SourceFile:
    """One file being imported: its path, where its issues go, and its content hash."""

    path: Path
    report: Reporter
    sha256: str

    @classmethod
    def of(cls, path: Path, report: Reporter) -> SourceFile:
        return cls(path=path, report=report, sha256=file_sha256(path))

    @property
    def key(self) -> str:
        """A session-id base unique per file content: ``<stem>-<first 8 hex of sha256>``."""
        return f"{file_stem(self.path)}-{self.sha256[:8]}"
