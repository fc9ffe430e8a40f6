"""The import graph of the layoutcheck package: no circles, and no import of another module's private names.

The graph is read from the source with `ast` (nothing is imported): every
``import`` and ``from ... import`` of a layoutcheck module is an edge, wherever
it is written (at the top, inside a function, under ``TYPE_CHECKING``), since
a lazy import hides a circle from the interpreter but not from a reader.
``from package import name`` is an edge to the submodule ``package.name`` when
there is one (``from layoutcheck import geometry`` imports
``layoutcheck.geometry``), else to ``package``. The package ``__init__`` files
that importing a submodule runs first are not edges: every import of a
submodule runs them, so they would make every re-export a circle.

The subpackages of ``layoutcheck.runtime`` are held to the same rule taken
as one node each, so their layers stay layers.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"layoutcheck": ROOT / "layoutcheck", "layoutcheck.rules": ROOT / "rules"}
"""Where each package's source lives (pyproject's ``package-dir``: the rules ship as ``layoutcheck.rules``)."""

@dataclass(frozen=True)
class Import:
    """One import statement's target, as the graph sees it."""

    target: str
    line: int
    names: tuple[str, ...]
    """The names taken from ``target`` by ``from target import ...`` (empty for ``import target``)."""


def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__.py``)."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    """The layoutcheck imports anywhere in ``module`` (relative imports resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(_owner(alias.name, modules), node.lineno, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:
                    found.append(Import(submodule, node.lineno, ()))
                else:
                    found.append(Import(_owner(base, modules), node.lineno, (alias.name,)))
    return [i for i in found if i.target and i.target != module]


def _owner(dotted: str, modules: dict[str, Path]) -> str:
    # The module a dotted import loads: the longest prefix that is one of ours ("" for another package).
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    return dotted


def import_graph() -> dict[str, dict[str, int]]:
    """Module -> the modules it imports, each with the line of its first import."""
    modules = module_files()
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        for imp in imports_of(module, path, modules):
            edges.setdefault(imp.target, imp.line)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def shortest_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest circle through the component's first module, as ``[a, b, ..., a]``."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if child in members and child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"no circle through {start} in {component}")  # a component always has one


def describe_cycle(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    """``a (line 3) -> b (line 40) -> a``: each arrow with the line of the import in the module it leaves."""
    steps = [f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
    return " -> ".join([*steps, cycle[-1]])


def test_the_package_is_found():
    modules = module_files()
    assert {"layoutcheck", "layoutcheck.runtime", "layoutcheck.runtime.checker.layout_checker",
            "layoutcheck.rules"} <= set(modules)
    assert len(modules) > 100


def test_the_import_graph_has_no_cycles():
    graph = import_graph()
    cycles = strongly_connected(graph)
    message = "\n".join(
        f"import cycle: {describe_cycle(graph, shortest_cycle(graph, c))}\n  (its modules: {', '.join(c)})"
        for c in cycles
    )
    assert not cycles, message + "\nMove what both sides need into a module below them; a lazy import does not count."


def test_the_runtime_subpackages_depend_on_each_other_one_way():
    # One level up from the modules: each subpackage of layoutcheck.runtime (contract, reporting, checker, ...)
    # taken as one node, so that the layers a reader sees in runtime/__init__ stay layers.
    def subpackage(module: str) -> str:
        return ".".join(module.split(".")[:3])

    graph: dict[str, dict[str, int]] = {}
    for module, edges in import_graph().items():
        if module.startswith("layoutcheck.runtime."):
            node = graph.setdefault(subpackage(module), {})
            for target in edges:
                if target.startswith("layoutcheck.runtime.") and subpackage(target) != subpackage(module):
                    node.setdefault(subpackage(target), edges[target])
    assert len(graph) >= 7, sorted(graph)
    for node in graph.values():
        for target in node:
            graph.setdefault(target, {})
    cycles = strongly_connected(graph)
    assert not cycles, "\n".join(" -> ".join(shortest_cycle(graph, c)) for c in cycles)


def test_no_module_imports_another_modules_private_names():
    modules = module_files()
    found = []
    for module, path in modules.items():
        for imp in imports_of(module, path, modules):
            private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
            if private:
                found.append(f"{path.relative_to(ROOT)}:{imp.line}: imports {', '.join(private)} from {imp.target}")
    assert not found, "private names imported across modules (make the name public, or move the code):\n" + "\n".join(found)


def test_the_model_imports_nothing_from_the_linter():
    # The analysis (layoutcheck.model) is below the tool around it (layoutcheck.lint: discovery, cache, runner,
    # rule base): the linter reads the model, the model never reads the linter, so a reader (or another front end)
    # can take the model alone. What both need (the settings the model reads, glob matching) lives in the model
    # or in a top-level module.
    modules = module_files()
    found = [
        f"{path.relative_to(ROOT)}:{imp.line}: imports {imp.target}"
        for module, path in modules.items() if module == "layoutcheck.model" or module.startswith("layoutcheck.model.")
        for imp in imports_of(module, path, modules)
        if imp.target == "layoutcheck.lint" or imp.target.startswith("layoutcheck.lint.")
    ]
    assert not found, "layoutcheck.model imports from layoutcheck.lint (move what it needs below both):\n" + "\n".join(
        found
    )


# --- the checks themselves, on small graphs -------------------------------------------------------


def test_a_cycle_is_named_with_its_modules_and_lines():
    graph = {"a": {"b": 3}, "b": {"c": 7}, "c": {"a": 9, "d": 1}, "d": {}}
    (component,) = strongly_connected(graph)
    assert component == ["a", "b", "c"]
    assert describe_cycle(graph, shortest_cycle(graph, component)) == "a (line 3) -> b (line 7) -> c (line 9) -> a"


def test_the_shortest_cycle_is_reported():
    graph = {"a": {"b": 1, "c": 2}, "b": {"c": 3}, "c": {"a": 4}}
    assert shortest_cycle(graph, ["a", "b", "c"]) == ["a", "c", "a"]


def test_a_graph_without_cycles_has_no_component():
    assert strongly_connected({"a": {"b": 1}, "b": {"c": 1}, "c": {}}) == []


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    modules = {}
    for name, text in files.items():
        path = tmp_path / (name.replace(".", "/") + ("/__init__.py" if name == "pkg" else ".py"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        modules[name] = path
    return modules


@pytest.mark.parametrize(
    ("source", "targets"),
    [
        ("from pkg import b\n", {"pkg.b"}),  # a submodule, not the package
        ("from pkg import helper\n", {"pkg"}),  # a name of the package
        ("from . import b\nfrom .b import x\n", {"pkg.b"}),
        ("import pkg.b.missing\n", {"pkg.b"}),
        ("def f():\n    import pkg.b\n", {"pkg.b"}),  # inside a function
        ("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from pkg.b import X\n", {"pkg.b"}),
        ("import os\nfrom collections import abc\n", set()),
    ],
)
def test_every_kind_of_import_is_an_edge(tmp_path, source, targets):
    modules = _package(tmp_path, {"pkg": "", "pkg.a": source, "pkg.b": ""})
    assert {i.target for i in imports_of("pkg.a", modules["pkg.a"], modules)} == targets


def test_the_names_taken_from_a_module_are_kept_for_the_private_name_check(tmp_path):
    modules = _package(tmp_path, {"pkg": "", "pkg.a": "from pkg.b import _helper, public\n", "pkg.b": ""})
    assert imports_of("pkg.a", modules["pkg.a"], modules) == [
        Import("pkg.b", 1, ("_helper",)), Import("pkg.b", 1, ("public",))
    ]
