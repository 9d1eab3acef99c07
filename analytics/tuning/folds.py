"""Folds by transcript file: the held-back files, the tuning folds, and the spread across them.

Sessions are grouped by the transcript file of their root session (a sidechain follows the
main chain it belongs to through ``parent_session_id``, whatever file it came from), so a main
chain and its sidechains are never on both sides. ``HELD_BACK_SHARE`` of the files (rounded, at
least one) are held back: those whose name hashes lowest, the name being the file's own and its
folder's (``project/session.jsonl``), so the same transcripts split the same way wherever they
sit on whichever machine; the other files are dealt into up to ``FOLDS`` tuning folds (``tune
--hold-back`` names the held-back files instead). ``fold_spread`` is the k-fold cross-validation
of the recommendation rule: each fold's figures of the recommended config, and of the config
the rule chooses on the other folds, measured on that fold; ``figures_by_file`` sums a trial's
figures per transcript file. Nothing here replays anything.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
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


def _rank(path: str) -> tuple[str, str]:
    """Where a file falls in the held-back order: the hash of its last two path parts, then
    the full path (two folders may hold files of the same names)."""
    name = "/".join(PurePath(path).parts[-2:])
    return hashlib.sha256(name.encode()).hexdigest(), path


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


def split_by_file(
    sessions: Sequence[SessionSource], held_back: Collection[str] | None = None
) -> FileSplit:
    """Held-back and tuning sessions by transcript file (see the module text); both sides
    non-empty when there are two files or more (a single file is both). ``held_back`` names
    the files to hold back instead (source paths as the sessions give them; the caller checks
    that each is one of theirs and that some file is left to tune on)."""
    group = _root_files(sessions)
    files = sorted(set(group.values()), key=_rank)
    if held_back is not None:
        held_files = [f for f in files if f in held_back]
        tune_files = [f for f in files if f not in held_back]
    elif len(files) < 2:
        ids = sorted(group)
        return FileSplit(ids, ids, files, [], [])
    else:
        held = min(len(files) - 1, max(1, round(HELD_BACK_SHARE * len(files))))
        held_files, tune_files = files[:held], files[held:]
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
