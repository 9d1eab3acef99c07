"""``compactlens report FILE.html``: one self-contained HTML file to attach to a post-mortem.

The headline figures (``analytics.queries.stats``, cost included), the same figures per cohort
side by side (``--by``, as ``stats --by`` groups them; by window on its own when the store holds
more than one), the emergency post-mortems (cause first,
what happened, the fix), the silent drops (why, and where by turn and tier), the harnesses' own
compactions (what they lost, what was read again after them) and the newest
tuning recommendation (its rule, held-back figures and baseline from the run's ``tune --json``
object when the caller passes it, and the TOML file ``replay --config`` loads), then Plotly
figures: effective
compactions per tier, compression ratio percentiles per tier, tokens billed against the
uncompacted history per session, anchor survival per type, and the lead-ups of the post-mortems
it samples. The post-mortems are sampled across sessions: the fleet's figures by cause, then
the largest group (by cause) of each of the sessions with most emergencies.
plotly.js is inlined once, so the file opens offline. Every text value is HTML-escaped. It reads
the store (and the home's tuning folder) and writes the one file; it computes no figure of its
own.
"""

from __future__ import annotations

import datetime as dt
import html
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analytics.jobs.postmortem_groups import sampled_groups
from analytics.queries.audit import audit_json
from analytics.queries.findings import postmortem_json, retention_json
from analytics.queries.frames import sessions_frame
from analytics.queries.materialize import job_table
from analytics.queries.stats import CohortKey, cohorts, fleet_stats
from analytics.report.charts import (
    billing_figure,
    compression_figure,
    compression_rows,
    lead_ups_figure,
    survival_figure,
    survival_rows,
    tier_counts_figure,
)
from analytics.report.theme import FONT, GRID, TEXT
from analytics.store import EventStore

_STYLE = f"""*{{box-sizing:border-box}}
body{{font-family:{FONT};color:{TEXT};margin:0 auto;padding:1.5em 2em;max-width:1200px;
line-height:1.45}}
table{{border-collapse:collapse;width:100%}}
td,th{{border:1px solid {GRID};padding:4px 8px;text-align:left;vertical-align:top;
overflow-wrap:anywhere}}
th{{background:#f0f2f6;font-weight:600}}
pre,code{{white-space:pre-wrap;overflow-wrap:anywhere}}
.plotly-graph-div{{max-width:100%}}
h1{{font-size:1.6em}}h2{{font-size:1.2em;margin-top:2em}}.empty{{color:#6b6f7b}}"""
"""The app's look (``theme``: font, text and grid colours); every cell wraps, anywhere if it
must (a sub-agent's session id is 100 characters without a space), so that the page fits a
1280 px screen without scrolling sideways."""


def _figures_table(stats: dict[str, Any]) -> str:
    rows = [
        ("sessions", stats["sessions"]),
        ("turns", stats["turns"]),
        ("effective compactions", stats["compactions"]["total"]),
        ("no-op compaction attempts", stats["compactions"]["noops"]),
        *((f"{tier} compactions", n) for tier, n in stats["compactions"]["by_tier"].items()),
        ("emergency truncations (something dropped)", stats["emergency"]["truncations"]),
        ("emergency offloads (nothing dropped)", stats["emergency"]["offload_only"]),
        ("tokens billed", stats["tokens"]["billed"]),
        ("tokens without compaction", stats["tokens"]["uncompacted"]),
        ("share saved", stats["tokens"]["saved_share"]),
        (f"cost ({stats['cost']['currency']})", stats["cost"]["total"]),
        (f"cost without compaction ({stats['cost']['currency']})", stats["cost"]["uncompacted"]),
        ("silent drops of intent or decisions", stats["silent_drops"]),
        ("artifact retention rate", stats["artifact_retention"]["rate"]),
        ("quarantined spool lines", stats["quarantined"]),
    ]
    cells = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>" for k, v in rows
    )
    return f"<table>{cells}</table>"


COHORT_COLUMNS = (
    "sessions",
    "effective compactions",
    "emergency truncations",
    "tokens billed",
    "share saved",
    "cost",
    "artifact retention",
)


def _cohorts(stats: dict[str, Any], by: Sequence[str]) -> str:
    """One row per cohort of ``stats["groups"]``: the headline figures side by side."""
    rows = [
        (
            ", ".join(f"{k} {_fmt(v)}" for k, v in group["key"].items()),
            g["sessions"],
            g["compactions"]["total"],
            g["emergency"]["truncations"],
            g["tokens"]["billed"],
            g["tokens"]["saved_share"],
            g["cost"]["total"],
            g["artifact_retention"]["rate"],
        )
        for group in stats.get("groups", [])
        for g in [group["stats"]]
    ]
    headers = (" × ".join(by) or "cohort", *COHORT_COLUMNS)
    return _table(headers, rows, "No sessions to group.")


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def _fmt(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(headers: tuple[str, ...], rows: Sequence[tuple[object, ...]], empty: str) -> str:
    if not rows:
        return f'<p class="empty">{html.escape(empty)}</p>'
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


SAMPLED_SESSIONS = 10
"""Sessions whose post-mortems the report shows: those with most emergencies, one group each."""


def _postmortems(found: dict[str, Any], sample: Sequence[Mapping[str, Any]]) -> str:
    """The fleet's emergencies in figures, then the largest group of each of the sessions
    with most emergencies (``sample``): a sample across sessions, not one session's many."""
    summary = found["summary"]
    if not summary["emergencies"]:
        return '<p class="empty">No emergency truncation in this store.</p>'
    per_session = Counter[str]()
    for group in found["groups"]:
        per_session[str(group["session_id"])] += int(group["count"])
    causes = ", ".join(f"{c} {n:,}" for c, n in summary["by_cause"].items())
    head = (
        f"<p>{_plural(summary['emergencies'], 'emergency', 'emergencies')} in "
        f"{_plural(summary['sessions'], 'session')}, "
        f"{_plural(summary['groups'], 'group')} by session and cause; "
        f"by cause: {html.escape(causes)}. "
        f"Settled (a verified fix, or the window that would avoid it): {summary['settled']:,} "
        f"({summary['settled_share']:.1%}). Below: the largest group of each of the "
        f"{_plural(len(sample), 'session')} with most emergencies; "
        "<code>compactlens postmortem</code> lists every group, <code>--json</code> every "
        "emergency.</p>"
    )
    fixes = {str(s["session_id"]): s["session_fix"] for s in found.get("sessions") or []}
    fleet = summary.get("fleet_fix")
    if fleet:
        detail = next(
            (f.get("detail") for f in fixes.values() if f and f.get("change") == fleet["change"]),
            None,
        )
        head += (
            f"<p>Fleet fix: {html.escape(str(detail or fleet['change']))} avoids every avoidable "
            f"emergency of {fleet['sessions']:,} of the {_plural(fleet['of'], 'session')} that "
            "needed a fix (each verified by replaying the whole session).</p>"
        )
    rows = [
        (
            g["session_id"],
            per_session[str(g["session_id"])],
            g["cause"],
            g["count"],
            g["turns_text"],
            f"turn {g['representative']['turn']}: {g.get('explanation') or '–'}",
            g["fix"]["words"],
            f"{g['settled']:,} of {g['count']:,}",
            _session_fix(fixes.get(str(g["session_id"]))),
        )
        for g in sample
    ]
    headers = (
        "session",
        "its emergencies",
        "cause",
        "in this group",
        "turns",
        "what happened",
        "fix",
        "settled",
        "one fix for the session",
    )
    return head + _table(headers, rows, "")


def _session_fix(fix: Mapping[str, Any] | None) -> str:
    """A session's ``session_fix`` in words ("–" where none was searched for)."""
    if not fix:
        return "–"
    if not fix.get("verified"):
        return f"none verified ({fix.get('reason') or 'no change avoided them all'})"
    return f"{fix.get('detail') or fix.get('change')} (verified)"


def _silent_drops(store: EventStore, limit: int = 50) -> str:
    drops = retention_json(store)["silent_drops"]
    rows = [
        (
            d["session_id"],
            d["anchor_type"],
            d["item"],
            d.get("dropped_turn"),
            d.get("dropped_tier"),
            d.get("reason"),
        )
        for d in drops[:limit]
    ]
    headers = ("session", "anchor", "item", "dropped at turn", "tier", "why")
    return _table(headers, rows, "No intent or key decision was silently dropped.")


def _harness_compactions(store: EventStore, limit: int = 50) -> str:
    found = audit_json(store)
    rows = [
        (
            c["session_id"],
            f"{c['harness']} {c['trigger']}",
            c["tokens_before"],
            c["tokens_after"],
            f"{len(c['artifacts']['lost'])} of "
            f"{len(c['artifacts']['lost']) + len(c['artifacts']['kept'])}",
            f"{c['user_messages']['lost']} of "
            f"{c['user_messages']['lost'] + c['user_messages']['kept']}",
            ", ".join(c["re_reads"][:5]) or "–",
        )
        for c in found["compactions"][:limit]
    ]
    headers = ("session", "harness", "tokens before", "after", "artifacts lost", "user msgs lost")
    rates = "".join(
        f"<li>{html.escape(origin)}: {f['re_reads']:,} of "
        f"{_plural(f['files_read_before'], 'file')} read before a compaction were read again "
        "after it</li>"
        for origin, f in found["summary"].items()
    )
    return _table((*headers, "re-read after"), rows, "No harness compaction imported.") + (
        f"<ul>{rates}</ul>" if rates else ""
    )


def _recommendation(home: Path | None, summary: dict[str, Any] | None = None) -> str:
    """The newest tuning run's recommendation: from its ``tune --json`` object (``summary``)
    the rule, the held-back figures and the baseline it stayed within, then that run's
    recommended TOML as the file says it (without a summary: the newest recommended TOML
    under ``<home>/tuning``)."""
    named = ((summary or {}).get("recommended") or {}).get("path")
    if named:
        found = [Path(named)] if Path(named).is_file() else []
    elif home is not None:
        found = sorted(
            (home / "tuning").glob("*-recommended*.toml"), key=lambda p: p.stat().st_mtime
        )
    else:
        found = []
    if not found and not summary:
        return '<p class="empty">No tuning run here yet: `compactlens tune PATH --window N`.</p>'
    parts = [_tuning_summary(summary)] if summary else []
    if found:
        newest = found[-1]
        text = newest.read_text(encoding="utf-8", errors="replace")
        parts.append(f"<p>{html.escape(str(newest))}</p><pre>{html.escape(text)}</pre>")
    return "".join(parts)


def _windows_if_several(store: EventStore) -> tuple[CohortKey, ...]:
    """``("window",)`` when the store's live sessions span more than one window, else ()."""
    return ("window",) if len(cohorts(sessions_frame(store), ["window"])) > 1 else ()


def _tuning_summary(summary: dict[str, Any]) -> str:
    rec = summary.get("recommended") or {}
    held = rec.get("held_back") or {}
    base = rec.get("baseline") or {}
    rows = [
        ("recommended", rec.get("name")),
        ("objective", summary.get("objective")),
        ("priced as", summary.get("price_profile") or "each session's model's profile"),
        ("rule", rec.get("rule")),
        ("held-back cost", held.get("cost")),
        ("held-back tokens billed", held.get("tokens_billed")),
        ("held-back artifact retention", held.get("artifact_retention")),
        ("cheapest baseline (tuning sessions)", base.get("name")),
        ("within it", base.get("within")),
    ]
    notes = "".join(f"<p>{html.escape(n)}</p>" for n in summary.get("notes") or [])
    return _table(("", "value"), rows, "") + notes


def write_report(
    store: EventStore,
    out: Path,
    *,
    spool_dir: Path | None = None,
    by: Sequence[CohortKey] | None = None,
    tuning: dict[str, Any] | None = None,
) -> Path:
    """Write the report to ``out`` (parents created) and return its path. ``by``: the cohorts
    to set side by side (None: by window when there is more than one); ``tuning``: the newest
    tuning run's ``tune --json`` object."""
    keys: Sequence[CohortKey] = by if by is not None else _windows_if_several(store)
    stats = fleet_stats(store, spool_dir, by=keys)
    found = postmortem_json(store)
    sample = sampled_groups(found["groups"], SAMPLED_SESSIONS)
    figures = [
        tier_counts_figure(stats["compactions"]["by_tier"]),
        compression_figure(compression_rows(stats["compression"])),
        billing_figure(job_table(store, "job_session_timeline")),
        survival_figure(
            survival_rows(stats["anchor_retention"]), "Anchor item survival, whole fleet"
        ),
        lead_ups_figure(
            job_table(store, "job_lead_up"),
            emergencies=job_table(store, "job_emergencies"),
            chosen=[g["representative"]["compaction_id"] for g in sample],
            title=f"Context ratio up to one emergency of each of the {len(sample)} sessions "
            "with most emergencies (their largest group's)",
        ),
    ]
    parts = [
        fig.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, fig in enumerate(figures)
    ]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = "\n".join(
        [
            f"<h1>compactlens report</h1><p>{html.escape(str(store.path))} · {stamp}</p>",
            "<h2>Headline figures</h2>",
            _figures_table(stats),
            *(
                (f"<h2>Cohorts by {html.escape(' × '.join(keys))}</h2>", _cohorts(stats, keys))
                if keys
                else ()
            ),
            "<h2>Emergency post-mortems</h2>",
            _postmortems(found, sample),
            "<h2>Silent drops of intent and key decisions</h2>",
            _silent_drops(store),
            "<h2>Harness compactions (Claude Code, Codex, OpenHands)</h2>",
            _harness_compactions(store),
            "<h2>Tuning recommendation</h2>",
            _recommendation(spool_dir.parent if spool_dir is not None else None, tuning),
            *(
                f"<h2>{html.escape(fig.layout.title.text)}</h2>{part}"
                for fig, part in zip(figures, parts, strict=True)
            ),
        ]
    )
    page = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>compactlens report</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
