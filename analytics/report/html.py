"""``compactlens report FILE.html``: one self-contained HTML file to attach to a post-mortem.

The headline figures (``analytics.queries.stats``), then Plotly figures: effective compactions per
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

import polars as pl

from analytics.queries.materialize import job_table
from analytics.queries.stats import fleet_stats
from analytics.report.charts import (
    billing_figure,
    compression_figure,
    lead_ups_figure,
    survival_figure,
    tier_counts_figure,
)
from analytics.store import EventStore
from compactor import CompactionTier

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


def _compression_rows(stats: dict[str, Any]) -> pl.DataFrame:
    """The ``compression`` object of ``stats`` as ``compression_by_tier`` rows."""
    rows = [
        {"tier": int(CompactionTier[name]), "tier_name": name, **figures}
        for name, figures in stats["compression"].items()
    ]
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema={"tier": pl.Int64})


def _survival_rows(stats: dict[str, Any]) -> pl.DataFrame:
    """The ``anchor_retention`` object of ``stats`` as ``anchor_survival`` rows."""
    return pl.DataFrame(
        [{"anchor_type": kind, **shares} for kind, shares in stats["anchor_retention"].items()]
    )


def write_report(store: EventStore, out: Path, *, spool_dir: Path | None = None) -> Path:
    """Write the report to ``out`` (parents created) and return its path."""
    stats = fleet_stats(store, spool_dir)
    figures = [
        tier_counts_figure(stats["compactions"]["by_tier"]),
        compression_figure(_compression_rows(stats)),
        billing_figure(job_table(store, "job_session_timeline")),
        survival_figure(_survival_rows(stats), "Anchor item survival, whole fleet"),
        lead_ups_figure(job_table(store, "job_lead_up")),
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
