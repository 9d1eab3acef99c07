"""The run log: ``<home>/tuning/<run_id>.jsonl``, one header line then one line per trial.

Each trial line is appended and fsynced as soon as its task finishes, so a crashed run resumes
by reading the done trials and skipping them (a torn last line is cut off first). The run id is
a hash of what decides the results (sessions, window, specs, search settings), so the same
command resumes the same run. ``load_runs`` gives the app Polars frames of every run. The event
schema (``compactor.events``) has no tuning events, so runs live beside the spool, not in it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, ValidationError

from analytics.tuning.metrics import SessionMetrics
from analytics.tuning.specs import StrategySpec

TUNING_DIR = "tuning"


class RunHeader(BaseModel):
    """The first line: what the run is."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["tuning_run_started"] = "tuning_run_started"
    run_id: str
    window: int
    sessions: list[str]
    held_back: list[str]
    trials: int
    started_at: datetime


class TrialRecord(BaseModel):
    """One finished trial: a strategy over every session of the run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["tuning_trial_finished"] = "tuning_trial_finished"
    run_id: str
    key: str
    """``grid:<name>``, ``rival:<name>`` or ``optuna:<number>``."""
    name: str
    spec: StrategySpec
    metrics: list[SessionMetrics]


class RunLog:
    """Append-only trial lines of one run; ``done`` holds the trials already finished."""

    def __init__(self, path: Path, header: RunHeader) -> None:
        self.path = path
        self.header = header
        self.done: dict[str, TrialRecord] = {}
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            self._resume()
        else:
            self._append(header.model_dump_json())

    def _resume(self) -> None:
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) != len(data):
            with self.path.open("r+b") as fh:  # a torn last line from a crash
                fh.truncate(len(complete))
        lines = complete.decode("utf-8").splitlines()
        if not lines:
            self._append(self.header.model_dump_json())
            return
        for line in lines[1:]:
            try:
                record = TrialRecord.model_validate_json(line)
            except ValidationError:
                continue
            self.done[record.key] = record

    def _append(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def add(self, record: TrialRecord) -> None:
        self._append(record.model_dump_json())
        self.done[record.key] = record


def run_path(home: Path, run_id: str) -> Path:
    return home / TUNING_DIR / f"{run_id}.jsonl"


def new_header(
    run_id: str, window: int, sessions: list[str], held_back: list[str], trials: int
) -> RunHeader:
    return RunHeader(
        run_id=run_id,
        window=window,
        sessions=sessions,
        held_back=held_back,
        trials=trials,
        started_at=datetime.now(UTC),
    )


@dataclass(frozen=True)
class TuningFrames:
    """Every run under a home: ``runs`` (one row each), ``trials`` (one row per trial and
    session: the spec's name, kind and settings as JSON, whether the session was held back,
    every ``SessionMetrics`` field and ``tokens_billed``)."""

    runs: pl.DataFrame
    trials: pl.DataFrame


def _read(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    header: dict[str, Any] | None = None
    rows: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if data.get("type") == "tuning_run_started":
            header = data
        elif data.get("type") == "tuning_trial_finished" and header is not None:
            held = set(header.get("held_back", []))
            settings = json.dumps(StrategySpec.model_validate(data["spec"]).settings())
            rows += [
                {
                    "run_id": data["run_id"],
                    "key": data["key"],
                    "name": data["name"],
                    "kind": data["spec"]["kind"],
                    "settings": settings,
                    "held_back": m["session_id"] in held,
                    **m,
                }
                for m in data["metrics"]
            ]
    return header, rows


def load_runs(home: Path) -> TuningFrames:
    """Polars frames of every run log under ``<home>/tuning`` (unreadable lines skipped)."""
    runs: list[dict[str, Any]] = []
    trials: list[dict[str, Any]] = []
    for path in sorted((home / TUNING_DIR).glob("*.jsonl")):
        header, rows = _read(path)
        if header is None:
            continue
        runs.append(
            {
                "run_id": header["run_id"],
                "window": header["window"],
                "sessions": len(header["sessions"]),
                "held_back": len(header["held_back"]),
                "trials_planned": header["trials"],
                "trials_done": len({r["key"] for r in rows}),
                "started_at": header["started_at"],
                "path": str(path),
            }
        )
        trials += rows
    run_frame = pl.DataFrame(runs)
    if run_frame.height:
        run_frame = run_frame.with_columns(pl.col("started_at").str.to_datetime(time_zone="UTC"))
    trial_frame = pl.DataFrame(trials, infer_schema_length=None)
    if trial_frame.height:
        billed = pl.col("view_tokens") + pl.col("summarizer_input_tokens")
        trial_frame = trial_frame.with_columns(
            tokens_billed=billed + pl.col("summarizer_output_tokens")
        )
    return TuningFrames(runs=run_frame, trials=trial_frame)
