"""The dependency rules of SPEC section 2, checked from the imports of every module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import compactor
import compactor.events

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)


def _imports(path: Path) -> list[tuple[str, list[str], bool]]:
    """(module, imported names, lazy) for each import; lazy = inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy_nodes = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        for n in ast.walk(f)
    }
    out: list[tuple[str, list[str], bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], id(node) in lazy_nodes) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, [a.name for a in node.names], id(node) in lazy_nodes))
    return out


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_compactor_imports_only_stdlib_and_pydantic_at_module_level() -> None:
    for path in _modules("compactor"):
        for module, _names, lazy in _imports(path):
            top = module.split(".")[0]
            if top in ("openai", "anthropic"):
                assert lazy, f"{path}: SDK {module!r} must be imported lazily inside its adapter"
                assert "llm" in path.parts, f"{path}: SDK imports belong in compactor/llm"
                continue
            assert top in STDLIB or top in ("compactor", "pydantic", "typing_extensions"), (
                f"{path} imports {module!r}: compactor may use the stdlib and pydantic only"
            )


SURFACES = {
    "compactor": set(compactor.__all__),
    "compactor.events": set(compactor.events.__all__),
}
"""What analytics may import from compactor: its public names and the documented event schema."""


def analytics_violations(path: Path) -> list[str]:
    out: list[str] = []
    for module, names, _lazy in _imports(path):
        top = module.split(".")[0]
        if top == "app":
            out.append(f"{path} imports the app")
        if top == "compactor":
            surface = SURFACES.get(module)
            if surface is None:
                out.append(f"{path} imports {module}: use compactor or compactor.events")
                continue
            missing = set(names) - surface
            if missing:
                out.append(f"{path} imports non-public {module} names {sorted(missing)}")
        if top == "duckdb" and path.name != "store.py":
            out.append(f"{path}: duckdb belongs in the store layer")
    return out


def app_violations(path: Path, public: set[str]) -> list[str]:
    out: list[str] = []
    for module, names, _lazy in _imports(path):
        top = module.split(".")[0]
        if top in ("compactor", "duckdb"):
            out.append(f"{path} imports {module}")
        if top == "analytics":
            if module != "analytics":
                out.append(f"{path} imports {module}: the app uses analytics' public names")
            elif set(names) - public:
                out.append(f"{path} imports non-public analytics names {set(names) - public}")
    return out


def test_analytics_uses_only_compactor_public_names_and_duckdb_in_store() -> None:
    problems = [p for path in _modules("analytics") for p in analytics_violations(path)]
    assert not problems, "\n".join(problems)


def test_app_imports_only_analytics_public_names() -> None:
    import analytics

    public = set(analytics.__all__)
    problems = [p for path in _modules("app") for p in app_violations(path, public)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("from analytics.store import EventStore", "imports analytics.store"),
        ("from analytics import _private_helper", "non-public analytics names"),
        ("import duckdb", "imports duckdb"),
        ("from compactor import Message", "imports compactor"),
    ],
)
def test_the_app_rule_catches_each_kind_of_violation(
    tmp_path: Path, line: str, expected: str
) -> None:
    page = tmp_path / "page.py"
    page.write_text(line + "\n", encoding="utf-8")

    problems = app_violations(page, {"EventStore"})

    assert len(problems) == 1 and expected in problems[0]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("from compactor.session import CompactionSession", "use compactor or compactor.events"),
        ("from compactor import CompactionOutcome", "non-public compactor names"),
        ("from compactor.events import Nope", "non-public compactor.events names"),
        ("import duckdb", "store layer"),
    ],
)
def test_the_analytics_rule_catches_each_kind_of_violation(
    tmp_path: Path, line: str, expected: str
) -> None:
    module = tmp_path / "jobs.py"
    module.write_text(line + "\n", encoding="utf-8")

    problems = analytics_violations(module)

    assert len(problems) == 1 and expected in problems[0]


def test_the_compactor_surface_is_the_documented_one_not_its_internals() -> None:
    internals = {"CompactionOutcome", "EventFactory", "safe_name", "split_head_tail", "is_na"}
    assert not internals & set(compactor.__all__)
    assert compactor.__all__ == sorted(compactor.__all__)
    assert len(compactor.__all__) < 70


def test_compactor_imports_without_optional_sdks() -> None:
    code = (
        "import sys\n"
        "sys.modules['openai'] = None\n"
        "sys.modules['anthropic'] = None\n"
        "import compactor\n"
        "assert 'duckdb' not in sys.modules and 'polars' not in sys.modules\n"
        "print(len(compactor.__all__))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(compactor.__all__)


def test_public_surface_names_exist() -> None:
    for name in compactor.__all__:
        assert hasattr(compactor, name), name
