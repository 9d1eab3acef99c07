"""Pure figure builders: Polars frames in, Plotly figures out, no Streamlit, no store.

Shared by the app's pages and ``compactlens report`` (which is why they live in analytics: the
app may import analytics, never the other way round).

Every figure has a title that says what it shows and axis titles with units, and the look the
app and the report share (``theme.THEME``); tiers keep the same colour on every chart. The
session timeline is ``analytics.report.timeline``'s. The frames are the analytics jobs'
outputs (``compression_by_tier``, ``anchor_survival``, the post-mortem frames, the tuning
strategies); these functions only draw them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import polars as pl

from analytics.report.theme import THEME

TIER_COLOURS: dict[str, str] = {
    "WARN": "#d4a017",
    "SOFT": "#e67e22",
    "FULL": "#c0392b",
    "EMERGENCY": "#6c0b0b",
}
TIERS = tuple(TIER_COLOURS)
THRESHOLDS = ("warn", "soft", "full", "emergency")


def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    """The shared look (``THEME``), the title and the axis titles (with units)."""
    fig.update_layout(
        template=THEME,
        title={"text": title},
        xaxis_title=x,
        yaxis_title=y,
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def styled(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    """``fig`` with the shared look, ``title`` and the axis titles ``x`` and ``y``."""
    return _layout(fig, title, x, y)


def whole_turns(fig: go.Figure, turns: pl.Series) -> None:
    """Turns are whole numbers: over a short span, one tick per turn instead of 1, 1.5, 2."""
    values = turns.drop_nulls()
    if values.len() and int(values.max()) - int(values.min()) <= 15:  # type: ignore[arg-type]
        fig.update_xaxes(dtick=1)


def tier_counts_figure(by_tier: Mapping[str, int]) -> go.Figure:
    """Effective compactions per tier (the ``compactions.by_tier`` of ``fleet_stats``)."""
    tiers = [t for t in TIERS if t in by_tier]
    fig = go.Figure(
        go.Bar(
            x=tiers,
            y=[by_tier[t] for t in tiers],
            marker_color=[TIER_COLOURS[t] for t in tiers],
            name="compactions",
        )
    )
    return _layout(fig, "Compactions per tier", "tier", "compactions (count)")


def compression_figure(compression: pl.DataFrame) -> go.Figure:
    """Ratio percentiles per tier (``compression_by_tier`` rows with a tier name)."""
    rows = compression.filter(pl.col("tier") > 0) if compression.height else compression
    names = rows.get_column("tier_name").to_list() if rows.height else []
    fig = go.Figure()
    for column in ("ratio_p50", "ratio_p90", "ratio_p99"):
        values = rows.get_column(column).to_list() if rows.height else []
        fig.add_trace(go.Bar(x=names, y=values, name=column.removeprefix("ratio_")))
    fig.update_layout(barmode="group")
    return _layout(
        fig, "Compression ratio by tier (lower is smaller)", "tier", "ratio (tokens after / before)"
    )


def compression_rows(compression: Mapping[str, Mapping[str, Any]]) -> pl.DataFrame:
    """The ``compression`` object of ``stats --json`` (tier name → percentiles) as the rows
    ``compression_figure`` draws, in tier order."""
    order = {name: i for i, name in enumerate(TIERS, start=1)}
    rows = [
        {"tier": order[name], "tier_name": name, **{k: figures.get(k) for k in _RATIOS}}
        for name, figures in compression.items()
        if name in order
    ]
    schema = {"tier": pl.Int64, "tier_name": pl.String, **dict.fromkeys(_RATIOS, pl.Float64)}
    return pl.DataFrame(rows, schema=schema).sort("tier")


_RATIOS = ("ratio_p50", "ratio_p90", "ratio_p99")


def survival_rows(retention: Mapping[str, Mapping[str, Any]]) -> pl.DataFrame:
    """The ``anchor_retention`` object of ``stats --json`` (anchor type → shares) as the rows
    ``survival_figure`` draws."""
    rows = [
        {
            "anchor_type": name,
            "survival_next": shares.get("survival_next"),
            "survival_last": shares.get("survival_last"),
        }
        for name, shares in retention.items()
    ]
    schema = {"anchor_type": pl.String, "survival_next": pl.Float64, "survival_last": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def survival_figure(survival: pl.DataFrame, title: str = "Anchor survival") -> go.Figure:
    """``anchor_survival`` rows: survival to the next compaction and to the last, per type."""
    types = survival.get_column("anchor_type").to_list() if survival.height else []
    fig = go.Figure()
    for column, label in (("survival_next", "to the next"), ("survival_last", "to the last")):
        values = survival.get_column(column).to_list() if survival.height else []
        fig.add_trace(go.Bar(x=types, y=values, name=f"survives {label} compaction"))
    fig.update_layout(barmode="group", yaxis_range=[0, 1.05])
    return _layout(fig, title, "anchor type", "share of items (0–1)")


def memory_figure(
    curve: pl.DataFrame, by_type: pl.DataFrame | None = None, title: str = "Memory"
) -> go.Figure:
    """Survival by the number of compactions gone through (``survival_by_compactions`` rows:
    compactions, items, survived; ``by_type`` the same per anchor type): the share of items
    still present after k compactions, one line for all items and one per anchor type, with
    how many items each point stands on in its hover."""
    fig = go.Figure()
    lines = [("all items", curve, {"width": 3, "color": "#31333f"})]
    if by_type is not None and by_type.height:
        for (name,), rows in by_type.sort("anchor_type").group_by(
            "anchor_type", maintain_order=True
        ):
            lines.append((str(name), rows, {"width": 1.5}))
    for name, rows, line in lines:
        rows = rows.sort("compactions")
        items = rows.get_column("items").to_list()
        survived = rows.get_column("survived").to_list()
        fig.add_trace(
            go.Scatter(
                x=rows.get_column("compactions").to_list(),
                y=[s / n if n else None for s, n in zip(survived, items, strict=True)],
                mode="lines+markers",
                name=name,
                line=line,
                customdata=[[s, n] for s, n in zip(survived, items, strict=True)],
                hovertemplate=f"{name}<br>after %{{x}} compaction(s): %{{customdata[0]}} of "
                "%{customdata[1]} items still present<extra></extra>",
            )
        )
    fig.update_layout(yaxis_range=[0, 1.05])
    whole_turns(
        fig, curve.get_column("compactions") if curve.height else pl.Series([], dtype=pl.Int64)
    )
    return _layout(
        fig,
        title,
        "compactions the items went through (count)",
        "share of items still present (0–1)",
    )


def lead_up_figure(lead_up: pl.DataFrame, thresholds: Mapping[str, float]) -> go.Figure:
    """The per-turn ratio before an emergency (post-mortem ``lead_up`` rows), with the
    session's thresholds as lines."""
    fig = go.Figure(
        go.Scatter(
            x=lead_up.get_column("turn").to_list() if lead_up.height else [],
            y=lead_up.get_column("ratio").to_list() if lead_up.height else [],
            mode="lines+markers",
            name="ratio",
        )
    )
    for name in THRESHOLDS:
        if name in thresholds:
            fig.add_hline(
                y=thresholds[name],
                line={"color": TIER_COLOURS[name.upper()], "dash": "dash", "width": 1},
                annotation_text=name.upper(),
            )
    if lead_up.height:
        whole_turns(fig, lead_up.get_column("turn"))
    return _layout(
        fig, "Lead-up to the emergency", "turn (model call)", "ratio of the window (0–1)"
    )


def contributors_figure(top: pl.DataFrame) -> go.Figure:
    """The messages that added the most tokens before an emergency (``top_contributors``)."""
    labels = [
        f"#{row['history_index']} {row['role']}"
        + (f" ({row['tool_name']})" if row["tool_name"] else "")
        for row in top.iter_rows(named=True)
    ]
    fig = go.Figure(
        go.Bar(
            x=top.get_column("tokens").to_list() if top.height else [],
            y=labels,
            orientation="h",
            name="tokens",
        )
    )
    fig.update_layout(yaxis={"autorange": "reversed"})
    return _layout(fig, "Top contributors before the emergency", "tokens (bytes / 4)", "message")


def pareto_figure(
    strategies: pl.DataFrame, pareto: list[str], x: str = "tokens_billed", currency: str = ""
) -> go.Figure:
    """Tuning strategies: the objective ``x`` (``tokens_billed``, or ``cost`` in ``currency``)
    against artifact retention. Each strategy on the Pareto front is its own trace, named in
    the legend (in ``pareto`` order) rather than by text on the plot: front strategies sit
    close together, and their labels piled into one blob. The others are one grey trace, named
    on hover only."""
    label = x.replace("_", " ")
    fig = go.Figure()
    rest = strategies.filter(~pl.col("name").is_in(pareto))
    fig.add_trace(
        go.Scatter(
            x=rest.get_column(x).to_list(),
            y=rest.get_column("artifact_retention").to_list(),
            hovertext=rest.get_column("name").to_list(),
            hoverinfo="text+x+y",
            mode="markers",
            name="other strategies",
            marker={"size": 8, "color": "#b0b0b0"},
        )
    )
    for i, name in enumerate(pareto):
        row = strategies.filter(pl.col("name") == name)
        fig.add_trace(
            go.Scatter(
                x=row.get_column(x).to_list(),
                y=row.get_column("artifact_retention").to_list(),
                hovertext=[name] * row.height,
                hoverinfo="text+x+y",
                mode="markers",
                name=name,
                marker={"size": 12, "symbol": _FRONT_SYMBOLS[i % len(_FRONT_SYMBOLS)]},
            )
        )
    fig = _layout(
        fig,
        f"Tuning: {label} vs artifact retention (the Pareto front named in the legend)",
        f"{label} ({currency})" if currency else label,
        "artifact retention (0–1)",
    )
    fig.update_layout(legend={"orientation": "v", "x": 1.02, "y": 1, "title": {"text": "front"}})
    return fig


_FRONT_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "cross", "star", "x", "pentagon")
"""Front points differ by symbol as well as colour, so neighbours stay apart in print."""


def short_label(session_id: str, width: int = 28) -> str:
    """A session id short enough for an axis or a legend: its start and its end; a Claude
    Code sub-agent's chain (``ROOT:sidechain:AGENT@…``) by its root and its agent, which is
    what tells the chains of one session apart."""
    text = str(session_id)
    root, marker, tail = text.partition(":sidechain:")
    if marker:
        return f"{root[:8]} sidechain {tail.split('@', 1)[0][:8]}"
    return text if len(text) <= width else f"{text[: width - 10]}…{text[-9:]}"


def short_labels(session_ids: Sequence[str], width: int = 28) -> list[str]:
    """``short_label`` of each id, made unique: ids that shorten alike get their replay's
    ``@window#config`` suffix, then a number (Plotly draws one bar for equal labels, so five
    sub-agents shortened alike would be one bar)."""
    labels = [short_label(s, width) for s in session_ids]
    alike = Counter(labels)
    labels = [
        f"{label} @{sid.rsplit('@', 1)[1]}" if alike[label] > 1 and "@" in sid else label
        for sid, label in zip(session_ids, labels, strict=True)
    ]
    alike, seen = Counter(labels), Counter[str]()
    out = []
    for label in labels:
        seen[label] += 1
        out.append(f"{label} ({seen[label]})" if alike[label] > 1 else label)
    return out


def billing_figure(timeline: pl.DataFrame, top: int = 30) -> go.Figure:
    """Tokens billed against the uncompacted history for the largest sessions
    (``job_session_timeline`` rows), as horizontal bars: long session ids read along the
    y axis instead of squashing the plot."""
    # no rows may mean no columns either (a job that never ran): sort only what is there
    rows = (
        timeline.sort("tokens_uncompacted", descending=True).head(top)
        if timeline.height
        else timeline
    )
    sessions = rows.get_column("session_id").to_list() if rows.height else []
    labels = short_labels(sessions)
    fig = go.Figure()
    for column, name in (("tokens_billed", "billed"), ("tokens_uncompacted", "without compaction")):
        values = rows.get_column(column).to_list() if rows.height else []
        fig.add_trace(go.Bar(y=labels, x=values, name=name, orientation="h", customdata=sessions))
    fig.update_layout(barmode="group", height=max(400, 28 * len(labels) + 150))
    fig.update_yaxes(autorange="reversed", automargin=True)
    return _layout(
        fig,
        f"Tokens billed vs without compaction (the {top} largest sessions)",
        "tokens (summed over turns)",
        "session",
    )


def lead_ups_figure(
    lead_ups: pl.DataFrame,
    top: int = 20,
    emergencies: pl.DataFrame | None = None,
    *,
    chosen: Sequence[str] | None = None,
    title: str | None = None,
) -> go.Figure:
    """The ratio the tier was decided on, turn by turn up to and including each of the first
    ``top`` emergencies (or of the ``chosen`` compaction ids, in that order), one line each
    (``job_lead_up`` rows: ``session_id``, ``compaction_id``, ``seq``, ``turn``, ``ratio``),
    named by session, turn and (from ``emergencies``, ``job_emergencies`` rows) cause, with the
    Emergency threshold drawn."""
    fig = go.Figure()
    # the first emergencies by session and time, whatever order the table was written in
    ordered = lead_ups.sort("session_id", "seq") if lead_ups.height else lead_ups
    ids: list[str] = (
        ordered.get_column("compaction_id").unique(maintain_order=True).head(top).to_list()
        if ordered.height and chosen is None
        else list(chosen or [])
    )
    causes: dict[str, str] = {}
    if emergencies is not None and {"compaction_id", "cause"} <= set(emergencies.columns):
        causes = dict(emergencies.select("compaction_id", "cause").iter_rows())
    for cid in ids:
        rows = ordered.filter(pl.col("compaction_id") == cid) if ordered.height else ordered
        if not rows.height:
            continue
        turn = int(rows.get_column("turn").max() or 0)  # type: ignore[arg-type]
        why = f" · {causes[cid]}" if causes.get(cid) else ""
        fig.add_trace(
            go.Scatter(
                x=rows.get_column("turn").to_list(),
                y=rows.get_column("ratio").to_list(),
                mode="lines+markers",
                name=f"{short_label(rows.get_column('session_id')[0], 22)} t{turn}{why}",
            )
        )
    fig.add_hline(y=0.95, line={"dash": "dot", "color": TIER_COLOURS["EMERGENCY"]})
    fig.update_layout(height=520)
    fig = _layout(
        fig,
        title or f"Context ratio in the turns up to each emergency (first {top})",
        "turn (model call)",
        "ratio of the window the tier was decided on (0–1)",
    )
    fig.update_layout(legend={"orientation": "v", "x": 1.02, "y": 1})
    return fig
