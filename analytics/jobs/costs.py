"""Turn costs (issue 18): each turn's prompt split into cache reads, writes and uncached tokens
under its session's price profile, its cost, what it would have cost uncompacted, and the
summariser calls priced beside it.

Views are rebuilt from the store's rows, not stored: before any compaction a turn's view is the
system prompt and the history so far; after an effective compaction it is that compaction's
*after* view (``compaction_views``) followed by the history appended since (the turn's
``messages`` count says how much). A turn's cached prefix is the whole previous view when no
compaction came between (views only grow), else the leading positions the compaction's before
and after views share (the system prompt, up to the first message a Warn offload rewrote), and
on a session's first turn its system prompt (agents send the same one to every session, so it
is warm: Claude Code's 15,289 tokens are read on first turns). Tokens are the session's
calibrated estimate (``fit_calibration`` over its reported usage; bytes // 4 without usage).
The uncompacted figures price the same turns with the whole history as the view.

A summariser's call is billed as its record says; the offline (extractive) summariser records
the tokens an LLM summariser would have read (the messages summarised, the previous compaction
included) and written (the summary), as the tuning lab counts them. Only older extractive
records, which carry no tokens, are estimated from the bytes summarised and flagged
``summarizer_estimated``.

What a truncation took out is *cut*, not saved (issue 26): a compaction's cut is the bytes of
the messages its before view dropped plus what it took off the messages it shortened
(``changed``: a middle-truncated task or tool result) — an Emergency's, or a summariser
fallback's budget trim. Nothing offloaded or summarised counts. Content once cut never returns
to a later view (compactions work on the view), so a turn's ``cut_tokens`` is the session's cut
so far (calibrated, with no overhead), at most what the turn did not send (uncompacted less
prompt); the rest of that difference is the compaction's saving, owed to the tier of the
compaction that produced the view (``tier``). ``estimated_cut_tokens`` and
``estimated_emergency_cut_tokens`` are the same in the units of the store's ``turns.tokens``
and ``turns.history_tokens`` (the session's own estimator, as the compactor counted the
tokens it removed: each compaction's ``tokens_before - tokens_after`` split in proportion to
the bytes cut), at most ``history_tokens - tokens``. Priced, a turn's ``cut_cost`` is the part
of its saving (``uncompacted_cost - cost``, when positive) in proportion to the tokens cut.

``uncompacted_over_window``: the uncompacted prompt plus the reserve is over the turn's context
window (the session's when the turn has none), so the uncompacted history could not have been
sent at all (null when the window is unknown).
Pure: frames in, frames out.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from analytics.jobs.cache_model import (
    Calibration,
    cached_prefix,
    call_cost,
    fit_calibration,
    split_cost,
    split_prompt,
)
from analytics.jobs.common import conform, drop_deleted, in_session_order, is_effective
from analytics.jobs.prices import BUILTIN_PROFILES, NONE, PriceProfile, profile_name_for_model
from compactor import CompactionTier

EMERGENCY = int(CompactionTier.EMERGENCY)

FACT_COLUMNS: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "turn": pl.Int64(),
    "profile": pl.String(),
    "tier": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "prefix_tokens": pl.Int64(),
    "uncompacted_prompt_tokens": pl.Int64(),
    "uncompacted_prefix_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
    "summarizer_input_tokens": pl.Int64(),
    "summarizer_output_tokens": pl.Int64(),
    "summarizer_estimated": pl.Boolean(),
    "gap_seconds": pl.Float64(),
    "cut_tokens": pl.Int64(),
    "estimated_cut_tokens": pl.Int64(),
    "estimated_emergency_cut_tokens": pl.Int64(),
    "uncompacted_over_window": pl.Boolean(),
}
"""What the views say, whatever the prices: ``tier`` is the tier of the newest effective
compaction at or before the turn (0: none yet), to which its savings are owed; the cut and
window columns are described in the module text."""
PRICED_COLUMNS: dict[str, pl.DataType] = {
    "cache_read_tokens": pl.Int64(),
    "cache_write_tokens": pl.Int64(),
    "uncached_tokens": pl.Int64(),
    "cost": pl.Float64(),
    "uncompacted_cost": pl.Float64(),
    "summarizer_cost": pl.Float64(),
    "cut_cost": pl.Float64(),
}
TURN_COST_COLUMNS = {**FACT_COLUMNS, **PRICED_COLUMNS}

_TURNS = {
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "turn": pl.Int64(),
    "messages": pl.Int64(),
    "history_messages": pl.Int64(),
    "occurred_at": pl.Datetime("us", "UTC"),
    "tokens": pl.Int64(),
    "history_tokens": pl.Int64(),
    "context_window": pl.Int64(),
    "reserve_tokens": pl.Int64(),
}
_MESSAGES = {"session_id": pl.String(), "idx": pl.Int64(), "bytes": pl.Int64()}
_VIEWS = {
    "compaction_id": pl.String(),
    "session_id": pl.String(),
    "side": pl.String(),
    "position": pl.Int64(),
    "sha256": pl.String(),
    "bytes": pl.Int64(),
    "status": pl.String(),
}
_COMPACTIONS = {
    "id": pl.String(),
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "tier": pl.Int64(),
    "effective": pl.Boolean(),
    "summary_text": pl.String(),
    "summarizer_model": pl.String(),
    "summarizer_input_tokens": pl.Int64(),
    "summarizer_output_tokens": pl.Int64(),
    "tokens_before": pl.Int64(),
    "tokens_after": pl.Int64(),
}
_SESSIONS = {
    "session_id": pl.String(),
    "model": pl.String(),
    "system_bytes": pl.Int64(),
    "context_window": pl.Int64(),
    "reserve_tokens": pl.Int64(),
}
_USAGE = {
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "raw_estimated_tokens": pl.Int64(),
    "input_tokens": pl.Int64(),
    "output_tokens": pl.Int64(),
}

ProfileChoice = PriceProfile | Callable[[str], PriceProfile] | None
"""One profile for every session, a function of the profile name the job stored, or None
(each session's own profile, from its model name)."""


@dataclass
class _Compaction:
    seq: int
    tier: int
    after_bytes: int
    after_len: int
    shared: list[int]
    """Bytes of the leading positions before and after share, cumulated (``shared[i]``: the
    first ``i`` positions)."""
    summarizer: tuple[int, int, bool] | None
    cut_bytes: int
    """What a truncation took out of the view (see the module text)."""
    cut_estimate: int
    """``cut_bytes`` in the session estimator's tokens."""


@dataclass
class _Session:
    system_bytes: int
    history: list[int]
    """``history[i]``: bytes of history messages ``0..i-1``."""
    calibration: Calibration
    outputs: dict[int, int] = field(default_factory=dict)
    """Reported output tokens by the seq of the usage report."""
    compactions: list[_Compaction] = field(default_factory=list)
    window: int | None = None
    reserve: int = 0


def turn_costs(
    turns: pl.DataFrame,
    messages: pl.DataFrame,
    views: pl.DataFrame,
    compactions: pl.DataFrame,
    sessions: pl.DataFrame,
    usage: pl.DataFrame,
    profile: ProfileChoice = None,
) -> pl.DataFrame:
    """One row per turn of a live session (``TURN_COST_COLUMNS``), in (session_id, seq) order,
    priced under ``profile`` (see ``ProfileChoice``)."""
    facts = turn_facts(turns, messages, views, compactions, sessions, usage)
    return price_turns(with_session_profiles(facts, sessions), profile)


def turn_facts(
    turns: pl.DataFrame,
    messages: pl.DataFrame,
    views: pl.DataFrame,
    compactions: pl.DataFrame,
    sessions: pl.DataFrame,
    usage: pl.DataFrame,
) -> pl.DataFrame:
    """The ``FACT_COLUMNS`` of every turn: sizes and cached prefixes, before any price."""
    frame = in_session_order(drop_deleted(conform(turns, _TURNS), sessions))
    built = _sessions(messages, views, compactions, sessions, usage)
    rows: list[dict[str, Any]] = []
    for (sid,), group in frame.group_by("session_id", maintain_order=True):
        state = built.get(str(sid))
        if state is not None:
            rows += _turn_rows(str(sid), state, group)
    return pl.DataFrame(rows, schema=FACT_COLUMNS)


def _sessions(
    messages: pl.DataFrame,
    views: pl.DataFrame,
    compactions: pl.DataFrame,
    sessions: pl.DataFrame,
    usage: pl.DataFrame,
) -> dict[str, _Session]:
    out: dict[str, _Session] = {}
    sizes: dict[str, list[int]] = {}
    for sid, group in _by_session(conform(messages, _MESSAGES).sort("session_id", "idx")):
        sizes[sid] = [0, *group.get_column("bytes").fill_null(0).cum_sum().to_list()]
    reports = dict(_by_session(conform(usage, _USAGE)))
    for row in conform(sessions, _SESSIONS).unique("session_id").iter_rows(named=True):
        sid = row["session_id"]
        found = reports.get(sid)
        calibration = Calibration()
        outputs: dict[int, int] = {}
        if found is not None:
            calibration = fit_calibration(
                found.get_column("raw_estimated_tokens").fill_null(0).to_list(),
                found.get_column("input_tokens").fill_null(0).to_list(),
            )
            outputs = {
                int(s): int(o)
                for s, o in found.select("seq", "output_tokens").iter_rows()
                if s is not None and o is not None
            }
        system = int(row["system_bytes"] or 0)
        out[sid] = _Session(
            system,
            sizes.get(sid, [0]),
            calibration,
            outputs,
            window=row["context_window"],
            reserve=int(row["reserve_tokens"] or 0),
        )
    _add_compactions(out, views, compactions)
    return out


def _by_session(frame: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    return [(str(k[0]), g) for k, g in frame.group_by("session_id", maintain_order=True)]


def _add_compactions(
    out: Mapping[str, _Session], views: pl.DataFrame, compactions: pl.DataFrame
) -> None:
    views = conform(views, _VIEWS)
    sides = {
        str(k[0]): g.sort("side", "position")
        for k, g in views.group_by("compaction_id", maintain_order=True)
    }
    sizes = _view_sizes(views)
    frame = conform(compactions, _COMPACTIONS).filter(is_effective() & (pl.col("tier") > 0))
    for row in frame.sort("session_id", "seq").iter_rows(named=True):
        state = out.get(row["session_id"])
        view = sides.get(row["id"])
        if state is None or view is None:
            continue
        before = view.filter(pl.col("side") == "before")
        after = view.filter(pl.col("side") == "after")
        before_bytes, after_bytes, cut = sizes[row["id"]]
        state.compactions.append(
            _Compaction(
                seq=int(row["seq"]),
                tier=int(row["tier"]),
                after_bytes=after_bytes,
                after_len=after.height,
                shared=_shared(before, after),
                summarizer=_summarizer(row, before),
                cut_bytes=cut,
                cut_estimate=_cut_estimate(row, cut, before_bytes - after_bytes),
            )
        )


def _view_sizes(views: pl.DataFrame) -> dict[str, tuple[int, int, int]]:
    """Per compaction: the bytes of its before and after views, and what a truncation took
    out (the messages dropped, and what the shortened ones lost), in one pass over the rows."""
    size = pl.col("bytes").fill_null(0)
    before, after = pl.col("side") == "before", pl.col("side") == "after"
    changed = pl.col("status") == "changed"
    sums = views.group_by("compaction_id").agg(
        before=size.filter(before).sum(),
        after=size.filter(after).sum(),
        dropped=size.filter(before & (pl.col("status") == "dropped")).sum(),
        shortened=size.filter(before & changed).sum() - size.filter(after & changed).sum(),
    )
    return {
        str(cid): (int(b), int(a), int(d) + max(int(s), 0))
        for cid, b, a, d, s in sums.select(
            "compaction_id", "before", "after", "dropped", "shortened"
        ).iter_rows()
    }


def _cut_estimate(row: Mapping[str, Any], cut: int, shrink: int) -> int:
    """``cut`` bytes in the tokens the compactor counted: its own ``tokens_before -
    tokens_after`` in proportion to the bytes cut (bytes // 4 when it gave none)."""
    if cut <= 0:
        return 0
    before, after = row["tokens_before"], row["tokens_after"]
    if before is None or after is None or shrink <= 0 or before <= after:
        return cut // 4
    return round(int(before - after) * cut / shrink)


def _shared(before: pl.DataFrame, after: pl.DataFrame) -> list[int]:
    shared = [0]
    pairs = zip(before.iter_rows(named=True), after.iter_rows(named=True), strict=False)
    for b, a in pairs:
        if b["sha256"] is None or b["sha256"] != a["sha256"]:
            break
        shared.append(shared[-1] + int(b["bytes"] or 0))
    return shared


def _summarizer(row: Mapping[str, Any], before: pl.DataFrame) -> tuple[int, int, bool] | None:
    """(input, output, estimated) tokens of the compaction's summariser call, if it made one."""
    model = row["summarizer_model"]
    if model is None:
        return None
    read, wrote = row["summarizer_input_tokens"] or 0, row["summarizer_output_tokens"] or 0
    if read or wrote or model != "extractive":
        return int(read), int(wrote), False
    summarised = before.filter(pl.col("status") == "summarized").get_column("bytes")
    text = (row["summary_text"] or "").encode("utf-8", "surrogatepass")
    return int(summarised.fill_null(0).sum()) // 4, len(text) // 4, True


def _turn_rows(sid: str, state: _Session, turns: pl.DataFrame) -> list[dict[str, Any]]:
    """Walk the turns in seq order beside the session's compactions (see the module text)."""
    cal, history, comps = state.calibration, state.history, state.compactions
    has_system = state.system_bytes > 0
    base_bytes, base_len = (state.system_bytes, 1) if has_system else (0, 0)
    tier, k = 0, 0
    prev: tuple[int, int, int, Any] | None = None  # seq, view bytes, view messages, time
    prev_history = 0
    report_seqs = sorted(state.outputs)
    seqs = turns.get_column("seq").to_list()
    next_seq = dict(itertools.pairwise(seqs))
    rows: list[dict[str, Any]] = []
    cuts = _CutSoFar()
    for seq, turn, n_msgs, n_hist, at, sent in turns.select(
        "seq",
        "turn",
        "messages",
        "history_messages",
        "occurred_at",
        pl.struct("tokens", "history_tokens", "context_window", "reserve_tokens"),
    ).iter_rows():
        h = min(max(int(n_hist or 0), 0), len(history) - 1)
        pending: list[_Compaction] = []
        while k < len(comps) and comps[k].seq <= seq:
            pending.append(comps[k])
            k += 1
        cuts.add(pending)
        if pending:
            last = pending[-1]
            base_bytes, base_len, tier = last.after_bytes, last.after_len, last.tier
        appended = min(max(int(n_msgs or 0) - base_len, 0), h)
        view = base_bytes + history[h] - history[h - appended]
        gap = (at - prev[3]).total_seconds() if prev and at is not None and prev[3] else None
        if prev is None:
            prefix = cal.tokens(state.system_bytes) if has_system else 0
        elif pending:
            depth = min(min(len(c.shared) - 1 for c in pending), prev[2])
            prefix = cal.tokens(pending[0].shared[depth])
        else:
            prefix = cal.tokens(prev[1])
        whole = state.system_bytes + history[h]
        summarised = [c.summarizer for c in pending if c.summarizer is not None]
        rows.append(
            {
                "session_id": sid,
                "seq": seq,
                "turn": turn,
                "profile": "",
                "tier": tier,
                "prompt_tokens": cal.tokens(view),
                "prefix_tokens": prefix,
                "uncompacted_prompt_tokens": cal.tokens(whole),
                "uncompacted_prefix_tokens": cal.tokens(prev_history) if prev else prefix,
                "output_tokens": _output(state, report_seqs, seq, next_seq.get(seq), h),
                "summarizer_input_tokens": sum(s[0] for s in summarised),
                "summarizer_output_tokens": sum(s[1] for s in summarised),
                "summarizer_estimated": any(s[2] for s in summarised),
                "gap_seconds": gap,
                **cuts.columns(cal, cal.tokens(view), cal.tokens(whole), sent),
                "uncompacted_over_window": _over_window(state, cal.tokens(whole), sent),
            }
        )
        prev, prev_history = (seq, view, int(n_msgs or 0), at), whole
    return rows


@dataclass
class _CutSoFar:
    """A session's truncation cuts up to a turn (see the module text)."""

    bytes: int = 0
    estimate: int = 0
    emergency_estimate: int = 0

    def add(self, compactions: list[_Compaction]) -> None:
        for c in compactions:
            self.bytes += c.cut_bytes
            self.estimate += c.cut_estimate
            if c.tier == EMERGENCY:
                self.emergency_estimate += c.cut_estimate

    def columns(
        self, cal: Calibration, prompt: int, whole: int, sent: Mapping[str, Any]
    ) -> dict[str, int]:
        """The turn's cut columns: each at most what the turn did not send, in its units."""
        unsent = max(whole - prompt, 0)
        tokens, history = sent["tokens"], sent["history_tokens"]
        unsent_estimate = max(history - tokens, 0) if None not in (tokens, history) else unsent
        estimate = min(self.estimate, unsent_estimate)
        return {
            "cut_tokens": min(cal.tokens_of_text(self.bytes), unsent),
            "estimated_cut_tokens": estimate,
            "estimated_emergency_cut_tokens": min(self.emergency_estimate, estimate),
        }


def _over_window(state: _Session, uncompacted: int, sent: Mapping[str, Any]) -> bool | None:
    """Whether the uncompacted prompt and the reserve exceed the window (None: no window)."""
    window = sent["context_window"] or state.window
    if window is None or window <= 0:
        return None
    reserve = sent["reserve_tokens"] if sent["reserve_tokens"] is not None else state.reserve
    return bool(uncompacted + reserve > window)


def _output(state: _Session, report_seqs: list[int], seq: int, next_seq: int | None, h: int) -> int:
    """The answer's tokens: the usage report between the turn and the next one, else the
    estimate of the assistant message it produced (history index ``h``)."""
    at = bisect.bisect_right(report_seqs, seq)
    if at < len(report_seqs) and (next_seq is None or report_seqs[at] < next_seq):
        return state.outputs[report_seqs[at]]
    sizes = state.history
    answer = sizes[h + 1] - sizes[h] if h + 1 < len(sizes) else 0
    return state.calibration.tokens_of_text(answer)


def price_turns(facts: pl.DataFrame, profile: ProfileChoice = None) -> pl.DataFrame:
    """``facts`` (``FACT_COLUMNS``, e.g. the stored job rows) with ``PRICED_COLUMNS`` computed
    under ``profile`` (None: the built-in profile each row's ``profile`` names); ``profile``
    is then the name of the profile used."""
    rows: list[dict[str, Any]] = []
    for row in conform(facts, FACT_COLUMNS).iter_rows(named=True):
        chosen = _choose(profile, row["profile"] or "none")
        rows.append({**row, **priced(row, chosen), "profile": chosen.name})
    return pl.DataFrame(rows, schema=TURN_COST_COLUMNS)


def _choose(profile: ProfileChoice, stored: str) -> PriceProfile:
    if isinstance(profile, PriceProfile):
        return profile
    if profile is not None:
        return profile(stored)
    return BUILTIN_PROFILES.get(stored, NONE)


def priced(row: Mapping[str, Any], profile: PriceProfile) -> dict[str, Any]:
    """The ``PRICED_COLUMNS`` of one fact row under ``profile``."""
    gap = row["gap_seconds"]
    split = split_prompt(
        profile, row["prompt_tokens"], cached_prefix(profile, row["prefix_tokens"], gap)
    )
    whole = split_prompt(
        profile,
        row["uncompacted_prompt_tokens"],
        cached_prefix(profile, row["uncompacted_prefix_tokens"], gap),
    )
    output = int(row["output_tokens"] or 0)
    cost, uncompacted = split_cost(profile, split, output), split_cost(profile, whole, output)
    unsent = (row["uncompacted_prompt_tokens"] or 0) - (row["prompt_tokens"] or 0)
    cut = row["cut_tokens"] or 0
    return {
        "cache_read_tokens": split.read,
        "cache_write_tokens": split.write,
        "uncached_tokens": split.uncached,
        "cost": cost,
        "uncompacted_cost": uncompacted,
        "summarizer_cost": call_cost(
            profile, row["summarizer_input_tokens"] or 0, row["summarizer_output_tokens"] or 0
        ),
        # the part of the turn's saving the cut tokens account for (never below nothing)
        "cut_cost": (uncompacted - cost) * min(cut / unsent, 1.0)
        if cut > 0 and unsent > 0 and uncompacted > cost
        else 0.0,
    }


def with_session_profiles(facts: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """``facts`` with ``profile`` set to each session's built-in profile name (its model's)."""
    models = conform(sessions, {"session_id": pl.String(), "model": pl.String()}).unique(
        "session_id"
    )
    names = {
        sid: profile_name_for_model(model) for sid, model in models.iter_rows() if sid is not None
    }
    return facts.with_columns(
        profile=pl.col("session_id").replace_strict(names, default="none", return_dtype=pl.String)
    )
