"""Folds by transcript file: the held-back files, the tuning folds, and the spread across them.

Sessions are grouped by the transcript file of their root session (a sidechain follows the
main chain it belongs to through ``parent_session_id``, whatever file it came from), so a main
chain and its sidechains are never on both sides. About ``HELD_BACK_SHARE`` of the files, by a
hash of the path (stable across runs and machines), are held back; the other files are dealt
into up to ``FOLDS`` tuning folds. ``fold_spread`` is the k-fold cross-validation of the
recommendation rule: each fold's figures of the recommended config, and of the config the rule
chooses on the other folds, measured on that fold; ``figures_by_file`` sums a trial's figures
per transcript file. Nothing here replays anything.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analytics.tuning.metrics import SessionMetrics, totals
from analytics.tuning.pareto import OBJECTIVE_COLUMNS
from analytics.tuning.recommend import HELD_BACK_SHARE, choose, figures_table
from analytics.tuning.specs import StrategySpec

FOLDS = 5
"""How many tuning folds at most (fewer when there are fewer tuning files)."""
FOLD_FIGURES = ("sessions", "cost", "tokens_billed", "turns_over_window", "artifact_retention")
"""The figures of a config on one fold that ``tune --json`` reports."""


@dataclass(frozen=True)
class SessionSource:
    """What the split needs of a session: its id, its transcript file, its parent's id."""

    session_id: str
    source_path: str
    parent_session_id: str | None = None


@dataclass(frozen=True)
class FileSplit:
    """Session ids on each side, the files behind them, and the tuning folds."""

    tune: list[str]
    held: list[str]
    held_files: list[str]
    folds: list[list[str]]
    """Session ids of each tuning fold (empty with fewer than two tuning files)."""
    fold_files: list[list[str]]


def _bucket(path: str) -> float:
    return int(hashlib.sha256(path.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def _root_files(sessions: Sequence[SessionSource]) -> dict[str, str]:
    """Each session's group: the source file of its root session among ``sessions``."""
    by_id = {s.session_id: s for s in sessions}
    out: dict[str, str] = {}
    for s in sessions:
        root, seen = s, {s.session_id}
        while root.parent_session_id in by_id and root.parent_session_id not in seen:
            root = by_id[root.parent_session_id]
            seen.add(root.session_id)
        out[s.session_id] = root.source_path or root.session_id
    return out


def split_by_file(sessions: Sequence[SessionSource]) -> FileSplit:
    """Held-back and tuning sessions by transcript file (see the module text); both sides
    non-empty when there are two files or more (a single file is both)."""
    group = _root_files(sessions)
    files = sorted(set(group.values()), key=lambda f: (_bucket(f), f))
    if len(files) < 2:
        ids = sorted(group)
        return FileSplit(ids, ids, files, [], [])
    held_files = [f for f in files if _bucket(f) < HELD_BACK_SHARE] or files[-1:]
    tune_files = [f for f in files if f not in held_files] or held_files[:1]
    held_files = [f for f in held_files if f not in tune_files] or held_files
    k = min(FOLDS, len(tune_files))
    fold_files = [tune_files[i::k] for i in range(k)] if k >= 2 else []
    members = {f: sorted(sid for sid, g in group.items() if g == f) for f in files}
    return FileSplit(
        tune=sorted(sid for f in tune_files for sid in members[f]),
        held=sorted(sid for f in held_files for sid in members[f]),
        held_files=sorted(held_files),
        folds=[sorted(sid for f in fold for sid in members[f]) for fold in fold_files],
        fold_files=[sorted(fold) for fold in fold_files],
    )


def _figures(metrics: Sequence[SessionMetrics], ids: Collection[str]) -> dict[str, Any]:
    found = totals([m for m in metrics if m.session_id in ids], window=1)
    return {k: found[k] for k in FOLD_FIGURES}


def fold_spread(
    trials: Mapping[str, tuple[StrategySpec, Sequence[SessionMetrics]]],
    split: FileSplit,
    recommended: str,
    window: int,
    objective: str = "tokens",
) -> dict[str, Any]:
    """Per tuning fold: its files and sessions, the recommended trial's figures on it, and the
    trial the rule chooses on the other folds with its figures on it; then the min, median and
    max over the folds of the recommended trial's figure on ``objective``, as a sum and per
    session (folds of files differ in size)."""
    column = OBJECTIVE_COLUMNS[objective]
    rows: list[dict[str, Any]] = []
    for i, ids in enumerate(split.folds):
        rest = {s for j, fold in enumerate(split.folds) if j != i for s in fold}
        table = figures_table(trials, rest, window)
        other = choose(table, objective) if table.height else None
        rows.append(
            {
                "fold": i,
                "files": split.fold_files[i],
                "recommended": _figures(trials[recommended][1], set(ids)),
                "chosen_on_the_other_folds": trials[other][0].name if other else None,
                "its_figures": _figures(trials[other][1], set(ids)) if other else None,
            }
        )
    values = [float(r["recommended"][column]) for r in rows]
    each = [
        v / max(int(r["recommended"]["sessions"]), 1) for v, r in zip(values, rows, strict=True)
    ]
    return {
        "objective": column,
        "folds": rows,
        "spread": _spread(values),
        "spread_per_session": _spread(each),
    }


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def figures_by_file(
    metrics: Sequence[SessionMetrics], files: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Sessions, tokens billed and cost of ``metrics`` per transcript file, for the sessions
    ``files`` maps (session id to file)."""
    rows: dict[str, list[SessionMetrics]] = {}
    for m in metrics:
        if m.session_id in files:
            rows.setdefault(files[m.session_id], []).append(m)
    return {
        path: {
            "sessions": len(found),
            "tokens_billed": sum(m.tokens_billed for m in found),
            "cost": sum(m.cost for m in found),
        }
        for path, found in sorted(rows.items())
    }
