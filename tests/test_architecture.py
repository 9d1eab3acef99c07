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
    """(module, imported names, lazy) for each import; lazy = inside a function, or under
    ``if TYPE_CHECKING:`` (never run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy_nodes = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) or _is_type_checking_block(f)
        for n in ast.walk(f)
    }
    out: list[tuple[str, list[str], bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], id(node) in lazy_nodes) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module, [a.name for a in node.names], id(node) in lazy_nodes))
    return out


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


FRAMEWORKS = {"pydantic_ai", "langchain", "langchain_core", "langgraph", "agents"}
"""The agent frameworks compactor/adapters/ plugs into (one extra each)."""


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
            if top in FRAMEWORKS:
                assert lazy, f"{path}: framework {module!r} must be imported lazily, when used"
                assert "adapters" in path.parts, f"{path}: {module!r} belongs in compactor/adapters"
                continue
            if top == "opentelemetry":
                assert lazy, f"{path}: the OpenTelemetry SDK is imported lazily, inside the sink"
                assert path.name == "otlp.py", f"{path}: OpenTelemetry belongs in compactor/otlp.py"
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
        if top == "duckdb" and room_of(path) != "store":
            out.append(f"{path}: duckdb belongs in the store layer (analytics/store/)")
        if top == "analytics":
            out += room_violations(path, module)
    return out


ROOMS: dict[str, set[str]] = {
    "errors": set(),
    "text": set(),
    "extras": {"errors"},
    "jobs": set(),
    "store": {"errors", "text", "extras"},
    "importers": {"errors", "text", "extras", "store"},
    "replay": {"errors", "text", "extras", "jobs", "importers"},
    "queries": {"errors", "text", "extras", "jobs", "store", "importers", "replay"},
    "tuning": {"errors", "text", "extras", "jobs", "importers", "replay"},
    "report": {"errors", "text", "extras", "jobs", "store", "queries"},
    "cli": {
        "errors",
        "text",
        "extras",
        "jobs",
        "store",
        "importers",
        "replay",
        "queries",
        "tuning",
        "report",
    },
    "__init__": {
        "errors",
        "extras",
        "jobs",
        "store",
        "importers",
        "replay",
        "queries",
        "tuning",
        "report",
    },
}
"""Each room of ``analytics/`` and the rooms it may import (besides itself): the layers run one
way, from the pure jobs and the store up to the command line; the package's ``__init__`` (the
app's surface) may use every room but the command line. ``extras`` (which optional dependency
brings what) is below every room that imports one lazily; the pure jobs need none."""


def room_of(path: Path) -> str:
    """The room of a module under ``analytics/``: its sub-package, or its module name."""
    parts = path.parts[path.parts.index("analytics") + 1 :] if "analytics" in path.parts else ()
    return parts[0].removesuffix(".py") if parts else path.stem


def room_violations(path: Path, module: str) -> list[str]:
    room = room_of(path)
    target = module.split(".")[1] if "." in module else "__init__"
    if target == room or room not in ROOMS:
        return []
    if target == "__init__":
        return [f"{path} imports the analytics package itself: import the module it needs"]
    if target not in ROOMS[room]:
        return [f"{path} ({room}) imports {module}: {room} may use {sorted(ROOMS[room])}"]
    return []


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
        ("from analytics import EventStore", "the analytics package itself"),
        ("from analytics.store import EventStore", "jobs may use []"),
    ],
)
def test_the_analytics_rule_catches_each_kind_of_violation(
    tmp_path: Path, line: str, expected: str
) -> None:
    module = tmp_path / "analytics" / "jobs" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text(line + "\n", encoding="utf-8")

    problems = analytics_violations(module)

    assert len(problems) == 1 and expected in problems[0]


def test_the_compactor_surface_is_the_documented_one_not_its_internals() -> None:
    internals = {
        *("CompactionOutcome", "EventFactory", "safe_name", "split_head_tail", "is_na"),
        *("CompactionState", "parse_compaction_message", "read_record_file", "find_task_index"),
    }
    assert not internals & set(compactor.__all__)
    assert compactor.__all__ == sorted(compactor.__all__)
    assert len(compactor.__all__) < 70


def test_compactor_imports_without_optional_sdks() -> None:
    code = (
        "import sys\n"
        "sys.modules['openai'] = None\n"
        "sys.modules['anthropic'] = None\n"
        "sys.modules['opentelemetry'] = None\n"
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


@pytest.mark.parametrize("room", sorted(set(ROOMS) - {"cli"}))
def test_each_room_rule_refuses_a_room_above_it(tmp_path: Path, room: str) -> None:
    above = sorted(set(ROOMS) - ROOMS[room] - {room, "__init__"})
    assert above, f"{room} may import every room: the rule could never fail"
    name = "mod.py" if room != "__init__" and (ROOT / "analytics" / room).is_dir() else room
    module = tmp_path / "analytics" / (room if name == "mod.py" else "") / name
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(f"from analytics.{above[0]} import anything\n", encoding="utf-8")

    problems = analytics_violations(module)

    assert len(problems) == 1 and f"({room})" in problems[0], problems


def test_every_analytics_module_is_in_a_room() -> None:
    rooms = {room_of(path) for path in _modules("analytics")}
    assert rooms <= set(ROOMS), sorted(rooms - set(ROOMS))


COMPACTOR_ROOMS: dict[str, set[str]] = {
    "writing": {"events"},
    "summaries": set(),
    "pipeline": {"summaries", "writing", "events"},
}
"""Which of the compactor's sub-packages each may import (its top-level modules are shared by
all): the pipeline uses the summarisers and the writers, which use neither."""


@pytest.mark.parametrize("room", sorted(COMPACTOR_ROOMS))
def test_the_compactor_rooms_point_one_way(room: str) -> None:
    rooms = {p.name for p in (ROOT / "compactor").iterdir() if (p / "__init__.py").exists()}
    assert set(COMPACTOR_ROOMS) <= rooms
    for path in (ROOT / "compactor" / room).glob("*.py"):
        for module, _names, _lazy in _imports(path):
            parts = module.split(".")
            if parts[0] == "compactor" and len(parts) > 2 and parts[1] != room:
                assert parts[1] in COMPACTOR_ROOMS[room], (
                    f"{path} imports {module}: compactor/{room}/ may use "
                    f"{sorted(COMPACTOR_ROOMS[room]) or 'no other room'}"
                )


def test_the_rooms_form_layers_without_a_cycle() -> None:
    done: set[str] = set()

    def visit(room: str, path: tuple[str, ...]) -> None:
        assert room not in path, f"rooms import each other in a cycle: {' -> '.join(path)}"
        if room not in done:
            for below in ROOMS[room]:
                visit(below, (*path, room))
            done.add(room)

    for room in ROOMS:
        visit(room, ())


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def test_analytics_modules_import_each_other_without_a_cycle() -> None:
    paths = {_module_name(p): p for p in _modules("analytics")}
    graph = {
        name: {m for m, _names, _lazy in _imports(path) if m in paths and m != name}
        for name, path in paths.items()
    }
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        assert state.get(name) != 1, "import cycle: " + " -> ".join([*trail, name])
        state[name] = 1
        for dep in sorted(graph[name]):
            visit(dep, [*trail, name])
        state[name] = 2

    for name in sorted(graph):
        visit(name, [])
