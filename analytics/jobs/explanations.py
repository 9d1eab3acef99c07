"""The words of a post-mortem: its cause's keys and the one sentence a person reads first.

``cause_keys`` turns one row of the emergencies frame (with the columns of
``analytics.jobs.causes``) into the post-mortem's ``cause``, ``explanation``, ``window_needed``,
``burst`` and the figures behind them; it computes nothing the causes job did not, it only says
it. ``fix_words`` and ``drop_reason_words`` are the words the CLI, the report and the app share
for a post-mortem's fix and a silent drop's reason. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from analytics.jobs.causes import UNAVOIDABLE


def _pct(value: float | None) -> str:
    return "an unknown share" if value is None else f"{value:.0%}"


def _tokens(value: int | None) -> str:
    return "an unknown number of" if value is None else f"{value:,}"


def _manual(row: Mapping[str, Any]) -> str:
    why = f" (the summariser failed: {row['error_code']})" if row.get("error_code") else ""
    return (
        f"A manual /compact at turn {row['turn']} ended in emergency truncation{why}: the "
        "history could not be summarised under the window."
    )


def _fixed(row: Mapping[str, Any]) -> str:
    least, missing = row.get("smallest_prompt_tokens"), row.get("history_missing_tokens")
    reported = f"; the provider counted no prompt of it under {least:,} tokens" if least else ""
    if least and missing:
        reported = (
            f"; the smallest prompt the provider counted was {least:,} tokens, about "
            f"{missing:,} of them history this transcript does not hold (it starts mid-session)"
        )
    window = row.get("context_window")
    fixed = row.get("fixed_tokens") or 0
    share = fixed / window if window else None
    return (
        f"The prompt every turn carries (system prompt, harness overhead, reserve and task) is "
        f"{_tokens(fixed)} tokens{reported}: {_pct(share)} of the {_tokens(window)}-token "
        f"window, at or over the Emergency threshold ({_pct(row.get('threshold'))}). "
        f"{_unavoidable(row)} (where it stays under Warn)."
    )


def _unavoidable(row: Mapping[str, Any]) -> str:
    return (
        f"No config avoids it: use a window of at least {_tokens(row.get('window_needed'))} tokens"
    )


def _history(row: Mapping[str, Any]) -> str:
    return (
        f"This transcript starts mid-session: about {_tokens(row.get('history_missing_tokens'))} "
        "tokens of earlier history are not in the file, yet every prompt the provider counted "
        f"held them. With them the prompt at turn {row['turn']} was "
        f"{_pct(row.get('ratio'))} of the window; no compaction of the file's messages can "
        f"take them out. {_unavoidable(row)}."
    )


def _large_turn(row: Mapping[str, Any]) -> str:
    window = row.get("context_window")
    fixed, newest = row.get("fixed_tokens") or 0, row.get("newest_tokens") or 0
    share = (fixed + newest) / window if window else None
    return (
        f"Turn {row['turn']}'s own words (the model's reply and the user's message: "
        f"{newest:,} tokens, which no compaction can remove) and the prompt every turn carries "
        f"({fixed:,} tokens) are {_pct(share)} of the window together, at or over the Emergency "
        f"threshold ({_pct(row.get('threshold'))}). {_unavoidable(row)}."
    )


def _floor(row: Mapping[str, Any]) -> str:
    window = row.get("context_window")
    floor = row.get("floor_tokens") or 0
    share = floor / window if window else None
    over = (
        "over the Emergency threshold itself: no compaction could bring it under"
        if share is not None and share >= (row.get("threshold") or 1.0)
        else "over the Soft threshold: every compaction leaves the context above it, so it "
        "grew to Emergency"
    )
    return (
        f"What no compaction takes out at turn {row['turn']} (the prompt every turn carries "
        f"and the newest exchange, its tool results as offload previews) is {floor:,} tokens, "
        f"{_pct(share)} of the window, {over}. {_unavoidable(row)} (where that floor stays "
        "under Soft)."
    )


def _failed(row: Mapping[str, Any]) -> str:
    return (
        f"The summariser failed at turn {row['turn']} ({row['error_code']}) and the fallback "
        f"truncated the context, then at {_pct(row.get('ratio'))} of the window."
    )


def _undercount(row: Mapping[str, Any]) -> str:
    return (
        f"The estimate had been too low: at the last usage report the calibrated estimator moved "
        f"from {row['factor_before']:.2f} to {row['factor_after']:.2f} tokens per bytes/4 token, "
        f"which put turn {row['turn']} at {_pct(row.get('ratio'))} of the window; under the old "
        f"factor it would have been {_pct(row.get('ratio_at_old_factor'))}."
    )


def _burst(row: Mapping[str, Any]) -> str:
    n = row.get("burst_messages") or 1
    tool = f" from {row['burst_tool']}" if row.get("burst_tool") else ""
    what = "message" if n == 1 else "messages"
    share = row["burst_tokens"] / row["context_window"] if row.get("context_window") else None
    return (
        f"Turn {row['turn']}'s new {what} ({n} from history #{row['burst_index']}{tool}) "
        f"added {_tokens(row.get('burst_tokens'))} tokens, {_pct(share)} of the window, in one "
        f"step: the context went from {_pct(row.get('prev_ratio'))} to "
        f"{_pct(row.get('ratio'))}."
    )


def _growth(row: Mapping[str, Any]) -> str:
    earlier = growth_compactions(row)
    if not earlier:
        before = "no Soft or Full compaction ran before it"
    else:
        last = earlier[-1]
        before = (
            f"{len(earlier)} Soft/Full compaction{'s' if len(earlier) > 1 else ''} before it "
            f"did not hold it down (the last took it from {_pct(last.get('ratio_before'))} to "
            f"{_pct(last.get('ratio_after'))})"
        )
    return (
        f"The context grew turn by turn to {_pct(row.get('ratio'))} of the window by turn "
        f"{row['turn']}, over the Emergency threshold ({_pct(row.get('threshold'))}); {before}."
    )


_SAY = {
    "manual": _manual,
    "fixed_prompt": _fixed,
    "history_missing": _history,
    "large_turn": _large_turn,
    "summarizer_failed": _failed,
    "undercount": _undercount,
    "burst": _burst,
    "floor": _floor,
    "growth": _growth,
}


def growth_compactions(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    text = row.get("growth_compactions")
    return list(json.loads(text)) if text else []


def cause_keys(row: Mapping[str, Any]) -> dict[str, Any]:
    """The post-mortem's cause keys for one emergency row (``cause`` null when the row has no
    cause columns, e.g. frames built without the session's settings)."""
    cause = row.get("cause")
    burst = None
    if cause == "burst":
        burst = {
            "turn": row.get("turn"),
            "history_index": row.get("burst_index"),
            "messages": row.get("burst_messages"),
            "role": row.get("burst_role"),
            "tool_name": row.get("burst_tool"),
            "tokens": row.get("burst_tokens"),
        }
    return {
        "cause": cause,
        "explanation": _SAY[cause](row) if cause in _SAY else None,
        "unavoidable": cause in UNAVOIDABLE,
        "window_needed": row.get("window_needed") if cause in UNAVOIDABLE else None,
        "fixed_tokens": row.get("fixed_tokens"),
        "smallest_prompt_tokens": row.get("smallest_prompt_tokens"),
        "history_missing_tokens": row.get("history_missing_tokens"),
        "floor_tokens": row.get("floor_tokens"),
        "newest_tokens": row.get("newest_tokens"),
        "burst": burst,
        "error_code": row.get("error_code") if cause in ("summarizer_failed", "manual") else None,
        "estimator_factor": (
            {"before": row.get("factor_before"), "after": row.get("factor_after")}
            if cause == "undercount"
            else None
        ),
        "compactions_before": growth_compactions(row) if cause == "growth" else None,
        "ratio": row.get("ratio"),
        "threshold": row.get("threshold"),
    }


def reconcile(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` (a post-mortem with its counterfactuals merged), its explanation made to agree
    with them: an unavoidable cause is replayed as a baseline only, and should a change ever be
    verified to avoid one, the words say so instead of "no config avoids it"."""
    if item.get("window_verified") and item.get("cause") not in UNAVOIDABLE:
        tried = sum(
            1 for c in item.get("counterfactuals") or [] if c.get("emergency_avoided") is False
        )
        item["explanation"] = (
            f"{item['explanation']} None of the {tried} config changes tried avoids it at this "
            f"window; a window of {_tokens(item.get('window_needed'))} tokens does (verified by "
            "replaying the whole session)."
        )
    if item.get("cause") in UNAVOIDABLE and item.get("smallest_change_verified"):
        item["explanation"] = (
            f"What no compaction takes out was estimated at {_tokens(item.get('fixed_tokens'))} "
            f"tokens and over the threshold, yet at turn {item['turn']} the change "
            f"{item.get('smallest_change_detail') or item.get('smallest_change')} avoids this "
            "emergency (verified by replaying the whole session)."
        )
    return item


def fix_words(pm: Mapping[str, Any]) -> str:
    """What to change, in words, for a post-mortem (as ``postmortem --json`` gives it): the
    verified change, or why there is none. The CLI and the report print it alike."""
    unavoidable = pm.get("cause") in UNAVOIDABLE or pm.get("window_verified")
    if unavoidable and not pm.get("smallest_change_verified"):
        needed = pm.get("window_needed")
        verified = " (verified)" if pm.get("window_verified") else ""
        return (
            f"no config avoids it: a window of {needed:,}+ tokens{verified}" if needed else "none"
        )
    status = str(pm.get("counterfactual_status") or "")
    if status.startswith("unavailable"):
        return status
    if status == "not computed":
        return "not computed (run without --no-counterfactuals)"
    if not pm.get("reproduced"):
        return (
            "not reproduced: the replay did not reach Emergency at that turn, so no change "
            "is said to avoid it"
        )
    if pm.get("smallest_change"):
        verified = "verified" if pm.get("smallest_change_verified") else "NOT verified"
        return f"{pm.get('smallest_change_detail') or pm['smallest_change']} ({verified})"
    return f"none of the {len(pm.get('counterfactuals') or [])} changes tried avoids it"


DROP_REASONS = {
    "cap": "the summary kept as many as before and took a newer one in its place (its cap)",
    "age": "an old item: it had lasted several compactions",
    "unknown": "nothing known",
}
"""A silent drop's ``reason`` (``analytics.jobs.retention``) in words."""


def drop_reason_words(reason: str | None) -> str:
    """Why a silent drop happened, in words (``nothing known`` for a reason not recorded)."""
    return DROP_REASONS.get(reason or "", DROP_REASONS["unknown"])
