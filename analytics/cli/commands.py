"""What ``import``, ``replay``, ``ingest`` and ``rebuild`` do, without the terminal.

An import or replay only ever appends events to a fresh spool file (``SpoolSink``). When this
process can own the database it first brings the store up to date with the spool, and projects
the new events at the end; when another process owns it (``ingest --watch``, later the app),
the events stay in the spool for that owner to project, and the report says so.

Each session is placed by ``analytics.importers.identity``: unchanged since it was stored
(skipped), new, resumed (an interrupted import completed), or replaced (its source changed: a new
version, the old one superseded). A replay's identity is ``<imported id>@<window>#<config hash>``.
Progress is reported through callbacks; printing is the CLI's job. ``ingest`` and ``rebuild`` live
in ``analytics.cli.ingesting`` and are re-exported here.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from analytics.cli.ingesting import IngestReport, run_ingest, run_rebuild, run_watch
from analytics.cli.inputs import FormatChoice, input_files, iter_file
from analytics.importers import ImportedSession, ImportIssue
from analytics.importers.events import RecordEvents, amended, events_digest, session_events
from analytics.importers.identity import Catalog, Placement, Tail, fingerprint
from analytics.replay.driver import ReplayResult, replay_config_hash, replay_session
from analytics.store import DB_NAME, EventStore, StoreLockedError, open_store
from analytics.store.projector import IngestResult, Progress, Projector
from compactor import (
    CompactionRecord,
    CompactionTier,
    CompactorConfig,
    ProgressiveCompactor,
    SpoolSink,
)
from compactor.events import Capture, Event

PathArg = str | os.PathLike[str]
__all__ = [
    "FileProgress",
    "IngestReport",
    "RunReport",
    "load_config",
    "run_import",
    "run_ingest",
    "run_rebuild",
    "run_replay",
    "run_watch",
]


@dataclass
class RunReport:
    """What one import or replay did; ``issues`` are the inputs rejected, and why.

    ``sessions`` counts the sessions written (new, replaced or resumed); ``skipped`` those
    already stored unchanged. ``owner`` is set when another process owned the database, so
    the events were left in ``spool_file`` for it to project.
    """

    files: int = 0
    sessions: int = 0
    skipped: int = 0
    resumed: int = 0
    extended: int = 0
    """Sessions of a followed transcript that grew: only their new events were written."""
    replaced: list[tuple[str, str]] = field(default_factory=list)
    """(old session id, new session id) for each session whose source changed."""
    retired: list[tuple[str, str]] = field(default_factory=list)
    """(session id, file) for sessions an earlier run made from a file that no longer has them."""
    messages: int = 0
    records: int = 0
    harness_compactions: int = 0
    """The compactions the harness made itself, in the sessions this run stored."""
    issues: list[ImportIssue] = field(default_factory=list)
    replays: list[ReplayResult] = field(default_factory=list)
    ingest: IngestResult = field(default_factory=IngestResult)
    spool_error: str = ""
    owner: str = ""
    spool_file: Path | None = None
    events_written: int = 0

    @property
    def rejected(self) -> bool:
        return bool(self.issues or self.spool_error)

    def tier_counts(self) -> dict[CompactionTier, int]:
        counts: dict[CompactionTier, int] = {
            t: 0 for t in CompactionTier if t != CompactionTier.NONE
        }
        for replay in self.replays:
            for record in replay.effective:
                counts[record.tier] += 1
        return counts

    def notes(self) -> list[str]:
        """What happened beyond the counts, one sentence a line, for the terminal."""
        out = [
            f"replaced {old} by {new}: the source changed (or --force); the old version is "
            "marked superseded, the spool keeps both"
            for old, new in self.replaced
        ]
        out += [f"superseded {sid}: no longer in {file}" for sid, file in self.retired]
        if self.resumed:
            out.append(f"{self.resumed} session(s) completed that an interrupted run left partial")
        if self.skipped:
            out.append(f"{self.skipped} session(s) unchanged since they were stored: skipped")
        if self.owner:
            where = self.spool_file or "the spool"
            out.append(
                f"{self.owner} is owned by another process (the app or `compactlens ingest "
                f"--watch`): {self.events_written:,} events of this run were written to {where} "
                "and appear in the store when that process projects them (or run `compactlens "
                "ingest` once it has stopped)"
            )
        return out


FileProgress = Callable[[int, int, RunReport], None]
"""Called with (files done, files in all, the report so far) after each file."""


@dataclass
class _Run:
    """The spool sink of one import or replay, the store and projector when this process owns
    the database, and the catalog of what is stored."""

    sink: SpoolSink
    report: RunReport
    catalog: Catalog
    store: EventStore | None = None
    projector: Projector | None = None
    force: bool = False
    placed: dict[str, str] = field(default_factory=dict)
    """Imported session id -> the session id it was stored under in this run."""
    tails: dict[str, Tail] | None = None
    """A follower's tails by identity: a grown session is extended, not stored again."""

    def finish(self, on_ingest: Progress | None) -> None:
        self.sink.close()
        if self.sink.pending:
            self.report.spool_error = self.sink.last_error or "events could not be written"
        self.report.spool_file = self.sink.path
        self.report.events_written = self.sink.written
        if self.projector is not None:
            self.report.ingest.add(self.projector.ingest(on_ingest))

    def place(
        self, identity: str, print_: str, *, family: str, file: Path, messages: int, resumable: bool
    ) -> Placement | None:
        """Place one session; emit the superseding event if it replaces a version. None: it
        is stored unchanged, nothing to write."""
        placement = self.catalog.place(
            identity,
            print_,
            messages=messages,
            family=family,
            source_file=_source_file(file),
            resumable=resumable,
            force=self.force,
        )
        if placement.action == "unchanged":
            self.report.skipped += 1
            return None
        if placement.previous is not None and placement.action == "replaced":
            old = placement.previous
            reason = f"superseded by {placement.session_id}: {file} changed or --force"
            self.sink.emit(self.catalog.supersede(old, reason))
            self.report.replaced.append((old.session_id, placement.session_id))
        self.report.resumed += placement.action == "resumed"
        self.report.sessions += 1
        self.report.messages += messages
        return placement

    def retire_orphans(self, file: Path, family: str) -> None:
        """Supersede sessions an earlier run made from ``file`` that it no longer holds."""
        kept = set(self.placed.values())
        for old in self.catalog.orphans(_source_file(file), family, kept):
            self.sink.emit(self.catalog.supersede(old, f"no longer in {file}"))
            self.report.retired.append((old.session_id, str(file)))


def _source_file(file: Path) -> str:
    return str(file.resolve())


@contextmanager
def _open_run(home: PathArg, on_ingest: Progress | None, *, force: bool = False) -> Iterator[_Run]:
    """The run's sink and catalog; the store too unless another process owns it."""
    root = Path(home)
    sink = SpoolSink(root / "spool")
    try:
        store = open_store(root)
    except StoreLockedError:
        report = RunReport(owner=str(root / DB_NAME))
        yield _Run(sink, report, Catalog.from_spool(root / "spool"), force=force)
        return
    with store:
        projector = Projector(store, root / "spool")
        ingested = projector.ingest(on_ingest)  # so that "already stored" is up to date
        run = _Run(sink, RunReport(), Catalog.from_store(store), store, projector, force)
        run.report.ingest.add(ingested)
        yield run


def _content(imported: ImportedSession) -> str:
    """The part of an imported session a version is made of (not where the file lies)."""
    return imported.model_dump_json(exclude={"source_path", "metadata"})


def run_import(
    paths: Sequence[PathArg],
    home: PathArg,
    *,
    fmt: FormatChoice = "auto",
    capture: Capture = "full",
    on_file: FileProgress | None = None,
    on_ingest: Progress | None = None,
    tails: dict[str, Tail] | None = None,
) -> RunReport:
    """Import transcripts and record files as events, then project them if this process can.

    ``tails`` (a follower's, kept between its passes and updated here): a session that only
    grew since the tail was taken gets its new events appended to its live version, so a
    transcript followed as it is written costs the spool its size once, not once per pass."""
    with _open_run(home, on_ingest) as run:
        run.tails = tails
        report = run.report
        files = input_files(paths, report.issues)
        records = RecordEvents(capture, run.catalog.stored_records)
        for done, file in enumerate(files, start=1):
            sessions = 0
            for item in iter_file(file, fmt, report.issues):
                if isinstance(item, CompactionRecord):
                    _import_record(run, records, item, file)
                else:
                    _import_session(run, item, capture, file)
                    sessions += 1
            if sessions:
                run.retire_orphans(file, "import")
            report.files = done
            if on_file is not None:
                on_file(done, len(files), report)
        report.skipped += records.skipped
        run.finish(on_ingest)
    return report


def _import_session(run: _Run, imported: ImportedSession, capture: Capture, file: Path) -> None:
    parent = imported.parent_session_id
    if parent is not None and parent in run.placed:
        imported = imported.model_copy(update={"parent_session_id": run.placed[parent]})
    print_ = fingerprint(_content(imported), capture)
    if _extended(run, imported, capture, file, print_):
        return
    placement = run.place(
        imported.session_id,
        print_,
        family="import",
        file=file,
        messages=len(imported.messages),
        resumable=True,
    )
    sid = run.catalog.current(imported.session_id)
    run.placed[imported.session_id] = sid.session_id if sid else imported.session_id
    if placement is None:
        if run.tails is not None and sid is not None and imported.session_id not in run.tails:
            events = _version_events(imported, capture, file, print_, sid.session_id)
            _keep_tail(run, imported.session_id, sid.session_id, events)
        return
    run.report.harness_compactions += len(imported.compactions)
    events = _version_events(imported, capture, file, print_, placement.session_id)
    for event in events:
        run.sink.emit(event)
    _keep_tail(run, imported.session_id, placement.session_id, events)


def _keep_tail(
    run: _Run,
    identity: str,
    session_id: str,
    events: list[Event],
    revision: int = 0,
    known: tuple[int, str] = (0, ""),
) -> None:
    """Note, for a follower, that ``events`` are what the live version holds (its last
    message, if an event ends it, stored at ``revision``). ``known``: the digest of the first
    events, already taken (the digest goes on from it instead of hashing them again)."""
    if run.tails is None:
        return
    settled = len(events) - (bool(events) and events[-1].type == "message_appended")
    done, digest = known if known[0] <= settled else (0, "")
    run.tails[identity] = Tail(
        session_id,
        len(events),
        settled,
        events_digest(events[done:settled], digest),
        events_digest(events[settled:]),
        revision,
    )


def _version_events(
    imported: ImportedSession, capture: Capture, file: Path, print_: str, session_id: str
) -> list[Event]:
    """Every event of a version of ``imported`` stored under ``session_id``."""
    extra = _version_metadata(imported.session_id, print_, "import", file)
    return list(session_events(imported, capture, session_id=session_id, extra=extra))


def _extended(
    run: _Run, imported: ImportedSession, capture: Capture, file: Path, print_: str
) -> bool:
    """Append to the live version what a grown transcript added, when the run has a tail of
    it and the version's settled events are still what the tail says (else False: place it).
    A last message that grew is appended again, whole, as a new revision of itself."""
    identity = imported.session_id
    tail = (run.tails or {}).get(identity)
    cur = run.catalog.current(identity)
    if tail is None or cur is None or cur.session_id != tail.session_id or run.force:
        return False
    events = _version_events(imported, capture, file, print_, cur.session_id)
    if len(events) < tail.events or events_digest(events[: tail.settled]) != tail.digest:
        return False
    was_open = events[tail.settled : tail.events]
    revision = tail.revision
    added = events[tail.events :]
    if events_digest(was_open) != tail.open_digest:
        if len(was_open) != 1 or was_open[0].type != "message_appended":
            return False
        revision = max(tail.revision + 1, time.time_ns())  # newer than any earlier amendment
        added = [amended(was_open[0], revision), *added]
    run.placed[identity] = cur.session_id
    cur.fingerprint, cur.messages = print_, len(imported.messages)
    revision = revision if not events[tail.events :] else 0  # a new last message: revision 0
    _keep_tail(run, identity, cur.session_id, events, revision, (tail.settled, tail.digest))
    if not added:
        run.report.skipped += 1
        return True
    for event in added:
        run.sink.emit(event)
    run.report.extended += 1
    run.report.sessions += 1
    run.report.messages += sum(e.type == "message_appended" for e in added)
    run.report.harness_compactions += sum(e.type == "compaction_recorded" for e in added)
    return True


def _version_metadata(identity: str, print_: str, family: str, file: Path) -> dict[str, object]:
    return {
        "identity": identity,
        "content_sha256": print_,
        "family": family,
        "source_file": _source_file(file),
    }


def _import_record(run: _Run, records: RecordEvents, record: CompactionRecord, file: Path) -> None:
    events = records.events(record, str(file), fallback_id=file.stem)
    for event in events:
        run.sink.emit(event)
    if any(e.type == "compaction_recorded" for e in events):
        run.report.records += 1
    if any(e.type == "session_started" for e in events):
        run.report.sessions += 1


def load_config(path: Path) -> CompactorConfig:
    """A ``CompactorConfig`` from a JSON or TOML file of its fields (``.toml`` is TOML).

    Raises ``ValueError`` naming the file and the first bad field.
    """
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the file: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON"
        raise ValueError(f"{path}: not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object of CompactorConfig fields")
    try:
        return CompactorConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "config"
        raise ValueError(f"{path}: {where}: {err['msg']} (got {err.get('input')!r})") from None


def run_replay(
    paths: Sequence[PathArg],
    home: PathArg,
    compactor: ProgressiveCompactor,
    *,
    fmt: FormatChoice = "auto",
    capture: Capture = "full",
    force: bool = False,
    on_file: FileProgress | None = None,
    on_ingest: Progress | None = None,
    calibrate: bool = True,
) -> RunReport:
    """Replay every session under ``paths`` through ``compactor``, then project the events.

    A replay's identity is ``<imported id>@<window>#<config hash>`` (``replay_config_hash``):
    replays at other windows or under other settings sit side by side; the same replay of an
    unchanged transcript is skipped unless ``force``; a changed transcript replaces it. Without
    ``calibrate`` the transcript's usage is neither fed nor recorded: views are measured and
    priced by the byte estimate, as ``tune`` measures them.
    """
    family = f"@{compactor.context_window}#{replay_config_hash(compactor, calibrate=calibrate)}"
    with _open_run(home, on_ingest, force=force) as run:
        report = run.report
        files = input_files(paths, report.issues)
        for done, file in enumerate(files, start=1):
            sessions = 0
            for item in iter_file(file, fmt, report.issues):
                if isinstance(item, CompactionRecord):
                    report.issues.append(_not_replayable(file))
                    break
                if not calibrate:
                    item = item.uncalibrated()
                _replay_one(run, item, compactor, capture, family, file)
                sessions += 1
            if sessions:
                run.retire_orphans(file, family)
            report.files = done
            if on_file is not None:
                on_file(done, len(files), report)
        run.finish(on_ingest)
    return report


def _replay_one(
    run: _Run,
    imported: ImportedSession,
    compactor: ProgressiveCompactor,
    capture: Capture,
    family: str,
    file: Path,
) -> None:
    identity = f"{imported.session_id}{family}"
    parent = imported.parent_session_id
    if parent is not None and parent in run.placed:
        imported = imported.model_copy(update={"parent_session_id": run.placed[parent]})
    print_ = fingerprint(_content(imported), capture)
    system = 1 if imported.messages and imported.messages[0].role == "system" else 0
    placement = run.place(
        identity,
        print_,
        family=family,
        file=file,
        messages=len(imported.messages) - system,
        resumable=False,
    )
    current = run.catalog.current(identity)
    run.placed[imported.session_id] = current.session_id if current else identity
    if placement is None:
        return
    result = replay_session(
        imported,
        compactor,
        event_sink=run.sink,
        session_id=placement.session_id,
        capture=capture,
        metadata=_version_metadata(identity, print_, family, file),
    )
    run.report.replays.append(result)
    if result.events_lost and not run.report.spool_error:
        run.report.spool_error = (
            f"{result.events_lost} events of replay {result.session_id} could not be recorded"
        )


def _not_replayable(file: Path) -> ImportIssue:
    return ImportIssue(
        path=str(file),
        reason="holds harness9 compaction records, not a conversation: nothing to replay "
        "(load it with `compactlens import`)",
    )
