"""A tuning run started from the app: ``run_tune`` in a daemon thread, its progress kept.

One job at a time per app process (a second start while one runs is refused). Replays run
inline in that thread (``workers=0``): no process pool is forked inside the server, so the
form offers a small ``sample`` of the stored transcripts, not every one. The run
writes its log and recommended TOML under ``<home>/tuning`` like ``compactlens tune``; this
module only starts it, remembers what ``run_tune`` reported and keeps it beside the log as
``<run_id>-tune.json`` (``tune --json``'s object: the objective, the rule in words, the
recommended row, the held-back files, the per-model profiles and their warnings) with
``save_summary``, as ``compactlens tune`` does. The app has no login, so the
paths a page asks it to read are ``confine``d first: each must lie under the home or a folder
the app was started with (``--allow-path``), and a folder must hold no link leading out.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from analytics import TuneProgress, run_tune, save_summary

SMALL_GRID: dict[str, list[Any]] = {"warn": [0.5, 0.6], "full": [0.85]}
"""Two progressive configurations: a run that finishes in seconds on a few transcripts."""
SAMPLE_FILES = 5
"""How many transcript files the form offers by default: enough for held-back files and two
tuning folds, few enough that a run on one thread ends in about a minute."""


def sample(paths: Sequence[str], home: Path, n: int = SAMPLE_FILES) -> list[str]:
    """``n`` of ``paths`` (relative ones under ``home``; those that are no file left out),
    spread evenly over the smaller half by size: small enough to replay quickly, not only the
    tiniest. All of them when there are no more than ``n``. In ``paths``' order."""
    sizes: dict[str, int] = {}
    for path in paths:
        try:
            sizes[path] = (home / Path(path).expanduser()).stat().st_size
        except (OSError, ValueError):
            continue
    if len(sizes) <= n:
        return [p for p in paths if p in sizes]
    by_size = sorted(sizes, key=lambda p: (sizes[p], p))
    pool = by_size[: max(n, (len(by_size) + 1) // 2)]
    step = (len(pool) - 1) / max(n - 1, 1)
    chosen = {pool[round(i * step)] for i in range(n)}
    return [p for p in paths if p in chosen]


@dataclass
class TuningJob:
    """What a started run is doing: its progress, then its run id or its error."""

    paths: list[str]
    window: int
    progress: TuneProgress | None = None
    run_id: str | None = None
    recommended: str | None = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def running(self) -> bool:
        return not self.done.is_set()


class PathNotAllowedError(ValueError):
    """A path the app may not read: outside its folders, or leading out through a link."""


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def _leading_out(folder: Path, roots: Sequence[Path]) -> Path | None:
    """The first link under ``folder`` whose target is outside ``roots`` (None: none is)."""
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in sorted([*dirnames, *filenames]):
            entry = Path(dirpath) / name
            if entry.is_symlink() and not _inside(entry.resolve(), roots):
                return entry
    return None


def confine(paths: Sequence[str], home: Path, roots: Sequence[Path]) -> list[Path]:
    """Each of ``paths`` resolved (a relative one under ``home``), or ``PathNotAllowedError``
    for the first outside ``roots`` or (a folder) holding a link whose target is. Nothing is
    said about whether a refused path exists."""
    allowed = [root.resolve() for root in roots]
    shown = ", ".join(str(r) for r in allowed)
    out: list[Path] = []
    for given in paths:
        try:
            real = (home / Path(given).expanduser()).resolve()
        except (OSError, ValueError):  # a NUL byte, a name too long, a link loop
            raise PathNotAllowedError(f"{given!r} is not a usable path") from None
        if not _inside(real, allowed):
            raise PathNotAllowedError(
                f"{given!r} is outside the folders this app may read ({shown}); start it with "
                "`compactlens ui --allow-path DIR` to allow another"
            )
        link = _leading_out(real, allowed) if real.is_dir() else None
        if link is not None:
            raise PathNotAllowedError(
                f"{given!r} holds {str(link)!r}, a link to outside the folders this app may "
                f"read ({shown}); allow its target with `compactlens ui --allow-path DIR`"
            )
        out.append(real)
    return out


def readable(paths: Sequence[str], home: Path, roots: Sequence[Path]) -> list[str]:
    """The ``paths`` that ``confine`` would accept, as given (the form's suggestions)."""
    out = []
    for path in paths:
        try:
            confine([path], home, roots)
        except PathNotAllowedError:
            continue
        out.append(path)
    return out


_LOCK = threading.Lock()
_JOBS: dict[str, TuningJob] = {}


def current(home: Path) -> TuningJob | None:
    return _JOBS.get(str(home))


def start(
    home: Path,
    paths: Sequence[str],
    window: int,
    *,
    strategies: Sequence[str],
    trials: int = 0,
    grid: Mapping[str, Sequence[Any]] = SMALL_GRID,
) -> TuningJob:
    """Start a run unless one is running for ``home`` (then that one is returned)."""
    with _LOCK:
        job = _JOBS.get(str(home))
        if job is not None and job.running:
            return job
        job = TuningJob(list(paths), window)
        _JOBS[str(home)] = job
    thread = threading.Thread(
        target=_run,
        args=(job, home, dict(grid), list(strategies), trials),
        name="compactlens-tune",
        daemon=True,
    )
    thread.start()
    return job


def _run(
    job: TuningJob,
    home: Path,
    grid: Mapping[str, Sequence[Any]],
    strategies: list[str],
    trials: int,
) -> None:
    def on_progress(progress: TuneProgress) -> None:
        job.progress = progress

    try:
        report = run_tune(
            job.paths,
            job.window,
            grid=grid,
            trials=trials,
            strategies=strategies,
            workers=0,
            home=home,
            progress=on_progress,
        )
        job.run_id = report.run_id
        save_summary(home, report)
        job.recommended = str(report.recommended.path) if report.recommended else None
    except Exception as exc:  # the page shows it; the thread must end cleanly
        job.error = f"{type(exc).__name__}: {exc}"
    finally:
        job.done.set()


SHOWN = (
    "recommended",
    "name",
    "kind",
    "cost",
    "tokens_billed",
    "cache_read_tokens",
    "cache_write_tokens",
    "saved_share",
    "turns_over_window",
    "emergencies",
    "artifact_retention",
    "anchor_retention",
    "violations",
)
RECOMMENDED = "◀ recommended"


def summary_table(summary: dict[str, Any]) -> pl.DataFrame:
    """``tune --json``'s strategies with the recommended one marked, cheapest first on the
    run's objective."""
    chosen = (summary.get("recommended") or {}).get("name")
    rows = [
        {**{k: v for k, v in s.items() if k != "config"}, "recommended": ""}
        for s in summary["strategies"]
    ]
    table = pl.DataFrame(rows, infer_schema_length=None).with_columns(
        recommended=pl.when(pl.col("name") == chosen)
        .then(pl.lit(RECOMMENDED))
        .otherwise(pl.lit(""))
    )
    order = "cost" if summary.get("objective") == "cost" else "tokens_billed"
    return table.sort(order).select([c for c in SHOWN if c in table.columns])
