"""Headline figures of a store (``compactlens stats``) and the lines a run quarantined.

``fleet_stats`` assembles the SPEC 5.3 ``stats --json`` object from the jobs: compaction counts
and compression by tier, emergencies (truncations apart from offload-only), tokens billed (the
views plus the summariser's calls) against the uncompacted history, cost under each session's
price profile (or one given), anchor survival and silent drops, artifact retention; with
``by`` it adds ``groups``, the same object for each cohort of sessions (window, config, source,
model, agent, harness). Cheap aggregates are computed on read; the per-session jobs are read
from their materialised tables (``analytics.materialize.refresh`` brings them up to date
first). Nothing here writes.

Savings that could have happened (issue 26): what a truncation took out of the views (an
Emergency's, or a summariser fallback's budget trim) is *cut*, never saved — the ``saved`` and
``saved_share`` of ``tokens`` and ``cost`` leave it out, and ``emergency.cut_tokens`` says what
Emergency cut. A turn's saving (what it did not send, less the cut) is owed to the tier of the
compaction that produced its view, as in ``cost.by_tier``, which gives each tier's ``cut``
beside it. The uncompacted figures are what the whole history would have cost; where it would
not have fit the window (``infeasible_turns``) ``uncompacted_feasible`` is false and that
alternative was not possible. ``cost.net_negative_sessions`` names the sessions that could have
run uncompacted and whose compaction cost more (summariser calls and cache writes included).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl

from analytics.jobs.artifacts import overall_artifact_retention
from analytics.jobs.common import is_effective
from analytics.jobs.compression import compression_by_tier
from analytics.jobs.costs import price_turns
from analytics.jobs.prices import BUILTIN_PROFILES, PriceProfile
from analytics.jobs.retention import anchor_survival
from analytics.jobs.tiers import emergency_summary
from analytics.queries import frames as queries
from analytics.queries.app import compaction_figures, retention_status_rows
from analytics.queries.ledger import ledger_figures, ledger_frame
from analytics.queries.materialize import job_table, job_table_exists
from analytics.store import EventStore, QuarantinedLine
from analytics.store.projector import Projector
from compactor import AnchorType, CompactionTier, CompactorConfig

TIERS = tuple(t for t in CompactionTier if t != CompactionTier.NONE)

CohortKey = Literal["window", "config", "source", "model", "agent", "harness"]
COHORT_KEYS: tuple[CohortKey, ...] = get_args(CohortKey)
"""What ``stats --by`` groups sessions by."""
HARNESSES = ("claude-code", "codex", "openhands")
"""Agents that are coding harnesses with their own compaction (``--by harness``)."""

_COUNTS_SQL = """
SELECT
  (SELECT count(*) FROM sessions WHERE deleted_at IS NULL AND {scope}) AS sessions,
  (SELECT count(*) FROM turns WHERE {live}) AS turns,
  (SELECT count(*) FROM messages WHERE {live}) AS messages,
  (SELECT count(*) FROM events WHERE {scope}) AS events,
  (SELECT count(*) FROM anchor_items WHERE {live}) AS anchor_items,
  (SELECT count(*) FROM offloads WHERE {live}) AS offloads,
  (SELECT median(compression_ratio) FROM compactions
    WHERE {effective} AND tier > 0 AND {live}) AS median_compression_ratio,
  (SELECT count(*) FROM quarantine) AS quarantined
""".replace("{effective}", queries.EFFECTIVE)


_NOOPS_SQL = """
WITH t AS (
  SELECT session_id, seq, tier,
         lag(seq) OVER (PARTITION BY session_id ORDER BY seq) AS prev
  FROM turns WHERE {live})
SELECT
  (SELECT count(*) FROM t WHERE tier > 0 AND NOT EXISTS (
     SELECT 1 FROM compactions c
     WHERE c.session_id = t.session_id AND c.tier > 0 AND {effective_c}
       AND c.seq < t.seq AND c.seq > coalesce(t.prev, -1)))
  + (SELECT count(*) FROM compactions
     WHERE tier > 0 AND NOT {effective} AND trigger = 'manual' AND {live})
""".replace("{effective}", queries.EFFECTIVE)
"""Every call that decided a tier and changed nothing (SPEC 3.3a.5): each turn whose view was
prepared at a tier above NONE with no effective compaction since the turn before (a session
emits the first no-op of a run only, but every turn has its ``view_prepared``), plus manual
``/compact`` calls that had nothing to do."""


@dataclass(frozen=True)
class _Scope:
    """The sessions a set of figures covers: every live one (``ids`` None) or some."""

    ids: frozenset[str] | None = None

    def sql(self, column: str = "session_id") -> str:
        if self.ids is None:
            return "true"
        quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in sorted(self.ids))
        return f"{column} IN ({quoted or 'NULL'})"

    def live(self) -> str:
        return f"{queries.LIVE} AND {self.sql()}"

    def rows(self, frame: pl.DataFrame) -> pl.DataFrame:
        if self.ids is None or "session_id" not in frame.columns:
            return frame
        return frame.filter(pl.col("session_id").is_in(list(self.ids)))


def fleet_stats(
    store: EventStore,
    spool_dir: Path | None = None,
    *,
    price_profile: PriceProfile | None = None,
    by: Sequence[CohortKey] = (),
) -> dict[str, Any]:
    """The SPEC 5.3 ``stats --json`` object (plus a few more keys; none renamed). Costs use
    ``price_profile`` for every session, else each session's own (from its model name); with
    ``by``, ``groups`` holds the same object for each cohort (``key``: each name's value)."""
    costs = _priced(store, price_profile)
    known = {**BUILTIN_PROFILES, **({price_profile.name: price_profile} if price_profile else {})}
    # the stored ledger, unless the turns were repriced under another profile
    ledger = ledger_frame(store, costs=costs if price_profile is not None else None)
    out = _figures(store, _Scope(), costs, known, ledger)
    out["unprojected_spool_bytes"] = (
        Projector(store, spool_dir).pending_bytes() if spool_dir is not None else 0
    )
    if by:
        out["groups"] = [
            {"key": key, "stats": _figures(store, _Scope(frozenset(ids)), costs, known, ledger)}
            for key, ids in cohorts(queries.sessions_frame(store), by)
        ]
    return out


def cohorts(
    sessions: pl.DataFrame, by: Sequence[CohortKey]
) -> list[tuple[dict[str, Any], list[str]]]:
    """The live sessions grouped by each of ``by`` (``key``: name → value), ordered by key."""
    unknown = sorted(set(by) - set(COHORT_KEYS))
    if unknown:
        raise ValueError(f"cannot group by {unknown}; choose from {list(COHORT_KEYS)}")
    groups: dict[tuple[Any, ...], list[str]] = {}
    for row in sessions.filter(pl.col("deleted_at").is_null()).iter_rows(named=True):
        groups.setdefault(tuple(_cohort_value(row, name) for name in by), []).append(
            row["session_id"]
        )
    ordered = sorted(groups.items(), key=lambda item: tuple(str(v) for v in item[0]))
    return [(dict(zip(by, values, strict=True)), ids) for values, ids in ordered]


def _cohort_value(row: dict[str, Any], name: CohortKey) -> Any:
    if name == "window":
        return row["context_window"]
    if name == "config":
        return _config_cohort(row["config"] or "")
    if name == "harness":
        agent = (row["agent"] or "").lower()
        return next((h for h in HARNESSES if agent.startswith(h)), None)
    return row[name] or None


def _config_cohort(text: str) -> str | None:
    """The recorded config's ``config_hash`` (8 digits): one config is one cohort however it
    was recorded (a release that wrote every field, or one that left later defaults out); a
    config this release cannot read is grouped by its text."""
    if not text:
        return None
    try:
        return CompactorConfig.model_validate_json(text).config_hash()[:8]
    except ValueError:
        return hashlib.sha256(text.encode()).hexdigest()[:8]


def _figures(
    store: EventStore,
    scope: _Scope,
    costs: pl.DataFrame,
    known: Mapping[str, PriceProfile],
    ledger: pl.DataFrame,
) -> dict[str, Any]:
    live = scope.live()
    counts = store.query(_COUNTS_SQL.replace("{live}", live).replace("{scope}", scope.sql())).row(
        0, named=True
    )
    sessions = scope.rows(queries.sessions_frame(store))
    compactions = scope.rows(compaction_figures(store))  # no summary text
    turns = scope.rows(queries.turn_sessions(store))  # the emergency rate only counts turns
    costs = scope.rows(costs)
    return {
        "sessions": counts["sessions"],
        "turns": counts["turns"],
        "compactions": _compactions(compactions, _noop_calls(store, live)),
        "emergency": _emergency(compactions, turns, sessions, costs),
        "compression": _compression(compactions, sessions),
        "tokens": _tokens(store, scope, costs),
        "cost": cost_figures(costs, known),
        "anchor_retention": _anchor_retention(store, scope),
        "silent_drops": _count(store, "job_silent_drops", scope),
        "artifact_retention": _artifact_retention(store, scope),
        "quarantined": counts["quarantined"],
        "messages": counts["messages"],
        "events": counts["events"],
        "anchor_items": counts["anchor_items"],
        "offloads": counts["offloads"],
        "median_compression_ratio": counts["median_compression_ratio"],
        "ledger": ledger_figures(scope.rows(ledger)),
    }


def _priced(store: EventStore, profile: PriceProfile | None) -> pl.DataFrame:
    costs = queries.turn_costs_frame(store)
    return price_turns(costs, profile) if profile is not None else costs


def _count(store: EventStore, table: str, scope: _Scope) -> int:
    if not job_table_exists(store, table):
        return 0
    return int(store.query(f"SELECT count(*) FROM {table} WHERE {scope.sql()}").item())


def _noop_calls(store: EventStore, live: str) -> int:
    effective = queries.EFFECTIVE.replace("effective", "c.effective")
    sql = _NOOPS_SQL.replace("{effective_c}", effective).replace("{live}", live)
    return int(store.query(sql).item() or 0)


def _compactions(compactions: pl.DataFrame, noops: int) -> dict[str, Any]:
    effective = compactions.filter((pl.col("tier") > 0) & is_effective())
    by_tier = {t.name: effective.filter(pl.col("tier") == int(t)).height for t in TIERS}
    return {"total": effective.height, "noops": noops, "by_tier": by_tier}


def _emergency(
    compactions: pl.DataFrame, turns: pl.DataFrame, sessions: pl.DataFrame, costs: pl.DataFrame
) -> dict[str, Any]:
    """Counts, and what Emergency cut: tokens (as ``tokens`` counts them) summed over the turns
    whose views lack them, those turns, and the messages its truncations dropped."""
    row = emergency_summary(compactions, turns, sessions).row(0, named=True)
    emergency = compactions.filter(
        (pl.col("tier") == int(CompactionTier.EMERGENCY)) & is_effective()
    )
    cut = costs.get_column("estimated_emergency_cut_tokens").fill_null(0)
    return {
        "truncations": row["truncations"],
        "offload_only": row["offload_only"],
        "per_100_turns": row["per_100_turns"],
        "emergencies": row["emergencies"],
        "escalations": row["escalations"],
        "cut_tokens": int(cut.sum()),
        "cut_turns": int((cut > 0).sum()),
        "messages_dropped": int(emergency.get_column("n_dropped").fill_null(0).sum()),
    }


def _compression(compactions: pl.DataFrame, sessions: pl.DataFrame) -> dict[str, Any]:
    frame = compression_by_tier(compactions, sessions).filter(pl.col("tier") > 0)
    out: dict[str, Any] = {}
    for row in frame.iter_rows(named=True):
        out[CompactionTier(row["tier"]).name] = {
            "count": row["count"],
            "ratio_p50": row["ratio_p50"],
            "ratio_p90": row["ratio_p90"],
            "ratio_p99": row["ratio_p99"],
            "tokens_saved": row["tokens_saved"],
            "noops": row["noops"],
        }
    return out


def _tokens(store: EventStore, scope: _Scope, costs: pl.DataFrame) -> dict[str, Any]:
    """Billed: the views over every turn plus the summariser's input and output (for the
    offline summariser the tokens an LLM would have read and written), as ``tune`` bills.
    Saved: the uncompacted history less what was billed and what truncations cut."""
    summarizer = int(
        costs.select(pl.col("summarizer_input_tokens") + pl.col("summarizer_output_tokens"))
        .sum()
        .item()
        or 0
    )
    cut = int(costs.get_column("estimated_cut_tokens").fill_null(0).sum())
    infeasible = _infeasible(costs)
    feasibility = {"infeasible_turns": infeasible, "uncompacted_feasible": infeasible == 0}
    if not job_table_exists(store, "job_session_timeline"):
        empty = {"billed": 0, "uncompacted": 0, "saved_share": None, "summarizer": 0}
        return {**empty, "saved": 0, "cut": cut, **feasibility}
    views, uncompacted = store.query(
        f"""SELECT CAST(coalesce(sum(tokens_billed), 0) AS BIGINT),
                  CAST(coalesce(sum(tokens_uncompacted), 0) AS BIGINT)
           FROM job_session_timeline WHERE {scope.sql()}"""
    ).row(0)
    billed = views + summarizer
    saved = uncompacted - billed - cut
    return {
        "billed": billed,
        "uncompacted": uncompacted,
        "saved_share": saved / uncompacted if uncompacted else None,
        "views": views,
        "summarizer": summarizer,
        "saved": saved,
        "cut": cut,
        **feasibility,
    }


def _infeasible(costs: pl.DataFrame) -> int:
    """Turns whose uncompacted prompt (and reserve) would not have fit the window."""
    return int(costs.get_column("uncompacted_over_window").fill_null(value=False).sum())


def cost_figures(
    costs: pl.DataFrame, known: Mapping[str, PriceProfile] = BUILTIN_PROFILES
) -> dict[str, Any]:
    """``cost`` of ``stats --json`` from priced turn rows (``analytics.jobs.costs``): the total
    (turns plus summariser calls), what the same turns would have cost uncompacted, what
    truncations cut (``cut``, never saved), the saving (``saved``: uncompacted less total less
    cut) and its share, the cache split; per tier the saving and the cut on the turns whose view
    its compactions produced, less its summariser calls; per profile the same sums. Whether the
    uncompacted history would have fit the window: ``infeasible_turns`` of ``priced_turns``,
    ``uncompacted_feasible``, ``infeasible_sessions``, and ``feasible`` (the sums over the
    sessions where it always fit). ``net_negative_sessions``: sessions that could have run
    uncompacted and whose compaction cost more, each in its own profile's currency, the worst
    (extra cost over uncompacted) first. Totals add
    the sessions priced in USD only (``none``'s cost is millions of tokens), unless no session
    is."""
    profiles = {name: frame for (name,), frame in costs.group_by("profile", maintain_order=True)}
    currencies = {n: known[n].currency if n in known else "USD" for n in profiles}
    currency = (
        "USD" if "USD" in currencies.values() or not currencies else next(iter(currencies.values()))
    )
    counted = costs.filter(
        pl.col("profile").is_in([n for n, c in currencies.items() if c == currency])
    )
    sessions = _session_costs(costs, currencies)
    fits = sessions.filter(pl.col("infeasible_turns") == 0).get_column("session_id")
    feasible = _cost_sums(counted.filter(pl.col("session_id").is_in(fits.implode())))
    out: dict[str, Any] = {"currency": currency, **_cost_sums(counted)}
    out["by_tier"] = {t.name: _tier_cost(counted, int(t)) for t in TIERS}
    out["by_profile"] = {
        str(name): {"currency": currencies[name], **_cost_sums(frame)}
        for name, frame in sorted(profiles.items())
    }
    out["feasible"] = {
        k: feasible[k] for k in ("sessions", "total", "uncompacted", "saved", "saved_share")
    }
    out["infeasible_sessions"] = (
        sessions.filter(pl.col("infeasible_turns") > 0)
        .select("session_id", "infeasible_turns", "turns")
        .to_dicts()
    )
    out["net_negative_sessions"] = (
        sessions.filter((pl.col("infeasible_turns") == 0) & (pl.col("extra") > 0))
        .sort(pl.col("extra") / pl.col("uncompacted"), "session_id", descending=[True, False])
        .select("session_id", "total", "uncompacted", "extra", "currency")
        .to_dicts()
    )
    return out


def _session_costs(costs: pl.DataFrame, currencies: Mapping[str, str]) -> pl.DataFrame:
    """Per session: total (turns and summariser calls), uncompacted, ``extra`` (what
    compacting cost beyond not compacting, 0 within rounding), turns, infeasible turns."""
    total = pl.col("cost").sum() + pl.col("summarizer_cost").sum()
    uncompacted = pl.col("uncompacted_cost").sum()
    return (
        costs.group_by("session_id", maintain_order=True)
        .agg(
            total=total,
            uncompacted=uncompacted,
            turns=pl.len(),
            infeasible_turns=pl.col("uncompacted_over_window").fill_null(value=False).sum(),
            currency=pl.col("profile").first().replace_strict(currencies, default="USD"),
        )
        .with_columns(
            extra=pl.when(pl.col("total") > pl.col("uncompacted") * (1 + 1e-9))
            .then(pl.col("total") - pl.col("uncompacted"))
            .otherwise(0.0)
        )
        .sort("session_id")
    )


def _cost_sums(frame: pl.DataFrame) -> dict[str, Any]:
    sums = frame.select(
        pl.col("cost", "summarizer_cost", "uncompacted_cost", "cut_cost").sum(),
        pl.col("cache_read_tokens", "cache_write_tokens", "uncached_tokens").sum(),
        sessions=pl.col("session_id").n_unique(),
        infeasible=pl.col("uncompacted_over_window").fill_null(value=False).sum(),
    ).row(0, named=True)
    total = float(sums["cost"] or 0) + float(sums["summarizer_cost"] or 0)
    uncompacted = float(sums["uncompacted_cost"] or 0)
    cut = float(sums["cut_cost"] or 0)
    saved = uncompacted - total - cut
    return {
        "sessions": int(sums["sessions"] or 0),
        "total": total,
        "turns": float(sums["cost"] or 0),
        "summarizer": float(sums["summarizer_cost"] or 0),
        "uncompacted": uncompacted,
        "saved": saved,
        "saved_share": saved / uncompacted if uncompacted else None,
        "cut": cut,
        "priced_turns": frame.height,
        "infeasible_turns": int(sums["infeasible"] or 0),
        "uncompacted_feasible": not sums["infeasible"],
        "cache_read_tokens": int(sums["cache_read_tokens"] or 0),
        "cache_write_tokens": int(sums["cache_write_tokens"] or 0),
        "uncached_tokens": int(sums["uncached_tokens"] or 0),
    }


def _tier_cost(frame: pl.DataFrame, tier: int) -> dict[str, Any]:
    """The turns whose view the tier's compactions produced: what they did not send, less
    what truncations cut from it (``cut``), less the tier's summariser calls (``net``)."""
    rows = frame.filter(pl.col("tier") == tier)
    cut = float(rows["cut_cost"].sum() or 0)
    saved = float((rows["uncompacted_cost"] - rows["cost"]).sum() or 0) - cut
    summarizer = float(rows["summarizer_cost"].sum() or 0)
    return {"saved": saved, "cut": cut, "summarizer": summarizer, "net": saved - summarizer}


def _anchor_retention(store: EventStore, scope: _Scope) -> dict[str, Any]:
    detail = retention_status_rows(store) if scope.ids is None else _retention_rows(store, scope)
    survival = anchor_survival(detail) if detail.height else pl.DataFrame()
    rows = {r["anchor_type"]: r for r in survival.iter_rows(named=True)} if survival.height else {}
    return {
        t.value: {
            "survival_next": rows.get(t.value, {}).get("survival_next"),
            "survival_last": rows.get(t.value, {}).get("survival_last"),
        }
        for t in AnchorType
    }


def _retention_rows(store: EventStore, scope: _Scope) -> pl.DataFrame:
    if not job_table_exists(store, "job_retention_detail"):
        return pl.DataFrame()
    return store.query(
        f"""SELECT anchor_type, status, last_compaction, reaches_last FROM job_retention_detail
            WHERE {scope.live()}"""
    )


def _artifact_retention(store: EventStore, scope: _Scope) -> dict[str, Any]:
    per_compaction = scope.rows(job_table(store, "job_artifacts"))
    if per_compaction.is_empty():
        return {"rate": None, "lost": 0, "sessions": 0, "no_content_sessions": 0}
    row = overall_artifact_retention(per_compaction).row(0, named=True)
    return {
        "rate": row["rate"],
        "lost": row["lost"] or 0,
        "sessions": row["sessions"],
        "no_content_sessions": row["no_content_sessions"],
    }


def quarantined_since(store: EventStore, since: dt.datetime) -> list[QuarantinedLine]:
    """Spool lines quarantined at or after ``since``, by file and line."""
    frame = store.query(
        "SELECT source, line, reason, raw FROM quarantine WHERE quarantined_at >= ? "
        "ORDER BY source, line",
        [since],
    )
    return [QuarantinedLine(str(s), int(n), str(r), str(w)) for s, n, r, w in frame.iter_rows()]
