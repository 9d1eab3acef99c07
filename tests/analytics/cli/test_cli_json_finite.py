"""``--json`` output is JSON even when a figure is not finite (issue 28, item 6.12).

A price profile of 1e308 per million tokens makes every cost overflow to infinity (and a
difference of two of them NaN). ``stats --json`` must still print a document a strict JSON
parser reads (``Infinity`` and ``NaN`` are no JSON), with ``null`` where a figure is not finite,
and say on stderr that it did so. The store is one synthetic session run through the compactor.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from analytics.cli.main import app
from compactor import SpoolSink
from tests.analytics.spool_helpers import ingest, run_session

HUGE = """name = "huge"
caching = "explicit"
input = 1e308
cache_read = 1e308
cache_write = 1e308
output = 1e308
"""


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _walk(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [v for item in value.values() for v in _walk(item)]
    if isinstance(value, list):
        return [v for item in value for v in _walk(item)]
    return [value]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    sink = SpoolSink(home / "spool")
    run_session(home, sink, 3)
    sink.close()
    ingest(home)
    (tmp_path / "huge.toml").write_text(HUGE, encoding="utf-8")
    return home


@pytest.mark.parametrize("by", [[], ["--by", "model"]], ids=["fleet", "by-model"])
def test_stats_json_with_overflowing_prices_is_valid_json_with_nulls(
    home: Path, by: list[str]
) -> None:
    profile = home.parent / "huge.toml"
    done = CliRunner().invoke(
        app, ["stats", "--json", "--home", str(home), "--price-profile", str(profile), *by]
    )
    assert done.exit_code == 0, done.output
    found = _strict(done.stdout)  # no Infinity, no NaN
    values = _walk(found)
    assert None in values  # the overflowing figures are there, as null
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in values)
    assert "not finite" in done.stderr and "null" in done.stderr
