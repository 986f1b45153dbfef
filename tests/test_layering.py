"""Module boundaries: the planner core and the CLI never import torch, streamlit or plotly; planner/'s import
graph has no loops, points down only (core < importers < engines < perf, capacity < serving < sim, fit < plan
< cli) and stays shallow; conversion literals live only in planner/units.py."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "torch_npu", "streamlit", "plotly")
PLANNER = ROOT / "planner"


def module_name(path: Path) -> str:
    """planner/perf/roofline.py -> planner.perf.roofline; a package's __init__.py -> the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PLANNER.rglob("*.py"))}
CORE_MODULES = sorted(
    name.removeprefix("planner.")
    for name in MODULES
    if name != "planner" and not name.startswith("planner.cli") and not name.endswith("__init__")
)


def imported_modules(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return set(out.stdout.split())


def test_cli_start_imports_nothing_heavy() -> None:
    loaded = imported_modules("import planner.cli")
    assert not [m for m in HEAVY if m in loaded]


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_only_allowed(module: str) -> None:
    loaded = imported_modules(f"import planner.{module}")
    forbidden = [m for m in (*HEAVY, "typer", "rich") if m in loaded]
    assert forbidden == [], f"planner.{module} pulls in {forbidden}"


def test_mission_command_imports_nothing_heavy() -> None:
    code = (
        "import sys\nfrom planner.cli import app\nsys.argv=['kvplan','--model','qwen3-27b','--ctx','32k',"
        "'--dtype','fp8']\ntry:\n    app()\nexcept SystemExit:\n    pass"
    )
    loaded = imported_modules(code)
    assert not [m for m in HEAVY if m in loaded]


# Unit conversions (GiB, GB, TFLOP, ms) belong in units.py; small epsilons such as 1e-6 are not conversions.
CONVERSION_LITERAL = re.compile(
    r"(1024\s*\*\*|2\s*\*\*\s*(20|30|40)\b|\b1e9\b|\b1e12\b|\b10\s*\*\*\s*(9|12)\b|[*/]\s*1000\b)"
)


def test_conversion_literals_only_in_units() -> None:
    offenders = []
    for path in PLANNER.rglob("*.py"):
        if path == PLANNER / "units.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if CONVERSION_LITERAL.search(line.split("#")[0]) and '"""' not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


# ---- the import graph of planner/, from the source (every import counts: top-level, inside functions, under
# TYPE_CHECKING), so a deferred import cannot hide a loop or an upward edge.

# Architecture layers, lowest first. A module belongs to the first prefix it starts with; an import may only
# go to a strictly lower layer or stay inside its own package (core modules, rank 0, form one DAG). Units of
# one rank may not import each other: perf and capacity, sim and fit. The engines sit below capacity: the
# recommendation asks the registry, an engine's room never asks the recommendation.
RANKS = {
    "planner.cli": 7,
    "planner.plan": 6,  # composes the memory plan, the step model and the serving analytics
    "planner.sim": 5,  # the serving simulator runs on the perf step model
    "planner.fit": 5,  # the fit times rows through the closed loop
    "planner.serving": 4,
    "planner.perf": 3,
    "planner.capacity": 3,  # the memory plan and the one batch cap, through the engine registry
    "planner.inputs": 3,  # flags and widgets -> Deployment, with the engine's own defaults (registry)
    "planner.engines": 2,
    "planner.importers": 1,
    "planner": 0,
}
MAX_LAYERS = 9


def package_of(module: str) -> str:
    """The architecture unit of a module: its sub-package (planner.perf, ...) or, in the core, itself."""
    for prefix in RANKS:
        if prefix != "planner" and (module == prefix or module.startswith(prefix + ".")):
            return prefix
    return module


def rank_of(module: str) -> int:
    """RANKS of the module's sub-package (0 for the core)."""
    return RANKS.get(package_of(module), 0)


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(imported planner module, line) for every import statement in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found += [(n if n in MODULES else node.module, node.lineno) for n in names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name in MODULES]


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """planner module -> the planner modules it imports (a package's own __init__ excluded)."""
    return {
        name: {
            target for target, _ in imports_of(path) if target != name and not name.startswith(target + ".")
        }
        for name, path in MODULES.items()
    }


def find_loop(graph: dict[str, set[str]]) -> list[str]:
    """One import loop as a module path, or [] (depth-first search with colours)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (loop := visit(nxt)):
                return loop
        state[node] = 2
        stack.pop()
        return []

    for start in sorted(graph):
        if start not in state and (loop := visit(start)):
            return loop
    return []


def layer_count(graph: dict[str, set[str]]) -> int:
    """Layers of a DAG: 1 + the longest import chain (a module with no imports is layer 0)."""

    @functools.cache
    def depth(node: str) -> int:
        return 1 + max((depth(n) for n in graph.get(node, ())), default=-1)

    return 1 + max(depth(n) for n in graph)


def test_no_import_loops() -> None:
    assert find_loop(import_graph()) == []


def test_imports_point_down() -> None:
    upward = [
        f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}"
        for name, path in MODULES.items()
        for target, line in imports_of(path)
        if rank_of(target) > rank_of(name)
        or (rank_of(target) == rank_of(name) > 0 and package_of(target) != package_of(name))
    ]
    assert upward == []


def test_layers_are_few() -> None:
    """The graph of architecture units (core modules one by one, each sub-package as one) stays shallow."""
    units: dict[str, set[str]] = {}
    for name, targets in import_graph().items():
        units.setdefault(package_of(name), set()).update(
            package_of(t) for t in targets if package_of(t) != package_of(name)
        )
    assert find_loop(units) == []
    assert layer_count(units) <= MAX_LAYERS


def test_deferred_planner_imports_only_in_the_cli() -> None:
    """Only the CLI defers imports (for start-up time); everywhere else dependencies are at the top."""
    deferred = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        top = {id(node) for node in tree.body}
        top |= {id(n) for node in tree.body if isinstance(node, ast.If) for n in node.body}  # TYPE_CHECKING
        for node in ast.walk(tree):
            lazy = isinstance(node, ast.ImportFrom | ast.Import) and id(node) not in top
            if lazy and not name.startswith("planner.cli") and imports_of_node(node):
                deferred.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert deferred == []


def imports_of_node(node: ast.Import | ast.ImportFrom) -> list[tuple[str, int]]:
    """The planner modules one import statement names."""
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        return [(base, node.lineno)] if base.split(".")[0] == "planner" else []
    return [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "planner"]


def test_graph_sees_the_whole_planner() -> None:
    """The graph helpers find real edges (guards against a parser that silently sees nothing)."""
    graph = import_graph()
    assert "planner.memory" in graph["planner.capacity"]
    assert "planner.perf.roofline" in graph["planner.serving.performance"]
    assert find_loop({"a": {"b"}, "b": {"a"}}) in (["a", "b", "a"], ["b", "a", "b"])
    assert layer_count({"a": {"b"}, "b": set()}) == 2


# Files on the longest import chain of planner/, every file its own node and every import counted (the
# graph above): issue 24's bound. The longest chains run cli -> command -> [cli helper] -> plan, sim,
# serving or fit (one or two files) -> perf/roofline or capacity -> engines/registry -> engine room ->
# engines/common -> memory -> params -> schema -> units; the step model and the engine registry sit side
# by side (perf takes the engine's kernel facts as a value), and leave-one-model-out takes its refit as one.
MAX_IMPORT_CHAIN_FILES = 12


def longest_import_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest chain of imports in a DAG, as the module names along it."""

    @functools.cache
    def chain(node: str) -> tuple[str, ...]:
        tails = [chain(n) for n in sorted(graph.get(node, ()))]
        return (node, *max(tails, key=len, default=()))

    return list(max((chain(n) for n in sorted(graph)), key=len))


def test_longest_import_chain_is_bounded() -> None:
    longest = longest_import_chain(import_graph())
    assert len(longest) <= MAX_IMPORT_CHAIN_FILES, " -> ".join(longest)


def test_longest_import_chain_counts_files() -> None:
    graph = {"a": {"b", "c"}, "b": {"d"}, "c": set(), "d": set()}
    assert longest_import_chain(graph) == ["a", "b", "d"]
