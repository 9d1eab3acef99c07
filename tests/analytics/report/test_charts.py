"""The figures only the report draws: titles, axis units, one trace per series or emergency."""

from __future__ import annotations

import polars as pl

from analytics.report.charts import billing_figure, lead_ups_figure, pareto_figure, short_labels
from analytics.report.theme import THEME


def test_billing_figure_draws_the_largest_sessions_billed_and_uncompacted() -> None:
    timeline = pl.DataFrame(
        {
            "session_id": ["a", "b", "c"],
            "tokens_billed": [10, 300, 20],
            "tokens_uncompacted": [100, 900, 50],
        }
    )

    fig = billing_figure(timeline, top=2)

    assert [t.name for t in fig.data] == ["billed", "without compaction"]
    # horizontal bars: the session ids read along the y axis, the tokens along x
    assert list(fig.data[0].y) == ["b", "a"] and list(fig.data[0].x) == [300, 10]
    assert fig.data[0].orientation == "h"
    assert "2 largest" in fig.layout.title.text and fig.layout.xaxis.title.text


def test_long_session_ids_are_shortened_on_the_axis_but_kept_whole_for_hover() -> None:
    long_id = "chat-history-a9a89dfd:1027@16000#93b6981c-" + "x" * 40
    timeline = pl.DataFrame(
        {"session_id": [long_id], "tokens_billed": [1], "tokens_uncompacted": [2]}
    )
    fig = billing_figure(timeline)
    (label,) = fig.data[0].y
    assert len(label) <= 28 and label.startswith("chat-history") and label.endswith(long_id[-9:])
    assert list(fig.data[0].customdata) == [long_id]


def test_lead_ups_figure_draws_one_line_per_emergency_up_to_top() -> None:
    lead = pl.DataFrame(
        {
            "session_id": ["s1"] * 4,
            "compaction_id": ["e1", "e1", "e2", "e3"],
            "seq": [1, 2, 5, 9],
            "turn": [1, 2, 5, 9],
            "ratio": [0.5, 0.7, 0.9, 0.99],
        }
    )

    fig = lead_ups_figure(lead, top=2)

    assert len(fig.data) == 2
    assert list(fig.data[0].y) == [0.5, 0.7]
    assert lead_ups_figure(lead.clear()).data == ()


def test_lead_ups_are_drawn_for_the_first_emergencies_whatever_the_table_order() -> None:
    rows = pl.DataFrame(
        {
            "session_id": ["s2", "s1", "s1", "s1"],
            "compaction_id": ["c-late", "c-second", "c-first", "c-first"],
            "seq": [5, 9, 2, 1],
            "turn": [3, 5, 2, 1],
            "ratio": [0.9, 0.8, 0.7, 0.6],
        }
    )
    fig = lead_ups_figure(rows, top=2)
    assert [t.name for t in fig.data] == ["s1 t2", "s1 t5"]  # session and emergency turn
    assert list(fig.data[0].x) == [1, 2]


def test_lead_up_lines_are_named_by_session_turn_and_cause() -> None:
    rows = pl.DataFrame(
        {
            "session_id": ["s1", "s1"],
            "compaction_id": ["e1", "e1"],
            "seq": [1, 2],
            "turn": [1, 2],
            "ratio": [0.3, 0.97],
        }
    )
    causes = pl.DataFrame({"compaction_id": ["e1"], "cause": ["burst"]})
    fig = lead_ups_figure(rows, emergencies=causes)
    assert [t.name for t in fig.data] == ["s1 t2 · burst"]
    assert fig.layout.shapes[0].y0 == 0.95  # the Emergency threshold is drawn


def test_pareto_front_names_are_never_drawn_as_text_that_can_overlap() -> None:
    # six front strategies within 1% of each other: text labels would pile into one blob
    names = [f"progressive warn=0.{5 + i} soft=0.7 full=0.8" for i in range(6)]
    table = pl.DataFrame(
        {
            "name": [*names, "masking", "truncate"],
            "tokens_billed": [100_000 + 300 * i for i in range(6)] + [150_000, 90_000],
            "artifact_retention": [0.90 + 0.001 * i for i in range(6)] + [0.5, 0.2],
        }
    )
    front = names

    fig = pareto_figure(table, front)

    assert not [t.name for t in fig.data if t.mode and "text" in t.mode]
    assert not fig.layout.annotations
    named = [t.name for t in fig.data if t.showlegend is not False]
    assert [n for n in named if n in front] == front  # each front strategy named once, in order
    others = next(t for t in fig.data if t.name == "other strategies")
    assert sorted(others.hovertext) == ["masking", "truncate"]  # the rest: hover only


SIDECHAINS = [
    f"fe5e1c67-53e7-4862-81ae-d0e013e3270b:sidechain:{agent}-20bb-4edb-9dad-9f08267e0cc2"
    "@16000#b6ad1d17"
    for agent in ("60dade70", "0d692b0f", "7c1e2a44", "a9d3f0b1", "e2c12050")
]


def test_five_sidechains_of_one_session_are_five_bars_named_by_their_agent() -> None:
    timeline = pl.DataFrame(
        {
            "session_id": SIDECHAINS,
            "tokens_billed": [100, 200, 300, 400, 500],
            "tokens_uncompacted": [1_000, 2_000, 3_000, 4_000, 5_000],
        }
    )

    fig = billing_figure(timeline)

    labels = list(fig.data[0].y)
    assert len(set(labels)) == 5  # one bar each, not one merged bar
    assert "fe5e1c67 sidechain e2c12050" in labels and "fe5e1c67 sidechain 60dade70" in labels
    assert sorted(fig.data[0].customdata) == sorted(SIDECHAINS)  # whole ids on hover


def test_ids_that_shorten_alike_are_told_apart() -> None:
    same = ["a" * 40 + "x" + "z" * 10, "a" * 40 + "y" + "z" * 10]
    windows = [SIDECHAINS[0], SIDECHAINS[0].replace("@16000", "@32000")]

    assert len(set(short_labels(same))) == 2
    assert short_labels(windows) == [
        "fe5e1c67 sidechain 60dade70 @16000#b6ad1d17",
        "fe5e1c67 sidechain 60dade70 @32000#b6ad1d17",
    ]
    assert short_labels(["s1", "s2"]) == ["s1", "s2"]


def test_the_report_s_figures_share_the_app_s_theme() -> None:
    timeline = pl.DataFrame(
        {"session_id": ["s1"], "tokens_billed": [1], "tokens_uncompacted": [2]},
    )
    figures = [
        billing_figure(timeline),
        lead_ups_figure(pl.DataFrame(schema={"session_id": pl.String})),
        pareto_figure(
            pl.DataFrame({"name": ["a"], "tokens_billed": [1], "artifact_retention": [0.5]}), []
        ),
    ]

    for fig in figures:
        assert fig.layout.template.layout.font.family == THEME.layout.font.family
        assert fig.layout.template.layout.colorway == THEME.layout.colorway
