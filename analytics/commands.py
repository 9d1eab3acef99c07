"""What ``import``, ``replay``, ``ingest`` and ``rebuild`` do, without the terminal.

Each run opens the store first (a locked, missing-schema or unreadable database fails before
anything is written), brings it up to date with the spool, writes new events to a fresh spool
file through ``SpoolSink`` and projects them. Inputs already in the store are skipped: an
imported session whose messages are all stored, a replay whose ``<session>@<window>`` id is
stored. Progress is reported through callbacks; printing is the CLI's job.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import threading
import tomllib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from pydantic import ValidationError

from analytics.importers import ImportedSession, ImportIssue
from analytics.importing_events import RecordEvents, session_events
from analytics.inputs import FormatChoice, input_files, iter_file
from analytics.projector import IngestResult, Progress, Projector, rebuild
from analytics.replay import ReplayResult, replay_session
from analytics.stats import quarantined_since
from analytics.store import DB_NAME, EventStore, QuarantinedLine
from compactor import (
    Capture,
    CompactionRecord,
    CompactionTier,
    CompactorConfig,
    ProgressiveCompactor,
    SpoolSink,
)

PathArg = str | os.PathLike[str]


@dataclass
class RunReport:
    """What one import or replay did; ``issues`` are the inputs rejected, and why."""

    files: int = 0
    sessions: int = 0
    skipped: int = 0
    messages: int = 0
    records: int = 0
    issues: list[ImportIssue] = field(default_factory=list)
    replays: list[ReplayResult] = field(default_factory=list)
    ingest: IngestResult = field(default_factory=IngestResult)
    spool_error: str = ""

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


FileProgress = Callable[[int, int, RunReport], None]
"""Called with (files done, files in all, the report so far) after each file."""


@dataclass
class _Run:
    """The open store, its projector and the spool sink of one import or replay."""

    store: EventStore
    projector: Projector
    sink: SpoolSink
    report: RunReport

    def finish(self, on_ingest: Progress | None) -> None:
        self.sink.close()
        if self.sink.pending:
            self.report.spool_error = self.sink.last_error or "events could not be written"
        self.project(on_ingest)

    def project(self, on_ingest: Progress | None) -> None:
        self.report.ingest.add(self.projector.ingest(on_ingest))


@contextmanager
def _open_run(home: PathArg) -> Iterator[_Run]:
    root = Path(home)
    with EventStore.for_home(root) as store:
        projector = Projector(store, root / "spool")
        yield _Run(store, projector, SpoolSink(root / "spool"), RunReport())


def _message_counts(store: EventStore) -> dict[str, int]:
    frame = store.query("SELECT session_id, count(*) FROM messages GROUP BY session_id")
    return {str(sid): int(n) for sid, n in frame.iter_rows()}


def _stored_records(store: EventStore, session_id: str) -> tuple[int, set[str]] | None:
    seq = store.query("SELECT max(seq) FROM events WHERE session_id = ?", [session_id]).item()
    if seq is None:
        return None
    ids = store.query("SELECT id FROM compactions WHERE session_id = ?", [session_id])
    return int(seq) + 1, {str(i) for i in ids.to_series()}


def run_import(
    paths: Sequence[PathArg],
    home: PathArg,
    *,
    fmt: FormatChoice = "auto",
    capture: Capture = "full",
    on_file: FileProgress | None = None,
    on_ingest: Progress | None = None,
) -> RunReport:
    """Import transcripts and record files as events, then project them."""
    with _open_run(home) as run:
        report = run.report
        files = input_files(paths, report.issues)
        run.project(on_ingest)  # so that "already stored" below is up to date
        stored = _message_counts(run.store)
        records = RecordEvents(capture, lambda sid: _stored_records(run.store, sid))
        for done, file in enumerate(files, start=1):
            for item in iter_file(file, fmt, report.issues):
                if isinstance(item, CompactionRecord):
                    _import_record(run, records, item, file)
                else:
                    _import_session(run, item, capture, stored)
            report.files = done
            if on_file is not None:
                on_file(done, len(files), report)
        report.skipped += records.skipped
        run.finish(on_ingest)
    return report


def _import_session(
    run: _Run, imported: ImportedSession, capture: Capture, stored: dict[str, int]
) -> None:
    if stored.get(imported.session_id, -1) >= len(imported.messages):
        run.report.skipped += 1
        return
    stored[imported.session_id] = len(imported.messages)
    for event in session_events(imported, capture):
        run.sink.emit(event)
    run.report.sessions += 1
    run.report.messages += len(imported.messages)


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
    on_file: FileProgress | None = None,
    on_ingest: Progress | None = None,
) -> RunReport:
    """Replay every session under ``paths`` through ``compactor``, then project the events.

    A replay's session id is ``<imported id>@<window>``, so replays at different windows
    coexist; one already in the store is skipped.
    """
    with _open_run(home) as run:
        report = run.report
        files = input_files(paths, report.issues)
        run.project(on_ingest)
        stored = set(run.store.query("SELECT session_id FROM sessions").to_series().to_list())
        for done, file in enumerate(files, start=1):
            for item in iter_file(file, fmt, report.issues):
                if isinstance(item, CompactionRecord):
                    report.issues.append(_not_replayable(file))
                    break
                sid = f"{item.session_id}@{compactor.context_window}"
                if sid in stored:
                    report.skipped += 1
                    continue
                stored.add(sid)
                report.replays.append(
                    replay_session(item, compactor, event_sink=run.sink, session_id=sid)
                )
                report.sessions += 1
                report.messages += len(item.messages)
            report.files = done
            if on_file is not None:
                on_file(done, len(files), report)
        run.finish(on_ingest)
    return report


def _not_replayable(file: Path) -> ImportIssue:
    return ImportIssue(
        path=str(file),
        reason="holds harness9 compaction records, not a conversation: nothing to replay "
        "(load it with `compactlens import`)",
    )


@dataclass
class IngestReport:
    """One projection of the spool: what it did and the lines it quarantined."""

    result: IngestResult
    quarantined: list[QuarantinedLine]
    backup: Path | None = None
    """For a rebuild, where the old database file was moved."""


def run_ingest(home: PathArg, *, on_ingest: Progress | None = None) -> IngestReport:
    """Project everything complete in the spool now."""
    root = Path(home)
    with EventStore.for_home(root) as store:
        started = dt.datetime.now(dt.UTC)
        result = Projector(store, root / "spool").ingest(on_ingest)
        return IngestReport(result, quarantined_since(store, started))


def run_watch(
    home: PathArg,
    *,
    interval_s: float,
    on_result: Callable[[IngestResult], None] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> IngestReport:
    """Project the spool every ``interval_s`` until SIGTERM or SIGINT, then once more.

    The projector runs in a worker thread; the main thread only waits, so that a signal handler
    never runs while the main thread holds a lock the handler needs.
    """
    root = Path(home)
    with EventStore.for_home(root) as store:
        started = dt.datetime.now(dt.UTC)
        projector = Projector(store, root / "spool")
        stop = threading.Event()
        with _stop_on_signals(stop):
            if on_ready is not None:
                on_ready()
            result = _watch_in_thread(projector, stop, interval_s, on_result)
        return IngestReport(result, quarantined_since(store, started))


@dataclass
class _Outcome:
    result: IngestResult | None = None
    error: BaseException | None = None


def _watch_in_thread(
    projector: Projector,
    stop: threading.Event,
    interval_s: float,
    on_result: Callable[[IngestResult], None] | None,
) -> IngestResult:
    outcome = _Outcome()

    def work() -> None:
        try:
            outcome.result = projector.watch(interval_s=interval_s, stop=stop, on_result=on_result)
        except BaseException as exc:
            outcome.error = exc

    worker = threading.Thread(target=work, name="compactlens-watch", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
    if outcome.error is not None:
        raise outcome.error
    assert outcome.result is not None
    return outcome.result


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


def run_rebuild(home: PathArg, *, on_ingest: Progress | None = None) -> IngestReport:
    """Recreate the database from the spool; refuses while another process holds it."""
    root = Path(home)
    started = dt.datetime.now(dt.UTC)
    result = rebuild(root, on_ingest)
    with EventStore(root / DB_NAME, read_only=True) as store:
        quarantined = quarantined_since(store, started)
    return IngestReport(result.ingest, quarantined, result.backup)
