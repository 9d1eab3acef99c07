"""``compactlens report FILE.html``: one self-contained HTML file to attach to a post-mortem.

The headline figures (``analytics.stats``), then Plotly figures: effective compactions per
tier, compression ratio percentiles per tier, tokens billed against the uncompacted history
per session, anchor survival per type, and each emergency's lead-up. plotly.js is inlined once,
so the file opens offline. Every text value is HTML-escaped. It reads the store and writes the
one file; it computes no figure of its own.
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import polars as pl

from analytics.findings import postmortem_json
from analytics.materialize import job_table
from analytics.stats import fleet_stats
from analytics.store import EventStore

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em}.empty{color:#666}"""


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
        ("silent drops of intent or decisions", stats["silent_drops"]),
        ("artifact retention rate", stats["artifact_retention"]["rate"]),
        ("quarantined spool lines", stats["quarantined"]),
    ]
    cells = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>" for k, v in rows
    )
    return f"<table>{cells}</table>"


def _fmt(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _bar(title: str, x: list[Any], y: list[Any], x_title: str, y_title: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=x, y=y))
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, height=360)
    return fig


def tier_figure(stats: dict[str, Any]) -> go.Figure:
    by_tier = stats["compactions"]["by_tier"]
    return _bar(
        "Effective compactions per tier", list(by_tier), list(by_tier.values()), "tier", "count"
    )


def compression_figure(stats: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    tiers = list(stats["compression"])
    for q in ("ratio_p50", "ratio_p90", "ratio_p99"):
        fig.add_trace(go.Bar(name=q, x=tiers, y=[stats["compression"][t][q] for t in tiers]))
    fig.update_layout(
        title="Compression ratio per tier (tokens after/before; lower saves more)",
        xaxis_title="tier",
        yaxis_title="ratio after/before",
        barmode="group",
        height=360,
    )
    return fig


def billing_figure(timeline: pl.DataFrame) -> go.Figure:
    fig = go.Figure()
    if timeline.height:
        top = timeline.sort("tokens_uncompacted", descending=True).head(30)
        sessions = top.get_column("session_id").to_list()
        fig.add_trace(go.Bar(name="billed", x=sessions, y=top.get_column("tokens_billed")))
        fig.add_trace(
            go.Bar(name="without compaction", x=sessions, y=top.get_column("tokens_uncompacted"))
        )
    fig.update_layout(
        title="Tokens billed vs without compaction (the 30 largest sessions)",
        xaxis_title="session",
        yaxis_title="tokens (summed over turns)",
        barmode="group",
        height=420,
    )
    return fig


def survival_figure(stats: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    kinds = list(stats["anchor_retention"])
    for key in ("survival_next", "survival_last"):
        values = [stats["anchor_retention"][k][key] for k in kinds]
        fig.add_trace(go.Bar(name=key, x=kinds, y=values))
    fig.update_layout(
        title="Anchor item survival (share of items kept to the next / the last compaction)",
        xaxis_title="anchor type",
        yaxis_title="share (0..1)",
        barmode="group",
        height=360,
    )
    return fig


def lead_up_figure(postmortems: list[dict[str, Any]]) -> go.Figure:
    fig = go.Figure()
    for pm in postmortems[:20]:
        lead = pm["lead_up"]
        fig.add_trace(
            go.Scatter(
                x=[p["turn"] for p in lead],
                y=[p["ratio"] for p in lead],
                mode="lines+markers",
                name=f"{pm['session_id']} turn {pm['turn']}",
            )
        )
    fig.update_layout(
        title="Context ratio in the turns before each emergency (first 20)",
        xaxis_title="turn",
        yaxis_title="ratio of the window",
        height=420,
    )
    return fig


def write_report(store: EventStore, out: Path, *, spool_dir: Path | None = None) -> Path:
    """Write the report to ``out`` (parents created) and return its path."""
    stats = fleet_stats(store, spool_dir)
    postmortems = postmortem_json(store, counterfactuals=True)["postmortems"]
    figures = [
        tier_figure(stats),
        compression_figure(stats),
        billing_figure(job_table(store, "job_session_timeline")),
        survival_figure(stats),
        lead_up_figure(postmortems),
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
