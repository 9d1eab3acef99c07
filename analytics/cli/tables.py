"""The result tables of the ``compactlens`` commands: import, replay, ingest, stats (with cost),
tune, retention and post-mortem.

Tables go to stdout through ``terminal.console``; the only stderr line here is ``stats``' warning
about an unprojected spool. Consoles, progress bars and problem lines are in ``terminal``.
Nothing here does any work.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from rich import filesize
from rich.table import Table
from rich.text import Text

from analytics.cli.commands import IngestReport, RunReport
from analytics.cli.terminal import console, err_console
from analytics.jobs.explanations import drop_reason_words
from analytics.jobs.postmortem_groups import turns_text
from analytics.store.projector import IngestResult
from analytics.tuning import baseline_line, figure_words, knob_lines, range_words


def tune_table(found: Mapping[str, Any]) -> None:
    """Every strategy's figures on the held-back sessions, cheapest first by the objective,
    trials with identical figures on one row (what they differ in said below the table), the
    recommended row marked, every figure with its unit; then what each knob did, the rule in
    words and where the config was written."""
    pareto = set(found["pareto"])
    objective = found.get("objective", "tokens")
    rec = found["recommended"]
    unit = found.get("cost_unit", "USD")
    together = {n: g for g in found.get("identical") or [] for n in g["names"]}
    table = Table(
        title=f"strategies on the held-back sessions (cheapest by {objective} first; "
        "trials with identical figures on one row)"
    )
    for column in ("", "strategy", f"cost ({unit})", "tokens billed", "cache-read tokens"):
        table.add_column(column, overflow="fold")
    for column in ("saved vs uncompacted", "turns over window", "emergencies"):
        table.add_column(column, overflow="fold")
    for column in ("artifacts kept", "anchor items kept", "violations (turns)", "Pareto"):
        table.add_column(column, overflow="fold")
    order = "cost" if objective == "cost" else "tokens_billed"
    shown: set[str] = set()
    merged: list[str] = []
    for row in sorted(found["strategies"], key=lambda r: (r[order], r["name"])):
        if row["name"] in shown:
            continue
        group = together.get(row["name"])
        names = group["names"] if group else [row["name"]]
        shown.update(names)
        if group:
            merged.append(_identical_words(row["name"], group))
        table.add_row(
            "▶" if rec["name"] in names else "",
            row["name"] + (f" (+{len(names) - 1} identical)" if group else ""),
            f"{row['cost']:,.4f}",
            f"{row['tokens_billed']:,}",
            f"{row['cache_read_tokens']:,}",
            _share(row["saved_share"]),
            str(row["turns_over_window"]),
            str(row["emergencies"]),
            _share(row["artifact_retention"]),
            _share(row["anchor_retention"]),
            str(row["violations"]),
            "yes" if pareto & set(names) else "",
        )
    console.print(table)
    for said in merged:
        console.print(said, soft_wrap=True, highlight=False)
    priced = found.get("price_profile") or "each session's profile from its model name"
    console.print(f"priced as: {priced} (cost in {unit})", soft_wrap=True)
    for said in knob_lines(found):
        console.print(said, soft_wrap=True, highlight=False)
    if rec["name"]:
        console.print(f"rule: {rec['rule']}", soft_wrap=True)
        console.print(f"recommended (▶): {rec['name']}, written to {rec['path']}", soft_wrap=True)
        if rec.get("estimator"):
            measured = str(rec["estimator"]).replace("<path>", str(rec["path"]))
            console.print(f"measured {measured}", soft_wrap=True)
        if line := baseline_line(rec, unit):
            console.print(line, soft_wrap=True)
        _fold_lines(rec.get("folds"), unit)
    else:
        console.print("no configuration met the constraints (0 turns over the window)")


def _identical_words(name: str, group: Mapping[str, Any]) -> str:
    """A line for a row that stands for several trials: which, and what they differ in (a
    group of progressive configs is counted, not listed: a grid makes hundreds)."""
    others = [n for n in group["names"] if n != name]
    varied = "; ".join(f"{k} {range_words(v)}" for k, v in group["varied"].items())
    if not varied:
        return f"identical figures: {name} and {', '.join(others)}"
    configs = [n for n in others if n.startswith("progressive")]
    rest = [n for n in others if n not in configs]
    listed = "".join(f", {n}" for n in rest)
    return (
        f"identical figures: {name}, {len(configs)} other progressive config(s){listed}; "
        f"{varied}: no effect on these sessions"
    )


def _fold_lines(folds: Mapping[str, Any] | None, cost_unit: str = "USD") -> None:
    """The recommendation's spread across the tuning folds, one line, with its unit."""
    if not folds or not folds.get("spread"):
        return
    spread, each = folds["spread"], folds["spread_per_session"]
    column = folds["objective"]

    def shown(value: float) -> str:
        return figure_words(column, value, cost_unit)

    console.print(
        f"across {len(folds['folds'])} tuning folds (by transcript file), its {column}: "
        f"min {shown(spread['min'])}, median {shown(spread['median'])}, "
        f"max {shown(spread['max'])} (per session {shown(each['min'])} / "
        f"{shown(each['median'])} / {shown(each['max'])})",
        soft_wrap=True,
    )


def _figures(title: str, rows: Sequence[tuple[str, object]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("")
    table.add_column("", justify="right")
    for name, value in rows:
        table.add_row(name, f"{value:,}" if isinstance(value, int) else str(value))
    return table


def _ingest_rows(result: IngestResult) -> list[tuple[str, object]]:
    return [
        ("spool files read", result.files),
        ("lines read", result.lines),
        ("new events", result.new_events),
        ("duplicates skipped", result.duplicates),
        ("lines quarantined", result.quarantined),
        ("bytes read", result.bytes_read),
        ("store maintenance runs", result.maintained),
        ("seconds", f"{result.seconds:.2f}"),
    ]


def _problem_files(report: RunReport, skipped: int) -> int:
    return len({i.path for i in report.issues}) - skipped


def import_summary(report: RunReport, skipped: int = 0) -> None:
    """The import table; ``skipped`` files in folders were not transcripts."""
    rows: list[tuple[str, object]] = [
        ("files read", report.files),
        ("sessions imported", report.sessions),
        ("already in the store, skipped", report.skipped),
        ("messages", report.messages),
        ("harness compactions stored", report.harness_compactions),
        ("files skipped (not transcripts)", skipped),
        ("files with problems", _problem_files(report, skipped)),
    ]
    if report.records:  # record files of the Go harness (--format harness9-records) only
        rows.insert(5, ("harness9 compaction records", report.records))
    console.print(_figures("import", rows))
    console.print(_figures("projected into the store", _ingest_rows(report.ingest)))


def replay_summary(report: RunReport, window: int, skipped: int = 0) -> None:
    """The replay table, with how many sessions' largest view exceeded the window."""
    tiers = report.tier_counts()
    over = sum(1 for r in report.replays if r.max_view_tokens > window)
    rows: list[tuple[str, object]] = [
        ("files read", report.files),
        ("sessions replayed", report.sessions),
        ("already in the store, skipped", report.skipped),
        ("turns (model calls)", sum(r.turns for r in report.replays)),
        *((f"{tier.label} compactions", n) for tier, n in tiers.items()),
        ("tokens saved", sum(r.tokens_saved for r in report.replays)),
        ("largest view (tokens)", max((r.max_view_tokens for r in report.replays), default=0)),
        ("window (tokens)", window),
        ("sessions with a view over the window", over),
        ("files skipped (not transcripts)", skipped),
        ("files with problems", _problem_files(report, skipped)),
    ]
    console.print(_figures("replay", rows))
    console.print(_figures("projected into the store", _ingest_rows(report.ingest)))


def ingest_summary(report: IngestReport, title: str = "ingest") -> None:
    console.print(_figures(title, _ingest_rows(report.result)))


def stats_table(
    stats: Mapping[str, Any], title: str = "compactlens", *, cohort: bool = False
) -> None:
    """The headline figures of ``stats --json``, each explained, then the same for each
    cohort of ``--by``; on stderr, a warning for an unprojected spool and one naming the
    sessions whose compaction cost more than not compacting (the fleet's, not per cohort).
    Truncation cuts are shown as cut, never as saved; an uncompacted history that would not
    have fit the window is said to be not possible."""
    tokens, emergency = stats["tokens"], stats["emergency"]
    share = tokens["saved_share"]
    ratio = stats.get("median_compression_ratio")
    artifacts = stats["artifact_retention"]
    rows: list[tuple[str, object]] = [
        ("sessions", stats["sessions"]),
        ("turns", stats["turns"]),
        ("messages", stats.get("messages", "–")),
        ("effective compactions", stats["compactions"]["total"]),
        *((f"  {t.lower()}", n) for t, n in stats["compactions"]["by_tier"].items()),
        ("no-op attempts (nothing to compact)", stats["compactions"]["noops"]),
        ("emergency truncations (messages dropped: context lost)", emergency["truncations"]),
        *_emergency_cut_rows(emergency),
        ("emergency offloads (nothing dropped)", emergency["offload_only"]),
        ("emergencies per 100 turns", _num(emergency["per_100_turns"])),
        ("median compression ratio (tokens after/before)", _num(ratio)),
        ("tokens billed (views over all turns + summariser calls)", tokens["billed"]),
        (
            "tokens without compaction",
            _without(tokens, f"{tokens['uncompacted']:,}", stats["turns"]),
        ),
        ("tokens cut by truncation (not counted as saved)", tokens.get("cut", 0)),
        ("share saved (cut tokens not counted)", "–" if share is None else f"{share:.1%}"),
        *_cost_rows(stats.get("cost"), stats["turns"]),
        ("silent drops (intent or decisions lost)", stats["silent_drops"]),
        ("artifact retention (paths, commands, errors kept)", _rate(artifacts["rate"])),
        ("quarantined spool lines", stats["quarantined"]),
    ]
    console.print(_figures(title, rows))
    for group in stats.get("groups", []):
        key = ", ".join(f"{k} {v}" for k, v in group["key"].items())
        stats_table(group["stats"], title=f"compactlens: {key}", cohort=True)
    if cohort:
        return
    pending = int(stats.get("unprojected_spool_bytes", 0))
    if pending:
        _warn(
            f"warning: {filesize.decimal(pending)} of spool events are not "
            "projected yet and not counted above; run `compactlens ingest`"
        )
    warn_net_negative(stats)


def _warn(text: str) -> None:
    err_console.print(text, soft_wrap=True, markup=False, highlight=False)


def warn_net_negative(stats: Mapping[str, Any], shown: int = 5) -> None:
    """On stderr, one line naming the sessions (``shown`` of them) whose compaction cost more
    than not compacting (``cost.net_negative_sessions``), if any."""
    losing = (stats.get("cost") or {}).get("net_negative_sessions") or []
    if not losing:
        return
    named = ", ".join(
        f"{s['session_id']} (+{s['extra']:,.4f} {s['currency']})" for s in losing[:shown]
    )
    rest = len(losing) - shown
    more = f" and {rest:,} more (stats --json lists them)" if rest > 0 else ""
    _warn(
        f"warning: compaction cost more than not compacting in {len(losing):,} "
        f"session{'s' if len(losing) != 1 else ''} that would have fit the window uncompacted "
        f"(summariser calls and cache writes included): {named}{more}"
    )


def _emergency_cut_rows(emergency: Mapping[str, Any]) -> list[tuple[str, object]]:
    if not emergency.get("cut_tokens") and not emergency["truncations"]:
        return []
    return [
        (
            "  cut by emergency truncation (not counted as saved)",
            f"{emergency.get('cut_tokens', 0):,} tokens, "
            f"{emergency.get('cut_turns', 0):,} turns affected, "
            f"{emergency.get('messages_dropped', 0):,} messages dropped",
        )
    ]


def _without(block: Mapping[str, Any], figure: str, turns: int) -> str:
    """``figure``, or "not possible" when the uncompacted history would not fit the window
    (of the block's ``priced_turns``, else of ``turns``)."""
    if block.get("uncompacted_feasible", True):
        return figure
    turns = block.get("priced_turns", turns)
    return (
        f"not possible — {block['infeasible_turns']:,} of {turns:,} turns would not fit "
        f"the window (as if it fit: {figure})"
    )


def _cost_rows(cost: Mapping[str, Any] | None, turns: int) -> list[tuple[str, object]]:
    """The cost lines of ``stats``: total, uncompacted (or not possible), saved without what
    truncations cut, the cut, the saving where uncompacted would have fit, the cache split,
    per profile, and how many sessions lost money by compacting."""
    if not cost or not cost.get("sessions"):
        return []
    unit = cost["currency"]
    share = cost["saved_share"]
    rows: list[tuple[str, object]] = [
        (f"cost ({unit}, turns + summariser, predicted prompt cache)", f"{cost['total']:,.4f}"),
        (
            f"cost without compaction ({unit})",
            _without(cost, f"{cost['uncompacted']:,.4f}", turns),
        ),
        (
            f"cost saved ({unit}, truncation cuts not counted)",
            "–" if share is None else f"{cost.get('saved', 0):,.4f} ({share:.1%})",
        ),
    ]
    if cost.get("cut"):
        rows.append((f"  cut by truncation ({unit}, not saved)", f"{cost['cut']:,.4f}"))
    feasible = cost.get("feasible") or {}
    if not cost.get("uncompacted_feasible", True) and feasible.get("sessions"):
        rows.append(
            (
                f"  saved where uncompacted would have fit ({feasible['sessions']:,} sessions)",
                f"{feasible['saved']:,.4f} ({_share(feasible['saved_share'])})",
            )
        )
    rows.append(("  cache read / written / uncached tokens", _cache_split(cost)))
    for name, figures in cost["by_profile"].items():
        rows.append(
            (
                f"  priced as {name} ({figures['sessions']:,} sessions)",
                f"{figures['total']:,.4f} {figures['currency']}",
            )
        )
    losing = cost.get("net_negative_sessions") or []
    if losing:
        rows.append(("sessions where compaction cost more than it saved", len(losing)))
    return rows


def _cache_split(cost: Mapping[str, Any]) -> str:
    parts = ("cache_read_tokens", "cache_write_tokens", "uncached_tokens")
    return " / ".join(f"{int(cost[p]):,}" for p in parts)


def _num(value: object) -> str:
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _share(value: object) -> str:
    return f"{value:.1%}" if isinstance(value, float) else "–"


def _rate(value: object) -> str:
    return "no content" if value is None else f"{value:.1%}" if isinstance(value, float) else "–"


def retention_table(found: Mapping[str, Any]) -> None:
    """Survival per anchor type, then every silent drop with where it appeared and vanished."""
    table = Table(title="anchor survival (share of items)")
    for column in ("anchor type", "to the next compaction", "to the last"):
        table.add_column(column)
    for row in found["survival"]:
        table.add_row(row["anchor_type"], _rate(row["survival_next"]), _rate(row["survival_last"]))
    console.print(table)
    drops = Table(title=f"silent drops ({len(found['silent_drops'])})")
    for column in ("session", "anchor", "item", "introduced", "dropped", "why"):
        drops.add_column(column, overflow="fold")
    for d in found["silent_drops"]:
        drops.add_row(
            d["session_id"],
            d["anchor_type"],
            d["item"],
            _compaction_at(d.get("introduced_turn"), None, d["introduced_at"]),
            _compaction_at(d.get("dropped_turn"), d.get("dropped_tier"), d["dropped_at"]),
            drop_reason_words(d.get("reason")),
        )
    console.print(drops)


def _compaction_at(turn: int | None, tier: str | None, compaction_id: str) -> str:
    """A compaction as a reader finds it: by turn and tier, with the id's first characters."""
    where = f"turn {turn}" if turn is not None else "turn ?"
    return f"{where} {tier or ''} ({compaction_id[:8]})".replace("  ", " ")


def postmortem_table(found: Mapping[str, Any]) -> None:
    """The fleet summary (emergencies, sessions, by cause, share settled), then one block per
    session, most emergencies first, with one block per group of its emergencies (by cause):
    how many and at which turns, the representative's sentence and lead-up, the fix, what the
    group dropped. ``postmortem --json`` keeps every emergency."""
    summary, groups = found["summary"], found["groups"]
    if not groups:
        console.print("No emergency truncation in this store.")
        return
    fixes = {str(s["session_id"]): s["session_fix"] for s in found.get("sessions") or []}
    for line in _postmortem_summary(summary, fixes):
        _indented(line, 0)
    by_session: dict[str, list[Mapping[str, Any]]] = {}
    for group in groups:
        by_session.setdefault(str(group["session_id"]), []).append(group)
    order = sorted(by_session.items(), key=lambda kv: -sum(g["count"] for g in kv[1]))
    for sid, session_groups in order:
        count = sum(g["count"] for g in session_groups)
        console.print()
        head = Text(f"{sid} — {_counted(count, 'emergency', 'emergencies')}", style="bold")
        console.print(head, soft_wrap=True)  # one line: a session id is not cut
        if fix := fixes.get(sid):
            _indented(f"one fix for the session: {_session_fix_words(fix)}", 2)
        for group in session_groups:
            _postmortem_group(group)
    console.print()
    _indented(
        "A group's fix is its representative's (the turn its sentence names); "
        "`postmortem --json` lists every emergency with its own.",
        0,
    )


def _counted(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _session_fix_words(fix: Mapping[str, Any]) -> str:
    """A ``session_fix`` in words: the change and the turns its replay avoided, or why not."""
    if not fix.get("verified"):
        return f"none verified ({fix.get('reason') or 'no change avoided them all'})"
    turns = fix.get("avoids") or []
    avoided = f": no emergency at {turns_text(turns)}" if turns else ""
    return f"{fix.get('detail') or fix.get('change')} (verified on the whole session{avoided})"


def _postmortem_summary(
    summary: Mapping[str, Any], fixes: Mapping[str, Mapping[str, Any] | None]
) -> list[str]:
    total = summary["emergencies"]
    causes = ", ".join(f"{cause} {n:,}" for cause, n in summary["by_cause"].items())
    settled = summary["settled_share"]
    lines = [
        f"emergency post-mortems: {_counted(total, 'emergency', 'emergencies')} in "
        f"{_counted(summary['sessions'], 'session', 'sessions')}, "
        f"{_counted(summary['groups'], 'group', 'groups')} (by session and cause)",
        f"by cause: {causes}",
        f"settled: {summary['settled']:,} of {total:,} ({_share(settled)}): a verified fix, "
        "or the window that would avoid it",
    ]
    fleet = summary.get("fleet_fix")
    if fleet:
        detail = next(
            (f.get("detail") for f in fixes.values() if f and f.get("change") == fleet["change"]),
            None,
        )
        lines.append(
            f"fleet fix: {detail or fleet['change']} avoids every avoidable emergency of "
            f"{fleet['sessions']:,} of the {fleet['of']:,} sessions that needed a fix"
        )
    return lines


_SPARKS = "▁▂▃▄▅▆▇█"


def _lead_up_line(lead: Sequence[Mapping[str, Any]]) -> str:
    """A lead-up in one line: the ratio of each turn as a bar from 0 to 100% of the window,
    then the first and last ratios and the turns they span."""
    ratios = [(r.get("turn"), float(r["ratio"])) for r in lead if r.get("ratio") is not None]
    if not ratios:
        return "none recorded"
    top = len(_SPARKS) - 1
    bars = "".join(_SPARKS[min(top, max(0, int(r * len(_SPARKS))))] for _, r in ratios)
    (first_turn, first), (last_turn, last) = ratios[0], ratios[-1]
    return f"{bars} {first:.0%} at turn {first_turn} → {last:.0%} at turn {last_turn}"


def _postmortem_group(group: Mapping[str, Any]) -> None:
    """One group: its head line, then the representative's sentence, lead-up and the fix."""
    rep = group["representative"]
    dropped = group["dropped"]
    head = (
        f"{group['cause'] or 'cause unknown'} × {group['count']:,} · {group['turns_text']} · "
        f"settled {group['settled']:,}/{group['count']:,} · dropped "
        f"{dropped['messages']:,} msgs, {dropped['tokens']:,} tokens"
    )
    lines = [
        f"turn {rep['turn']}: {group.get('explanation') or 'no explanation was recorded'}",
        f"lead-up: {_lead_up_line(group['lead_up'])}",
        f"fix: {group['fix']['words']}",
    ]
    _indented(head, 2)
    for line in lines:
        _indented(line, 4)


def _indented(text: str, indent: int) -> None:
    """``text`` wrapped to the console's width, every line indented by ``indent``."""
    pad = " " * indent
    wrapped = textwrap.fill(text, max(console.width, 40), initial_indent=pad, subsequent_indent=pad)
    console.print(wrapped, soft_wrap=True, markup=False, highlight=False)
