"""The CLI and the commands it registers import each other one way only: no circle through them.

The graph is read from the source (``ast``: every ``import`` and
``from ... import``, inside functions too, since the CLI imports lazily),
over the modules of the ``layoutcheck`` package; a circle is a strongly
connected component of more than one module.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "layoutcheck"

ONE_WAY = ("layoutcheck.cli", "layoutcheck.argtypes", "layoutcheck.advisor", "layoutcheck.waste")
"""Modules (and packages) that must sit on no circle."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for target in targets:
                # `import a.b.c` imports a.b too; `from a import b` may name a module or a name in a.
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
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


def test_the_graph_reader_finds_a_circle_it_is_shown():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_cli_and_its_commands_sit_on_no_circle():
    graph = import_graph()
    assert "layoutcheck.advisor.options" in graph["layoutcheck.advisor.command"]  # the reader sees imports
    assert "layoutcheck.advisor.command" in graph["layoutcheck.cli"]  # ...inside functions too
    offending = [c for c in circles(graph) if any(m.startswith(ONE_WAY) for m in c)]
    assert offending == []


def test_no_profiling_script_at_the_repository_root():
    assert not (PACKAGE.parent / "prof.py").exists()
