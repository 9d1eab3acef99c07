"""The figures only the report draws: titles, axis units, one trace per series or emergency."""

from __future__ import annotations

import polars as pl

from analytics.report.charts import billing_figure, lead_ups_figure, pareto_figure


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
