"""Shortcuts of the per-file walk find exactly what the walk they skip would find.

The extraction skips work where what it looks for cannot occur (issue 28's lint speed);
each test here compares a shortcut with the full reading it stands for, on every
fixture and corpus file and on cases written to sit at its edges.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from layoutcheck.model.records import _field, _measured, _window_width, window_partners
from layoutcheck.model.syntax import nodes

ROOT = Path(__file__).resolve().parents[1]
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _every_function(tree: ast.Module) -> dict[str, frozenset[str]]:
    """`window_partners` as it read before its shortcut: every function of the module walked."""
    found: dict[str, set[str]] = {}
    for function in nodes(tree):
        if not isinstance(function, _FUNCTIONS):
            continue
        bound: dict[str, ast.expr] = {}
        for stmt in nodes(function):
            if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
                continue
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                bound[target.id] = stmt.value
                continue
            width = _window_width(target, bound)
            placed = _field(stmt.value)
            if width is None or placed is None:
                continue
            sizes = _measured(width, bound) - {placed}
            if sizes:
                found.setdefault(placed, set()).update(sizes)
    return {field: frozenset(sizes) for field, sizes in found.items()}


EDGES = {
    # The window's end bound in the enclosing function, the store in a nested one: only the
    # outer function's walk sees both.
    "nested": """
        def outer(buf, r, a):
            n = len(r.prompt) + len(r.reply)
            e = a + n
            def inner():
                buf[0, a:e] = r.trace
            inner()
    """,
    # Decorators sit above the `def` line; the store is in the body.
    "decorated": """
        @torch.no_grad()
        @other(
            1,
        )
        async def fill(buf, r, a):
            n = len(r.prompt) + len(r.reply)
            buf[a : a + n] = r["trace"]
    """,
    # Width through one local, end through another, in a method.
    "method": """
        class Filler:
            def fill(self, buf, r, a):
                n = len(r.prompt) + len(r.reply)
                e = a + n
                buf[a:e] = r.trace

            def other(self):
                return 1
    """,
    # A store at module level (no function walks it) beside a function with none.
    "module": """
        n = len(r.prompt) + len(r.reply)
        buf[a : a + n] = r.trace
        def f(x):
            return x[1:2]
    """,
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_window_partners_edges(name: str) -> None:
    tree = ast.parse(textwrap.dedent(EDGES[name]))
    assert window_partners(tree) == _every_function(tree)


def test_window_partners_edges_find_something() -> None:
    """The edge cases are not vacuous: the full reading finds a window partner in each of them but one."""
    found = {name: _every_function(ast.parse(textwrap.dedent(text))) for name, text in EDGES.items()}
    assert found["nested"] == found["decorated"] == found["method"] == {"trace": frozenset({"prompt", "reply"})}
    assert found["module"] == {}


def test_window_partners_on_every_fixture() -> None:
    files = sorted(p for folder in ("fixtures", "tests/trainers") for p in (ROOT / folder).rglob("*.py"))
    assert len(files) > 200
    with_partners = 0
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, ValueError, UnicodeDecodeError):
            continue
        expected = _every_function(tree)
        assert window_partners(tree) == expected, path
        with_partners += bool(expected)
    assert with_partners >= 1  # the fixtures hold windows, so the comparison can fail
