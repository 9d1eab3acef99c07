"""``pip install compactlens`` is the library alone; the read side comes with ``[suite]``.

The first test reads what the package declares; the second does what a user does in a fresh
virtual environment: ``pip install <checkout>`` without extras (pydantic comes from the package
index, as it would for them), then runs the README's agent-loop example there and asks for the
read side, which must name the extra that brings it in one line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import venv
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READ_SIDE = ("duckdb", "polars", "streamlit", "plotly", "pyarrow", "optuna", "dask", "typer")


def _name(requirement: str) -> str:
    """The distribution name of a requirement string (``duckdb>=1.5; extra == 'x'`` → duckdb)."""
    for stop in "<>=!~[;( ":
        requirement = requirement.split(stop, 1)[0]
    return requirement.strip().lower()


def test_the_package_requires_only_pydantic_and_the_extras_bring_the_rest() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert [_name(r) for r in project["dependencies"]] == ["pydantic"]
    extras = project["optional-dependencies"]
    suite = {_name(r) for r in extras["suite"]}
    assert {"duckdb", "polars", "streamlit", "plotly", "typer", "rich"} <= suite
    assert {"optuna", "dask"} <= {_name(r) for r in extras["tune"]}
    assert {"opentelemetry-sdk"} <= {_name(r) for r in extras["otel"]}
    # the installed metadata says the same (this checkout is installed editable)
    unconditional = [r for r in metadata.requires("compactlens") or [] if "extra ==" not in r]
    assert [_name(r) for r in unconditional] == ["pydantic"]


def _copy_project(to: Path) -> Path:
    """The files a build reads, copied (a build writes beside them; the checkout stays clean)."""
    to.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, to / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for package in ("compactor", "analytics", "app"):
        shutil.copytree(ROOT / package, to / package, ignore=ignore)
    return to


@pytest.mark.e2e
def test_a_fresh_venv_without_extras_runs_the_readme_loop_and_names_the_suite_extra(
    tmp_path: Path,
) -> None:
    env_dir = tmp_path / "venv"
    # no pip of its own (ensurepip takes seconds): this suite's pip installs into it and lists
    # it with ``--python``, resolving against the package index just as it would from inside
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    project = _copy_project(tmp_path / "project")
    installed = subprocess.run(
        [*pip, "install", "--quiet", project],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    have = subprocess.run(
        [*pip, "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {d["name"].lower() for d in json.loads(have.stdout)}
    assert "compactlens" in names and "pydantic" in names
    assert not names & set(READ_SIDE), sorted(names & set(READ_SIDE))

    work = tmp_path / "agent"
    work.mkdir()
    driver = ROOT / "tests" / "readme_driver.py"
    ran = subprocess.run(
        [python, "-I", driver, ROOT / "README.md", "30"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    outcome = json.loads(ran.stdout.strip().splitlines()[-1])
    assert outcome["calls"] == 30
    assert outcome["loaded"] == []
    assert outcome["largest_view"] < outcome["window"]
    assert any((work / "data" / "spool").glob("*.jsonl"))

    cli = subprocess.run(
        [env_dir / "bin" / "compactlens", "stats"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cli.returncode == 1
    lines = cli.stderr.strip().splitlines()
    assert len(lines) == 1, cli.stderr
    assert "pip install 'compactlens[suite]'" in lines[0] and "duckdb" in lines[0]
    imported = subprocess.run(
        [python, "-I", "-c", "import analytics"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert imported.returncode == 1
    assert imported.stderr.strip().splitlines()[-1].startswith("analytics.extras.MissingExtraError")
