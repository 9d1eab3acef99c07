"""The session timeline: context tokens per turn against the session's thresholds, with every
compaction a marker that says on hover what it cost and whether it paid for itself.

``timeline_figure`` draws ``turn_timeline`` rows (the view sent each turn, the uncompacted
history) and ``compaction_turns`` rows (one per effective compaction: turn, tokens before and
after, tier name, id), with, when the rows carry them, the ledger's columns
(``analytics.jobs.ledger``: invalidated cache, rewrite cost, savings after, break-even turn,
growth, rebound). The y axis holds the window and the line of views sent: a compaction whose
own estimate of the history before it is above that (an Emergency at 62,033 tokens on a 16k
window) is drawn at the top of the axis as an upward triangle and says its tokens on hover,
rather than squashing the line into the bottom of the chart. Threshold labels sit in the right
margin, each moved up as far as it needs not to cover the one below it. A compaction that made
the context larger is ringed ("grew the context"). Pure: frames in, a figure out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import polars as pl

from analytics.report.charts import THRESHOLDS, TIER_COLOURS, TIERS, styled, whole_turns

HEIGHT = 520
"""The timeline's height in pixels (fixed, so its labels can be placed in pixels)."""
MARGIN = {"l": 60, "r": 130, "t": 60, "b": 50}
PLOT_PX = 300
"""The least height of the plot area at ``HEIGHT`` (the legend below it and the margins taken
out, generously): labels are spaced for this, so on any larger area they stand further apart."""
LABEL_PX = 17
"""Pixels between the centres of two threshold labels (one line of 11 px text, with room)."""
CEILING = 0.96
"""Where a marker above the axis is drawn, as a share of the axis' top."""
HEADROOM = 1.08
"""The axis' top over the highest of the window and the views sent."""
GROWTH_RING = "#111111"


def threshold_tokens(
    thresholds: Mapping[str, float], window: int, reserve: int
) -> dict[str, float]:
    """The view size (tokens) at which each tier fires: ratio = (tokens + reserve) / window."""
    return {name: thresholds[name] * window - reserve for name in THRESHOLDS if name in thresholds}


def timeline_figure(
    turns: pl.DataFrame,
    markers: pl.DataFrame,
    *,
    thresholds: Mapping[str, float],
    window: int,
    reserve: int = 0,
    title: str = "Context tokens per turn",
    notes: pl.DataFrame | None = None,
    currency: str = "",
) -> go.Figure:
    """Tokens of the view sent each turn, the uncompacted history (hidden until asked for),
    threshold bands from Warn up, and one marker trace per tier (``id`` in customdata, the
    ledger in ``currency`` on hover), with compactions that grew the context ringed.
    ``notes`` (turn, tokens, text) are drawn as arrows, e.g. where the estimator learned a
    prompt the provider counted."""
    fig = _turn_lines(turns)
    top = axis_top(turns, window)
    _bands(fig, threshold_tokens(thresholds, window, reserve), window, top)
    after_last = int(turns.get_column("turn").max() or 0) + 1  # type: ignore[arg-type]
    rows = [dict(r) for r in markers.iter_rows(named=True)] if markers.height else []
    for row in rows:
        row["x"] = after_last if row["turn"] is None else row["turn"]
        before = int(row["tokens_before"] or 0)
        row["clipped"] = before > top * CEILING
        row["y"] = top * CEILING if row["clipped"] else before
        row["hover"] = "<br>".join(marker_lines(row, currency))
    for tier in TIERS:
        mine = [r for r in rows if r["tier_name"] == tier]
        if mine:
            fig.add_trace(_markers(tier, mine))
    grew = [r for r in rows if r.get("grew")]
    if grew:
        fig.add_trace(_growth(grew))
    fig.update_yaxes(range=[0, top])
    whole_turns(fig, turns.get_column("turn"))
    if notes is not None:
        _notes(fig, notes)
    fig = styled(fig, title, "turn (model call)", "tokens")
    fig.update_layout(height=HEIGHT, margin=MARGIN)
    return fig


def axis_top(turns: pl.DataFrame, window: int) -> float:
    """The top of the y axis: above the window and every view sent (not above the markers:
    a compaction's ``tokens_before`` is its own estimate of the history it started from, which
    can be far above any view sent)."""
    values = [float(window), *(float(v) for v in turns.get_column("tokens").drop_nulls())]
    return max(values) * HEADROOM


def marker_lines(row: Mapping[str, Any], currency: str = "") -> list[str]:
    """What a compaction's marker says on hover: tier and turn, tokens before and after, then
    its ledger (what it invalidated and cost, what it saved after, whether and when it paid
    for itself), whether it grew the context and whether the context was back at once."""
    turn = "after the last turn" if row.get("turn") is None else f"at turn {row['turn']}"
    before, after = row.get("tokens_before"), row.get("tokens_after")
    sizes = f"{_count(before)} → {_count(after)} tokens"
    if row.get("clipped"):
        sizes += " (above the chart: drawn at its top)"
    lines = [f"<b>{row.get('tier_name')}</b> {turn}", sizes, *ledger_lines(row, currency)]
    if row.get("grew"):
        why = row.get("growth_reason") or "the context after it is larger"
        lines.append(f"<b>grew the context</b> by {_count(row.get('growth_tokens'))} tokens: {why}")
    rebound = row.get("rebound_turns")
    if rebound is not None:
        lines.append(
            f"back above its tier {rebound} turn{'s' * (rebound != 1)} later (compacted again)"
        )
    return lines


def ledger_lines(row: Mapping[str, Any], currency: str = "") -> list[str]:
    """A compaction's ledger (``LEDGER_COLUMNS``) in words, one line each; one line saying
    it has none when its turns are not priced."""
    if "paid" not in row:
        return []
    if row.get("paid") is None:
        never = row.get("never")
        return [f"ledger: {never}" if never else "ledger: its turns are not priced"]
    lines = [
        f"cache invalidated: {_count(row.get('invalidated_tokens'))} tokens",
        f"rewrite cost: {_money(row.get('rewrite_cost'), currency)} (cache write and summary, "
        "beyond the turn it replaced)",
        f"saved after: {_money(row.get('saved_after'), currency)}",
    ]
    if row.get("paid"):
        lines.append(f"paid for itself at turn {row.get('break_even_turn')}")
    else:
        lines.append(f"did not pay for itself: {row.get('never') or 'never'}")
    if row.get("necessary"):
        lines.append("necessary: the uncompacted prompt would not have fitted the window")
    return lines


def _count(value: object) -> str:
    return "?" if value is None else f"{int(str(value)):,}"


def _money(value: object, currency: str) -> str:
    if value is None:
        return "–"
    return f"{float(str(value)):,.4f} {currency}".rstrip()


def _markers(tier: str, rows: Sequence[Mapping[str, Any]]) -> go.Scatter:
    return go.Scatter(
        x=[r["x"] for r in rows],
        y=[r["y"] for r in rows],
        mode="markers",
        name=tier,
        marker={
            "color": TIER_COLOURS[tier],
            "size": 11,
            "symbol": ["triangle-up" if r["clipped"] else "diamond" for r in rows],
        },
        customdata=[r["id"] for r in rows],
        hovertext=[r["hover"] for r in rows],
        hovertemplate="%{hovertext}<extra></extra>",
    )


def _growth(rows: Sequence[Mapping[str, Any]]) -> go.Scatter:
    """A ring around each compaction that grew the context (clickable like its marker)."""
    return go.Scatter(
        x=[r["x"] for r in rows],
        y=[r["y"] for r in rows],
        mode="markers",
        name="grew the context",
        marker={
            "symbol": "circle-open",
            "size": 22,
            "color": GROWTH_RING,
            "line": {"width": 2, "color": GROWTH_RING},
        },
        customdata=[r["id"] for r in rows],
        hovertext=[r["hover"] for r in rows],
        hovertemplate="%{hovertext}<extra></extra>",
    )


def _notes(fig: go.Figure, notes: pl.DataFrame) -> None:
    """An arrow and a short text at each note's turn and tokens (``turn``, ``tokens``,
    ``text`` columns): the text below and right of the point, at two depths so neighbouring
    notes do not overlap."""
    for i, row in enumerate(notes.iter_rows(named=True)):
        fig.add_annotation(
            x=row["turn"],
            y=row["tokens"],
            text=str(row["text"]),
            showarrow=True,
            arrowhead=2,
            ax=90,
            ay=60 if i % 2 == 0 else 100,
            bgcolor="rgba(255,255,255,0.85)",
            bordercolor="#1f77b4",
            font={"size": 11},
        )


def _turn_lines(turns: pl.DataFrame) -> go.Figure:
    """The view sent each turn, and the uncompacted history (hidden until asked for)."""
    fig = go.Figure()
    fig.add_trace(_line(turns, "tokens", "view sent", {"color": "#1f77b4"}))
    if (
        "history_tokens" in turns.columns
        and turns.get_column("history_tokens").null_count() < turns.height
    ):
        history = {"color": "#999999", "dash": "dot"}
        trace = _line(turns, "history_tokens", "uncompacted history", history)
        fig.add_trace(trace.update(visible="legendonly"))
    return fig


def _line(turns: pl.DataFrame, column: str, name: str, line: dict[str, str]) -> go.Scatter:
    """``column`` per turn as a line."""
    return go.Scatter(
        x=turns.get_column("turn").to_list(),
        y=turns.get_column(column).to_list(),
        mode="lines",
        name=name,
        line=line,
    )


def label_shifts(levels: Sequence[float], top: float) -> list[float]:
    """How far up (pixels) each label of ``levels`` (ascending tokens) must move so that no
    two are closer than ``LABEL_PX`` on a plot of ``PLOT_PX`` showing 0 to ``top``."""
    shifts: list[float] = []
    previous: float | None = None
    for level in levels:
        at = level / top * PLOT_PX if top > 0 else 0.0
        placed = at if previous is None else max(at, previous + LABEL_PX)
        shifts.append(placed - at)
        previous = placed
    return shifts


def _bands(fig: go.Figure, levels: Mapping[str, float], window: int, top: float) -> None:
    """Shaded bands between consecutive thresholds, the last one up to the window; a dashed
    line at each and its label in the right margin, moved apart where they would overlap."""
    names = [n for n in THRESHOLDS if n in levels]
    labels: list[tuple[float, str, str]] = []
    for i, name in enumerate(names):
        upper = levels[names[i + 1]] if i + 1 < len(names) else float(window)
        colour = TIER_COLOURS[name.upper()]
        fig.add_hrect(y0=levels[name], y1=upper, fillcolor=colour, opacity=0.08, line_width=0)
        fig.add_hline(y=levels[name], line={"color": colour, "width": 1, "dash": "dash"})
        labels.append((levels[name], f"{name.upper()} {levels[name]:,.0f}", colour))
    fig.add_hline(y=window, line={"color": "#000000", "width": 1})
    labels.append((float(window), f"window {window:,}", "#000000"))
    labels.sort(key=lambda label: label[0])
    shifts = label_shifts([level for level, _, _ in labels], top)
    for (level, text, colour), shift in zip(labels, shifts, strict=True):
        fig.add_annotation(
            x=1,
            xref="paper",
            xanchor="left",
            xshift=6,
            y=level,
            yref="y",
            yanchor="middle",
            yshift=shift,
            text=text,
            showarrow=False,
            font={"size": 11, "color": colour},
            name="threshold",
        )
