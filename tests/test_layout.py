"""The shape of the code, read from its syntax trees: no import cycle among the project's
modules (imports inside functions count too), no folder of the simulator importing one
above it, and no function longer than 100 lines in simulator/, profiler/ or app/ (the
issue's bound; the model's stages stay under 80)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simulator", "profiler", "app")
MAX_LINES = 100
STAGE_MAX_LINES = 80
LAYERS = {
    f"simulator.{folder}": layer
    for folder, layer in (
        ("inputs", 0),
        ("model", 0),
        ("kernels", 0),
        ("serving", 1),
        ("validation", 1),
        ("planning", 2),
        ("search", 3),
        ("cli", 4),
    )
}
"""The simulator's folders, lowest first. A folder imports only folders of a lower layer (the
three of layer 0 read each other: the model's catalogs, the scenario table's units, the
kernel tables' engine versions); each folder's `__init__` docstring says so in words."""


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports anywhere in its file."""

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found.update(resolve(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(resolve(full) if full in modules else resolve(base))
    found.discard(None)
    found.discard(name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_among_project_modules():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def _folder(module: str) -> str | None:
    return next((f for f in LAYERS if module == f or module.startswith(f + ".")), None)


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for name, deps in sorted(graph.items()):
        here = _folder(name)
        for dep in sorted(deps):
            there = _folder(dep)
            if here is None or there is None or here == there:
                continue
            if LAYERS[there] > LAYERS[here] or (LAYERS[there] == LAYERS[here] != 0):
                out.append(f"{name} -> {dep}")
    return out


def test_no_folder_of_the_simulator_imports_one_above_it():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _layer_violations(graph) == []
    # Only `python -m` reaches the command lines.
    for cli, main in (
        ("simulator.cli", "simulator.__main__"),
        ("profiler.cli", "profiler.__main__"),
    ):
        users = {n for n, deps in graph.items() if cli in {_folder(d) or d for d in deps}}
        assert users - {main} - {n for n in users if n.startswith(cli)} == set(), cli


def test_the_layer_check_finds_an_upward_import():
    graph = {"simulator.model.predict": {"simulator.serving.engine"}}
    assert _layer_violations(graph) == ["simulator.model.predict -> simulator.serving.engine"]
    assert _layer_violations({"simulator.serving.tails": {"simulator.planning.sizer"}}) != []
    assert _layer_violations({"simulator.inputs.io": {"simulator.model.steady"}}) == []


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_each_folder_says_what_it_holds_and_may_import(folder):
    doc = ast.get_docstring(
        ast.parse((ROOT / folder.replace(".", "/") / "__init__.py").read_text())
    )
    assert doc and "May import" in doc, folder


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _long_functions(paths, limit: int) -> list[str]:
    out = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {lines}")
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_over_100_lines(package):
    assert _long_functions(sorted((ROOT / package).rglob("*.py")), MAX_LINES) == []


def test_model_stages_stay_under_80_lines():
    modules = _modules()
    names = ("simulator.model.stages", "simulator.model.step_times", "simulator.model.predict")
    assert _long_functions([modules[name] for name in names], STAGE_MAX_LINES) == []
