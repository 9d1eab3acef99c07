"""The dependency rules of SPEC section 2, checked from the imports of every module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import compactor

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


def test_analytics_uses_only_compactor_public_names_and_duckdb_in_store() -> None:
    public = set(compactor.__all__)
    for path in _modules("analytics"):
        for module, names, _lazy in _imports(path):
            top = module.split(".")[0]
            assert top != "app", f"{path} imports the app"
            if top == "compactor":
                assert module == "compactor", f"{path} imports {module}: use public names"
                missing = set(names) - public
                assert not missing, f"{path} imports non-public compactor names {missing}"
            if top == "duckdb":
                assert path.name == "store.py", f"{path}: duckdb belongs in the store layer"


def test_app_imports_only_analytics_public_names() -> None:
    for path in _modules("app"):
        for module, _names, _lazy in _imports(path):
            top = module.split(".")[0]
            assert top not in ("compactor", "duckdb"), f"{path} imports {module}"
            if top == "analytics":
                assert module in ("analytics", "analytics.queries"), (
                    f"{path} imports {module}: the app reads through analytics' public names"
                )


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
