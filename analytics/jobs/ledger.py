"""Did each compaction pay for itself, and did it make the context bigger (issue 31, items 1-2).

A compaction rewrites the cached prefix: the turn after it pays a cache write (and the
summariser) where the uncompacted path would have read the prefix from the cache, and every
later turn sends less than the uncompacted path would have. The *ledger* of an effective
compaction sets the two against each other on the priced turns (``job_turn_costs``):

- its turn is the first turn after it (the first view it produced); its *reign* the turns up to
  the next effective compaction of the session (or the session's end);
- ``net(t) = uncompacted_cost(t) - cost(t) - summarizer_cost(t)`` for each turn of its reign;
- ``rewrite_cost = -net(turn)``: what the compaction's own turn cost beyond the turn it replaced
  (cache write and summariser; negative when that turn was already cheaper);
- ``saved_after``: the sum of ``net`` over the later turns of its reign;
- ``break_even_turn``: the first turn of its reign at which the running sum of ``net`` reaches 0
  (null, and ``never`` says why, when the reign ended first);
- ``invalidated_tokens``: the cached prefix the uncompacted path would have read at its turn and
  the compacted one did not (``uncompacted_prefix_tokens - prefix_tokens``, at least 0);
- ``necessary``: the uncompacted prompt would not have fitted the window at its turn, so the
  comparison is with a request that could not have been sent.

*Growth*: a compaction ``grew`` when the context after it is larger than before: our own when
its ``tokens_after`` exceeds ``tokens_before`` (a summary longer than what it replaced); a
harness's (``origin = native``) when the provider's first prompt after its boundary (its usage
report, the importers keep the first one after each boundary) exceeds the tokens before it;
without that report (a harness that records no usage) ``grew`` is null, not guessed.
``rebound_turns`` is how many turns later a compaction of the same or a higher tier came again
(within ``REBOUND_TURNS``): the context was back above its tier at once. Native compactions have no
priced turns, so their cost columns stay null. Pure: frames in, frames out.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from analytics.jobs.common import TIER_NAMES, conform, is_effective

REBOUND_TURNS = 3
"""A compaction of the same or a higher tier within this many turns means the context was back
above the tier at once."""
NEVER_NEXT = "never: the next compaction came first"
NEVER_END = "never: the session ended first"
NO_TURN = "no turn after it"

LEDGER_COLUMNS: dict[str, pl.DataType] = {
    "session_id": pl.String(),
    "compaction_id": pl.String(),
    "seq": pl.Int64(),
    "turn": pl.Int64(),
    "tier": pl.Int64(),
    "tier_name": pl.String(),
    "origin": pl.String(),
    "trigger": pl.String(),
    "reign_turns": pl.Int64(),
    "necessary": pl.Boolean(),
    "invalidated_tokens": pl.Int64(),
    "rewrite_cost": pl.Float64(),
    "saved_after": pl.Float64(),
    "break_even_turn": pl.Int64(),
    "paid": pl.Boolean(),
    "never": pl.String(),
    "tokens_before": pl.Int64(),
    "tokens_after": pl.Int64(),
    "grew": pl.Boolean(),
    "growth_tokens": pl.Int64(),
    "growth_reason": pl.String(),
    "rebound_turns": pl.Int64(),
}

_COMPACTIONS = {
    "id": pl.String(),
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "tier": pl.Int64(),
    "trigger": pl.String(),
    "origin": pl.String(),
    "effective": pl.Boolean(),
    "error": pl.String(),
    "tokens_before": pl.Int64(),
    "tokens_after": pl.Int64(),
}
_COSTS = {
    "session_id": pl.String(),
    "seq": pl.Int64(),
    "turn": pl.Int64(),
    "cost": pl.Float64(),
    "uncompacted_cost": pl.Float64(),
    "summarizer_cost": pl.Float64(),
    "prefix_tokens": pl.Int64(),
    "uncompacted_prefix_tokens": pl.Int64(),
    "uncompacted_over_window": pl.Boolean(),
}
_TURNS = {"session_id": pl.String(), "seq": pl.Int64(), "turn": pl.Int64()}
_USAGE = {"session_id": pl.String(), "seq": pl.Int64(), "input_tokens": pl.Int64()}


@dataclass(frozen=True)
class _Turns:
    """A session's turns in seq order, and its priced rows by turn seq."""

    seqs: list[int]
    numbers: list[int]
    priced: Mapping[int, Mapping[str, Any]]

    def first_after(self, seq: int) -> int:
        """Index of the first turn after ``seq`` (``len`` when none)."""
        return bisect.bisect_right(self.seqs, seq)


def compaction_ledger(
    compactions: pl.DataFrame,
    turn_costs: pl.DataFrame,
    turns: pl.DataFrame,
    usage: pl.DataFrame,
) -> pl.DataFrame:
    """One row per effective compaction (``LEDGER_COLUMNS``), in (session_id, seq) order."""
    done = conform(compactions, _COMPACTIONS).filter(is_effective() & (pl.col("tier") > 0))
    costs = conform(turn_costs, _COSTS).filter(pl.col("seq").is_not_null())
    priced = {
        str(k[0]): {int(r["seq"]): r for r in g.iter_rows(named=True)}
        for k, g in costs.group_by("session_id")
    }
    by_session: dict[str, _Turns] = {}
    for (sid,), group in (
        conform(turns, _TURNS).sort("session_id", "seq").group_by("session_id", maintain_order=True)
    ):
        by_session[str(sid)] = _Turns(
            group.get_column("seq").to_list(),
            group.get_column("turn").to_list(),
            priced.get(str(sid), {}),
        )
    prompts = _prompts(conform(usage, _USAGE))
    rows: list[dict[str, Any]] = []
    for (sid,), group in done.sort("session_id", "seq").group_by("session_id", maintain_order=True):
        session = by_session.get(str(sid), _Turns([], [], {}))
        records = list(group.iter_rows(named=True))
        for k, record in enumerate(records):
            rows.append(_row(record, records[k + 1 :], session, prompts.get(str(sid), ([], []))))
    return pl.DataFrame(rows, schema=LEDGER_COLUMNS)


def _prompts(usage: pl.DataFrame) -> dict[str, tuple[list[int], list[int]]]:
    """Per session: the seqs of its usage reports and each one's whole prompt in tokens
    (``input_tokens`` is the whole prompt, cache reads and writes included)."""
    frame = usage.filter(pl.col("input_tokens").is_not_null())
    return {
        str(k[0]): (g.get_column("seq").to_list(), g.get_column("input_tokens").to_list())
        for k, g in frame.sort("session_id", "seq").group_by("session_id", maintain_order=True)
    }


def _row(
    record: Mapping[str, Any],
    later: Sequence[Mapping[str, Any]],
    session: _Turns,
    prompts: tuple[list[int], list[int]],
) -> dict[str, Any]:
    start = session.first_after(int(record["seq"]))
    end = session.first_after(int(later[0]["seq"])) if later else len(session.seqs)
    out: dict[str, Any] = {
        "session_id": record["session_id"],
        "compaction_id": record["id"],
        "seq": record["seq"],
        "turn": session.numbers[start] if start < len(session.seqs) else None,
        "tier": record["tier"],
        "tier_name": TIER_NAMES.get(int(record["tier"]), str(record["tier"])),
        "origin": record["origin"],
        "trigger": record["trigger"],
        "reign_turns": max(0, end - start),
        "tokens_before": record["tokens_before"],
        "tokens_after": record["tokens_after"],
        **_growth(record, prompts),
        "rebound_turns": _rebound(record, later, session, start),
    }
    out.update(_costs(session, start, end, ended_by_next=bool(later)))
    return out


def _costs(session: _Turns, start: int, end: int, *, ended_by_next: bool) -> dict[str, Any]:
    reign = [session.priced.get(seq) for seq in session.seqs[start:end]]
    if not reign or reign[0] is None:
        return {"never": NO_TURN if start >= len(session.seqs) else None}
    first = reign[0]
    nets = [_net(row) for row in reign if row is not None]
    numbers = [n for n, row in zip(session.numbers[start:end], reign, strict=True) if row]
    running, break_even = 0.0, None
    for number, net in zip(numbers, nets, strict=True):
        running += net
        if running >= 0:
            break_even = number
            break
    prefix = int(first["uncompacted_prefix_tokens"] or 0) - int(first["prefix_tokens"] or 0)
    return {
        "necessary": first["uncompacted_over_window"],
        "invalidated_tokens": max(0, prefix),
        "rewrite_cost": -nets[0],
        "saved_after": sum(nets[1:]),
        "break_even_turn": break_even,
        "paid": break_even is not None,
        "never": None if break_even is not None else (NEVER_NEXT if ended_by_next else NEVER_END),
    }


def _net(row: Mapping[str, Any]) -> float:
    """What the turn saved against the uncompacted path, its summariser call paid."""
    uncompacted = float(row["uncompacted_cost"] or 0.0)
    return uncompacted - float(row["cost"] or 0.0) - float(row["summarizer_cost"] or 0.0)


def _growth(record: Mapping[str, Any], prompts: tuple[list[int], list[int]]) -> dict[str, Any]:
    before = record["tokens_before"]
    if before is None:
        return {"grew": None, "growth_tokens": None, "growth_reason": None}
    after, reason = record["tokens_after"], "the summary is longer than what it replaced"
    if record["origin"] == "native":
        seqs, wholes = prompts
        at = bisect.bisect_right(seqs, int(record["seq"]))
        after = wholes[at] if at < len(seqs) else None
        reason = f"the provider's next prompt ({after or 0:,} tokens) exceeds the {before:,} before"
    if after is None:
        return {"grew": None, "growth_tokens": None, "growth_reason": None}
    grew = int(after) > int(before)
    return {
        "grew": grew,
        "growth_tokens": max(0, int(after) - int(before)),
        "growth_reason": reason if grew else None,
    }


def _rebound(
    record: Mapping[str, Any], later: Sequence[Mapping[str, Any]], session: _Turns, start: int
) -> int | None:
    """Turns until a compaction of the same or a higher tier came again, within the bound."""
    if start >= len(session.seqs):
        return None
    for other in later:
        if int(other["tier"]) < int(record["tier"]):
            continue
        at = session.first_after(int(other["seq"]))
        if at >= len(session.seqs):
            return None
        turns = session.numbers[at] - session.numbers[start]
        return turns if turns <= REBOUND_TURNS else None
    return None


def paid_by_kind(ledger: pl.DataFrame) -> list[dict[str, object]]:
    """Per (origin, tier, trigger), most compactions first: how many there are, how many are
    priced, and the share of those that paid for themselves (None when none is priced)."""
    if ledger.is_empty():
        return []
    paid = pl.col("paid")
    rows = (
        ledger.group_by("origin", "tier_name", "trigger")
        .agg(
            compactions=pl.len(),
            priced=paid.is_not_null().sum(),
            paid=paid.fill_null(False).sum(),
        )
        .with_columns(
            paid_share=pl.when(pl.col("priced") > 0).then(pl.col("paid") / pl.col("priced"))
        )
        .rename({"tier_name": "tier"})
        .sort(["compactions", "origin", "tier", "trigger"], descending=[True, False, False, False])
        .select("origin", "tier", "trigger", "compactions", "priced", "paid_share")
    )
    return rows.to_dicts()


def paid_share(ledger: pl.DataFrame) -> float | None:
    """The share of priced compactions that paid for themselves (None when none is priced)."""
    priced = ledger.filter(pl.col("paid").is_not_null())
    if priced.is_empty():
        return None
    return int(priced.get_column("paid").sum()) / priced.height
