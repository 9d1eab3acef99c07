"""Post-mortems grouped by session and cause: what a person reads before any single emergency.

A session that keeps hitting Emergency for one reason has one story told N times; read one by
one, the post-mortems of a store bury it under a repeated sentence per turn. ``postmortem_groups``
folds the per-emergency dicts of ``analytics.jobs.postmortem.postmortem_dicts`` (counterfactuals
merged) into one group per (session, cause): its count, its turns as compact ranges, one
representative emergency (its sentence, lead-up and top contributors) and one fix, and how many
of its emergencies are settled. ``fleet_summary`` counts the groups for the top of a listing;
``sampled_groups`` picks the groups a short report shows, across sessions.

Definitions (each one a choice a reader may want to check):

- an emergency is *settled* when its smallest change was verified by replaying the whole session
  (``smallest_change_verified``) or its cause is unavoidable at this window and says the window
  that would avoid it (``window_needed`` not null);
- the representative of a group is its first emergency (by turn) with a verified smallest change,
  else its first emergency: the fix shown is one a person can apply and check, and the lead-up
  shown is the one that fix was verified against;
- the group's fix is the representative's: a fix verified for one emergency is not claimed to
  avoid the others (``verified_fixes`` counts those verified for their own turn); where no
  config avoids it, the window named is the largest any emergency of the group needs;
- groups of a session follow each other largest first (ties: the earlier first turn); sessions
  keep the order of the post-mortems they come from (by session id).

Pure: no I/O and no replay; it chooses and counts, it computes nothing new about an emergency.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from analytics.jobs.explanations import fix_words

Postmortem = Mapping[str, Any]


def is_settled(pm: Postmortem) -> bool:
    """A verified fix, or an unavoidable cause with the window that would avoid it."""
    return bool(pm.get("smallest_change_verified")) or pm.get("window_needed") is not None


def turn_ranges(turns: Iterable[int | None]) -> list[tuple[int, int]]:
    """Known turns as sorted runs of consecutive numbers: 12..19, 23, 40..52 as
    ``[(12, 19), (23, 23), (40, 52)]`` (unknown turns are left out, duplicates merged)."""
    runs: list[tuple[int, int]] = []
    for turn in sorted({t for t in turns if t is not None}):
        if runs and turn == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], turn)
        else:
            runs.append((turn, turn))
    return runs


def turns_text(turns: Iterable[int | None]) -> str:
    """``"turns 12–19, 23, 40–52"``, ``"turn 7"``; unknown turns counted: ``"turn ?"``."""
    listed = list(turns)
    runs = turn_ranges(listed)
    parts = [str(a) if a == b else f"{a}–{b}" for a, b in runs]
    unknown = sum(t is None for t in listed)
    if unknown:
        parts.append("?" if unknown == 1 else f"? ({unknown} unknown)")
    plural = len(set(listed)) > 1 or unknown > 1
    return f"turn{'s' if plural else ''} {', '.join(parts) or '?'}"


def _representative(items: Sequence[Postmortem]) -> Postmortem:
    ordered = sorted(items, key=_turn_order)
    verified = [pm for pm in ordered if pm.get("smallest_change_verified")]
    return verified[0] if verified else ordered[0]


def _turn_order(pm: Postmortem) -> tuple[bool, int]:
    turn = pm.get("turn")
    return (turn is None, turn if isinstance(turn, int) else 0)


def _fix(rep: Postmortem, window_needed: int | None, count: int) -> dict[str, Any]:
    """The representative's fix; where none avoids it, the window that avoids every
    emergency of the group (the largest any of them needs)."""
    words = fix_words({**rep, "window_needed": window_needed or rep.get("window_needed")})
    own = rep.get("window_needed")
    if window_needed and own and own != window_needed and not rep.get("smallest_change_verified"):
        words += f" (for all {count:,}; turn {rep.get('turn')} alone needs {own:,})"
    return {
        "compaction_id": rep.get("compaction_id"),
        "turn": rep.get("turn"),
        "change": rep.get("smallest_change"),
        "detail": rep.get("smallest_change_detail"),
        "config": rep.get("smallest_change_config"),
        "verified": bool(rep.get("smallest_change_verified")),
        "words": words,
    }


def _group(session_id: str, cause: str | None, items: Sequence[Postmortem]) -> dict[str, Any]:
    rep = _representative(items)
    turns = sorted((pm.get("turn") for pm in items), key=lambda t: (t is None, t or 0))
    settled = sum(is_settled(pm) for pm in items)
    needed = max(
        (int(pm["window_needed"]) for pm in items if pm.get("window_needed") is not None),
        default=None,
    )
    dropped = [pm.get("dropped") or {} for pm in items]
    return {
        "session_id": session_id,
        "cause": cause,
        "count": len(items),
        "turns": turns,
        "turn_ranges": [list(r) for r in turn_ranges(turns)],
        "turns_text": turns_text(turns),
        "compaction_ids": [pm.get("compaction_id") for pm in sorted(items, key=_turn_order)],
        "representative": {"compaction_id": rep.get("compaction_id"), "turn": rep.get("turn")},
        "explanation": rep.get("explanation"),
        "lead_up": list(rep.get("lead_up") or []),
        "top_contributors": list(rep.get("top_contributors") or []),
        "fix": _fix(rep, needed, len(items)),
        "verified_fixes": sum(bool(pm.get("smallest_change_verified")) for pm in items),
        "window_needed": needed,
        "dropped": {
            "messages": sum(int(d.get("messages") or 0) for d in dropped),
            "tokens": sum(int(d.get("tokens") or 0) for d in dropped),
        },
        "settled": settled,
        "settled_share": settled / len(items),
    }


def postmortem_groups(postmortems: Iterable[Postmortem]) -> list[dict[str, Any]]:
    """One group per (session, cause) of ``postmortems`` (see the module doc for the keys'
    choices): ``session_id``, ``cause``, ``count``, ``turns`` (sorted), ``turn_ranges``,
    ``turns_text``, ``compaction_ids``, ``representative`` (``compaction_id``, ``turn``), its
    ``explanation``, ``lead_up`` and ``top_contributors``, ``fix`` (``change``, ``detail``,
    ``config``, ``verified``, ``words``, and the representative's ``turn``),
    ``verified_fixes``, ``window_needed`` (the largest of the group's), ``dropped`` (summed),
    ``settled`` and ``settled_share``."""
    by_session: dict[str, dict[str | None, list[Postmortem]]] = {}
    for pm in postmortems:
        causes = by_session.setdefault(str(pm["session_id"]), {})
        causes.setdefault(pm.get("cause"), []).append(pm)
    out: list[dict[str, Any]] = []
    for sid, causes in by_session.items():
        groups = [_group(sid, cause, items) for cause, items in causes.items()]
        groups.sort(key=lambda g: (-g["count"], _first_turn(g), str(g["cause"])))
        out.extend(groups)
    return out


def _first_turn(group: Mapping[str, Any]) -> int:
    known = [t for t in group["turns"] if t is not None]
    return min(known) if known else 0


def fleet_summary(groups: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The figures above a grouped listing: ``emergencies``, ``sessions``, ``groups``,
    ``by_cause`` (emergencies per cause, most first; ``null`` cause as ``"unknown"``),
    ``settled`` and ``settled_share`` (null without emergencies)."""
    causes: Counter[str] = Counter()
    for g in groups:
        causes[str(g["cause"] or "unknown")] += int(g["count"])
    total = sum(int(g["count"]) for g in groups)
    settled = sum(int(g["settled"]) for g in groups)
    return {
        "emergencies": total,
        "sessions": len({g["session_id"] for g in groups}),
        "groups": len(groups),
        "by_cause": dict(sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))),
        "settled": settled,
        "settled_share": settled / total if total else None,
    }


def sampled_groups(groups: Sequence[Mapping[str, Any]], sessions: int) -> list[Mapping[str, Any]]:
    """The largest group of each of the ``sessions`` sessions with most emergencies (ties: the
    order of ``groups``), most emergencies first: a sample across sessions, not the first
    session's many groups."""
    totals: Counter[str] = Counter()
    first: dict[str, Mapping[str, Any]] = {}
    for g in groups:
        sid = str(g["session_id"])
        totals[sid] += int(g["count"])
        if sid not in first or g["count"] > first[sid]["count"]:
            first[sid] = g
    order = {sid: i for i, sid in enumerate(first)}
    chosen = sorted(first, key=lambda sid: (-totals[sid], order[sid]))[: max(sessions, 0)]
    return [first[sid] for sid in chosen]
