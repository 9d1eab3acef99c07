"""The Pareto front on hand-built results tables."""

from __future__ import annotations

import polars as pl
import pytest

from analytics.tuning import pareto_front


def _table(rows: list[tuple[str, int, float, int, int]]) -> pl.DataFrame:
    names = ["name", "tokens_billed", "artifact_retention", "turns_over_window", "violations"]
    return pl.DataFrame(rows, schema=names, orient="row")


def test_front_keeps_the_feasible_rows_no_other_row_dominates() -> None:
    table = _table(
        [
            ("a", 100, 0.50, 0, 0),
            ("b", 120, 0.90, 0, 0),
            ("c", 130, 0.80, 0, 0),  # dominated by b
            ("d", 90, 0.95, 3, 0),  # would dominate everything, but goes over the window
            ("e", 100, 0.40, 0, 0),  # dominated by a (same tokens, less retained)
            ("f", 150, 0.95, 0, 0),
            ("g", 95, 0.99, 0, 1),  # a violation makes it infeasible
        ]
    )
    assert pareto_front(table) == ["a", "b", "f"]


def test_equal_rows_are_both_on_the_front() -> None:
    table = _table([("x", 100, 0.5, 0, 0), ("y", 100, 0.5, 0, 0), ("z", 200, 0.5, 0, 0)])
    assert pareto_front(table) == ["x", "y"]


def test_without_a_feasible_row_every_row_competes() -> None:
    table = _table([("a", 100, 0.5, 1, 0), ("b", 90, 0.4, 2, 0), ("c", 120, 0.3, 0, 5)])
    assert pareto_front(table) == ["b", "a"]


def test_a_table_without_the_figures_is_rejected() -> None:
    with pytest.raises(ValueError, match="artifact_retention"):
        pareto_front(pl.DataFrame({"name": ["a"], "tokens_billed": [1]}))
