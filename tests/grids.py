"""Tuning grids for tests: exactly the configs a test means to try.

A ``--grid`` file is exactly its combinations, every key it does not name at the library
default (``analytics.tuning.specs.load_grid``), so ``grid_toml(warn=[0.5, 0.6])`` is two
configurations (the full 128-config default grid is ``bench/tuning_recommendation.py``'s work).
"""

from __future__ import annotations

from typing import Any

import tomli_w


def grid_toml(**varied: list[Any]) -> str:
    """A grid file's text holding ``varied`` as given."""
    # TOML has no null: a grid writes tool-time offload "off" as false
    return tomli_w.dumps({k: [False if v is None else v for v in vs] for k, vs in varied.items()})
