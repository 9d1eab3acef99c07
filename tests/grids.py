"""Tuning grids for tests: exactly the configs a test means to try, nothing from the default grid.

A ``--grid`` file's missing keys take the default grid's values (``analytics.tuning.specs``), so
``warn = [0.5, 0.6]`` alone is 64 configurations. ``grid_toml`` pins every key of the default
grid to the library default unless the test gives it values, so a test runs the few configs it
asserts on (the full 128-config grid is ``bench/tuning_recommendation.py``'s work).
"""

from __future__ import annotations

from typing import Any

import tomli_w

from analytics.tuning.specs import DEFAULT_GRID
from compactor import CompactorConfig


def grid_toml(**varied: list[Any]) -> str:
    """A grid file's text: ``varied`` as given, every other default-grid key at the default."""
    defaults = CompactorConfig().model_dump()
    grid = {key: [defaults[key]] for key in DEFAULT_GRID} | varied
    # TOML has no null: a grid writes tool-time offload "off" as false
    return tomli_w.dumps({k: [False if v is None else v for v in vs] for k, vs in grid.items()})
