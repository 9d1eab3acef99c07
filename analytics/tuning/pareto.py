"""The Pareto front of a results table: the cheapest (by the objective: cost, or tokens billed)
vs the most artifacts retained.

Pure: a DataFrame in, names out. Only feasible rows compete (0 turns over the window and no
invariant violations); when no row is feasible, every row does, so the front is never empty for
a non-empty table.
"""

from __future__ import annotations

import polars as pl

FRONT_COLUMNS = ("name", "artifact_retention", "turns_over_window", "violations")
OBJECTIVE_COLUMNS = {"cost": "cost", "tokens": "tokens_billed"}
"""``--objective`` → the column it minimises."""


def feasible(table: pl.DataFrame) -> pl.DataFrame:
    """Rows with 0 turns over the window and no violations."""
    return table.filter((pl.col("turns_over_window") == 0) & (pl.col("violations") == 0))


def pareto_front(table: pl.DataFrame, objective: str = "tokens") -> list[str]:
    """Names of the rows no other row dominates (no dearer by ``objective`` and no less
    retention, one of them strictly better), ordered by the objective then name."""
    column = OBJECTIVE_COLUMNS[objective]
    missing = [c for c in (*FRONT_COLUMNS, column) if c not in table.columns]
    if missing:
        raise ValueError(f"results table lacks column(s) {missing}")
    pool = feasible(table)
    if pool.height == 0:
        pool = table
    rows = pool.select("name", column, "artifact_retention").sort(column, "name")
    front: list[str] = []
    points = rows.rows()
    for name, tokens, retention in points:
        dominated = any(
            t <= tokens and r >= retention and (t < tokens or r > retention) for _n, t, r in points
        )
        if not dominated:
            front.append(name)
    return front
