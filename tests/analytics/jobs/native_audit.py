"""The dev native sessions imported through the CLI and audited, beside what their raw files say.

``NativeAudit`` is built once per test run (``tests/analytics/jobs/conftest.py``): the sessions
under ``native/`` imported with ``compactlens import PATH --home H``, ``audit --json`` read from
that store, and the audit job's own rows (kind and forms of each artifact, which the JSON does not
carry). ``raw_sessions`` reads each transcript with plain ``json``, never through the importers:
the harness's working directory (Claude Code's ``cwd``, Codex's ``session_meta`` ``cwd``,
OpenHands' terminal ``working_dir``) and each native compaction in file order, with its own id
(Claude Code's boundary line ``uuid``, Codex's ``compacted:<line>``, OpenHands' event id) and its
summary text (None when encrypted). Nothing here is asserted: the tests do that.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from typer.testing import CliRunner

from analytics.cli.main import app
from analytics.jobs.audit import ARTIFACT_COLUMNS, artifacts_kept, boundaries
from analytics.queries import frames
from analytics.queries.audit import _recorded_dirs, audit_json
from analytics.store import EventStore
from tests.transcripts import NATIVE, TRANSCRIPTS

CLAUDE = sorted(NATIVE.glob("claude-code/**/*.jsonl")) if NATIVE.is_dir() else []
CODEX = sorted(NATIVE.glob("codex/.codex/sessions/**/*.jsonl")) if NATIVE.is_dir() else []
OPENHANDS_V0 = sorted(NATIVE.glob("openhands-v0/*.json")) if NATIVE.is_dir() else []
OPENHANDS_V1 = (
    sorted(p for p in NATIVE.glob("openhands-v1/*") if p.is_dir()) if NATIVE.is_dir() else []
)
SOURCES = [*CLAUDE, *CODEX, *OPENHANDS_V0, *OPENHANDS_V1]


@dataclass(frozen=True)
class RawCompaction:
    native_id: str
    summary: str | None


@dataclass(frozen=True)
class RawSession:
    """One transcript file (or OpenHands conversation folder) as its raw lines say."""

    file: str  # relative to the transcripts folder
    harness: str
    cwd: str | None
    compactions: list[RawCompaction]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict))


def _claude(path: Path) -> RawSession:
    cwds: Counter[str] = Counter()
    out: list[RawCompaction] = []
    boundary: str | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if isinstance(row.get("cwd"), str):
            cwds[row["cwd"]] += 1
        if row.get("isSidechain"):
            continue
        if row.get("type") == "system" and row.get("subtype") == "compact_boundary":
            boundary = row["uuid"]
        elif row.get("isCompactSummary") and boundary is not None:
            out.append(RawCompaction(boundary, _text(row["message"]["content"])))
            boundary = None
    return RawSession(_relative(path), "claude-code", _most(cwds), out)


def _codex(path: Path) -> RawSession:
    cwd: str | None = None
    out: list[RawCompaction] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        row = json.loads(line)
        payload = row.get("payload") or {}
        if row.get("type") == "session_meta" and cwd is None:
            cwd = payload.get("cwd")
        elif row.get("type") == "compacted":
            message = payload.get("message") or None
            out.append(RawCompaction(f"compacted:{number}", message))
    return RawSession(_relative(path), "codex", cwd, out)


def _working_dirs(value: Any, found: Counter[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "working_dir" and isinstance(item, str) and item:
                found[item] += 1
            else:
                _working_dirs(item, found)
    elif isinstance(value, list):
        for item in value:
            _working_dirs(item, found)


def _openhands_v0(path: Path) -> RawSession:
    events = json.loads(path.read_text(encoding="utf-8"))["trajectory"]
    cwds: Counter[str] = Counter()
    _working_dirs(events, cwds)
    out = [
        RawCompaction(str(e["id"]), e["args"].get("summary") or None)
        for e in events
        if e.get("action") == "condensation"
    ]
    return RawSession(_relative(path), "openhands", _most(cwds), out)


def _openhands_v1(folder: Path) -> RawSession:
    cwds: Counter[str] = Counter()
    out: list[RawCompaction] = []
    for file in sorted((folder / "event_service" / "events").glob("*.json")):
        event = json.loads(file.read_text(encoding="utf-8"))
        _working_dirs(event.get("observation"), cwds)
        if event.get("kind") == "Condensation":
            out.append(RawCompaction(event["id"], event.get("summary") or None))
    return RawSession(_relative(folder), "openhands", _most(cwds), out)


def _most(counts: Counter[str]) -> str | None:
    return counts.most_common(1)[0][0] if counts else None


def _relative(path: Path) -> str:
    return path.relative_to(TRANSCRIPTS).as_posix()


def raw_sessions() -> list[RawSession]:
    """Every dev native transcript, read raw, in ``SOURCES`` order."""
    return [
        *map(_claude, CLAUDE),
        *map(_codex, CODEX),
        *map(_openhands_v0, OPENHANDS_V0),
        *map(_openhands_v1, OPENHANDS_V1),
    ]


@dataclass(frozen=True)
class AuditedCompaction:
    """One native compaction: where it is in the raw files, what the audit said about it."""

    raw: RawSession
    native_id: str
    summary: str | None
    entry: dict[str, Any]  # its ``audit --json`` entry
    rows: pl.DataFrame  # the audit job's rows for it: ARTIFACT_COLUMNS, in the job's order


@dataclass(frozen=True)
class NativeAudit:
    compactions: list[AuditedCompaction]
    views: pl.DataFrame  # the store's frames the audit read
    messages: pl.DataFrame


def build_native_audit(home: Path) -> NativeAudit:
    """Import the dev native set into ``home`` with the CLI, audit it, and pair each audited
    compaction with its raw one (per transcript, in history order)."""
    runner = CliRunner()
    done = runner.invoke(app, ["import", *map(str, SOURCES), "--home", str(home)])
    assert done.exit_code == 0, done.output
    with EventStore(home / "compactlens.duckdb", read_only=True) as store:
        entries = audit_json(store)["compactions"]
        compactions = frames.compactions_frame(store)
        views = frames.views_frame(store)
        messages = frames.messages_frame(store)
        synthetic = frames.synthetic_frame(store)
        dirs = _recorded_dirs(store, None)
        paths = dict(
            store.query(
                "SELECT session_id, CAST(metadata->>'source_path' AS VARCHAR) FROM sessions"
            ).iter_rows()
        )
    native = boundaries(compactions, views).filter(pl.col("origin") == "native")
    rows = artifacts_kept(views, messages, synthetic, native, dirs)
    by_file: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        file = _relative(Path(paths[entry["session_id"]]))
        by_file.setdefault(file, []).append(entry)
    out = []
    for raw in raw_sessions():
        audited = sorted(by_file.get(raw.file, []), key=lambda e: e["history_at"])
        assert len(audited) == len(raw.compactions), (raw.file, len(audited))
        for compaction, entry in zip(raw.compactions, audited, strict=True):
            mine = rows.filter(pl.col("compaction_id") == entry["compaction_id"])
            out.append(
                AuditedCompaction(
                    raw,
                    compaction.native_id,
                    compaction.summary,
                    entry,
                    mine.select(ARTIFACT_COLUMNS),
                )
            )
    return NativeAudit(out, views, messages)


_SEP = re.compile(r"\\")


def resolve(path: str, cwd: str | None) -> str:
    """``path`` as one absolute spelling, resolved against ``cwd`` when relative (plain
    ``posixpath`` rules on ``/``-separated text; a Windows drive in lower case)."""

    def spelt(p: str) -> str:
        p = _SEP.sub("/", p)
        return p[0].lower() + p[1:] if re.match(r"^[A-Za-z]:/", p) else p

    path = spelt(path)
    rooted = path.startswith(("/", "~/")) or re.match(r"^[a-z]:/", path) is not None
    if not rooted and cwd is not None:
        path = spelt(cwd).rstrip("/") + "/" + path
    drive = path[:2] if re.match(r"^[a-z]:", path) else ""
    rest = posixpath.normpath(path[len(drive) :])
    return drive + rest


def file_name(path: str) -> str:
    """The last segment of a path (``/`` or ``\\`` separated)."""
    return re.split(r"[\\/]", path)[-1]


def _said(summary: str, text: str, *, own_path: bool = False) -> bool:
    """``text`` occurs in ``summary`` as a whole: not glued to a longer name at either end
    (``own_path``: not the end of a longer path either)."""
    glued = r"(?<![A-Za-z0-9_./\\-])" if own_path else r"(?<![A-Za-z0-9_.-])"
    before = glued if re.match(r"\w", text) else ""
    after = r"(?![A-Za-z0-9_-])" if re.search(r"\w$", text) else ""
    return re.search(before + re.escape(text) + after, summary) is not None


def _has_tail(path: str, tail: str) -> bool:
    path = path.replace("\\", "/").strip("/")
    return path == tail or path.endswith("/" + tail)


def names(summary: str, artifact: str, paths: list[str]) -> bool:
    """Whether ``summary`` names ``artifact`` by path, by a tail of two or more segments that
    no other reported path has (said as a path of its own, not the end of a longer one), or by
    its file name (with a dot) that no other has."""
    if any(c.isspace() for c in artifact):
        return artifact in summary
    others = [p for p in paths if p != artifact]
    parts = re.split(r"[\\/]", artifact.strip("/"))
    tails = {"/".join(parts[i:]) for i in range(len(parts) - 1)}
    unique = {t for t in tails if not any(_has_tail(p, t) for p in others)}
    said = {artifact, artifact.strip("/")}
    name = file_name(artifact)
    if "." in name and not any(file_name(p) == name for p in others):
        said.add(name)
    return any(_said(summary, s) for s in said if s) or any(
        _said(summary, t, own_path=True) for t in unique
    )
