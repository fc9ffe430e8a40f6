"""The read-only walk makes exactly libcst's callbacks, in libcst's order."""

from __future__ import annotations

import dataclasses
import inspect
import json
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from layoutcheck.lint.walk import (
    TRIVIA,
    node_parents,
    node_positions,
    visit,
    walk_batched,
)

ROOT = Path(__file__).resolve().parents[1]

EVERY_SHAPE = textwrap.dedent('''
    """Module doc."""
    from __future__ import annotations
    import os.path as osp, sys
    from .pkg import (a as b, c)
    from x import *

    @decorator(arg=1)
    @other
    async def f(a, /, b: int = 2, *args, c, d=3, **kw) -> "list[int]":
        global g
        nonlocal_x = lambda y, *z, **w: (y, *z)
        async with ctx() as (p, q), other():
            async for i in aiter():
                await thing
        try:
            pass
        except* ValueError as e:
            raise RuntimeError("x") from e
        finally:
            del a[0], b.c
        return [x async for x in y if x] or {k: v for k, v in d.items()} or {s for s in t}

    class C(Base, metaclass=M):
        x: int = 1
        def m(self): yield from (i for i in range(3)); return
    match command:
        case [Point(x=0, y=0), *rest] | {"k": v, **others} if guard:
            pass
        case str() | None as name:
            pass
        case _:
            pass
    value = f"{name!r:>{width}} {x=} {y:.{p}f} {{literal}}" + "implicit" "concat"; raw = rb"raw" b"bytes"
    a[1:2, ::3, ...] = b if c else d
    n = (m := 10) ** -2 // 3 @ M % 4 << 1 >> 2 & 3 | 4 ^ 5
    assert not a < b <= c != d is not e in f not in g, "msg"
    a += 1; b -= 2; c *= 3
    while x:
        break
    else:
        continue_ = ~x
    if a: pass
    elif b: pass
    else: pass
    print(*args, sep="", **kw)  # a comment
''')


def _recorder(log_name: str, *key: str):
    def record(self, node):
        self.log.append((*key, id(node)))

    record.__name__ = log_name  # libcst finds callbacks by their function's name
    return record


def _logger(types: list[type], with_fields: bool) -> type[cst.BatchableCSTVisitor]:
    namespace: dict[str, object] = {}
    for kind in types:
        name = kind.__name__
        for event in ("visit", "leave"):
            namespace[f"{event}_{name}"] = _recorder(f"{event}_{name}", event, name)
            if with_fields:
                for field in dataclasses.fields(kind):
                    callback = f"{event}_{name}_{field.name}"
                    namespace[callback] = _recorder(callback, event, name, field.name)

    def __init__(self):
        cst.BatchableCSTVisitor.__init__(self)
        self.log = []

    namespace["__init__"] = __init__
    return type("Logger", (cst.BatchableCSTVisitor,), namespace)


NODE_TYPES = [t for t in vars(cst).values()
              if isinstance(t, type) and issubclass(t, cst.CSTNode) and not inspect.isabstract(t)]


def _sources() -> list[tuple[str, str]]:
    files = [*sorted((ROOT / "layoutcheck" / "lint").glob("*.py"))[:6], Path(json.__file__), Path(textwrap.__file__)]
    return [("every-shape", EVERY_SHAPE)] + [(f.name, f.read_text()) for f in files]


@pytest.mark.parametrize(("types", "with_fields"), [
    (NODE_TYPES, True),  # trivia named: nothing skipped, every callback compared
    ([t for t in NODE_TYPES if t not in TRIVIA], True),  # trivia skipped
    ([cst.Call, cst.Name, cst.FunctionDef, cst.If], False),  # what rules typically ask for
])
def test_same_callbacks_in_the_same_order_as_libcst(types, with_fields):
    logger = _logger(types, with_fields)
    total = 0
    for name, source in _sources():
        wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
        theirs, ours = logger(), logger()
        wrapper.visit_batched([theirs])
        walk_batched(wrapper, [ours])
        assert ours.log == theirs.log, name
        total += len(ours.log)
    assert total > 1000


def test_metadata_declared_by_a_visitor_is_resolved():
    class WantsPositions(cst.BatchableCSTVisitor):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self):
            super().__init__()
            self.lines = []

        def visit_Name(self, node):
            self.lines.append(self.get_metadata(PositionProvider, node).start.line)

    visitor = WantsPositions()
    walk_batched(MetadataWrapper(cst.parse_module("a\nb = c\n"), unsafe_skip_copy=True), [visitor])
    assert visitor.lines == [1, 2, 2]


def test_the_tree_is_not_rebuilt():
    module = cst.parse_module("x = f(y)\n")
    seen = []

    class Collect(cst.BatchableCSTVisitor):
        def visit_Name(self, node):
            seen.append(node)

    walk_batched(MetadataWrapper(module, unsafe_skip_copy=True), [Collect()])
    call = module.body[0].body[0].value
    assert seen[1] is call.func and seen[2] is call.args[0].value


def test_field_order_learnt_from_an_instance_missing_an_optional_field(monkeypatch):
    # The first f-string expression has no format spec; libcst skips that field's
    # hooks when it is None, and the learnt order must still visit it on the next.
    from layoutcheck.lint import walk

    monkeypatch.setattr(walk, "_ORDER", {})
    logger = _logger(NODE_TYPES, True)
    wrapper = MetadataWrapper(cst.parse_module('a = f"{x}"\nb = f"{y:>{width}}"\n'), unsafe_skip_copy=True)
    theirs, ours = logger(), logger()
    wrapper.visit_batched([theirs])
    walk_batched(wrapper, [ours])
    assert ours.log == theirs.log
    assert ("visit", "FormattedStringExpression", "format_spec") in {event[:3] for event in ours.log}


@pytest.mark.parametrize(("name", "source"), _sources(), ids=[name for name, _ in _sources()])
def test_parents_are_what_libcst_children_give(name, source):
    module = cst.parse_module(source)
    expected: dict[int, int] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in node.children:
            expected[id(child)] = id(node)
            stack.append(child)
    got = {id(child): id(parent) for child, parent in node_parents(module).items()}
    assert got == expected


def _plain_logger(types: list[type], pruned: type) -> type[cst.CSTVisitor]:
    """A `CSTVisitor` logging ``visit_``/``leave_`` of ``types``; ``visit_`` of ``pruned`` skips its children."""
    namespace: dict[str, object] = {}
    for kind in types:
        name = kind.__name__
        for event in ("visit", "leave"):
            def record(self, node, event=event, name=name):
                self.log.append((event, name, id(node)))
                return False if event == "visit" and name == pruned.__name__ else None

            record.__name__ = f"{event}_{name}"
            namespace[record.__name__] = record

    def __init__(self):
        cst.CSTVisitor.__init__(self)
        self.log = []

    namespace["__init__"] = __init__
    return type("PlainLogger", (cst.CSTVisitor,), namespace)


class _EveryNode(cst.CSTVisitor):
    """Sees every node through ``on_visit``/``on_leave``: trivia included, nothing skipped."""

    def __init__(self):
        super().__init__()
        self.log = []

    def on_visit(self, node):
        self.log.append(("visit", type(node).__name__, id(node)))
        return not isinstance(node, cst.Lambda)

    def on_leave(self, node):
        self.log.append(("leave", type(node).__name__, id(node)))


@pytest.mark.parametrize(("name", "source"), _sources(), ids=[name for name, _ in _sources()])
def test_read_only_visit_is_libcst_visit(name, source):
    """`visit` makes libcst's ``node.visit`` calls, on the same nodes, in the same order: on whole
    modules and on a function alone, with children pruned by ``visit_`` returning False."""
    module = cst.parse_module(source)
    functions = [n for n in node_parents(module) if isinstance(n, cst.FunctionDef)]
    roots = [module, *functions[:3]]
    plain = [t for t in NODE_TYPES if t not in TRIVIA]
    for root in roots:
        for make in (lambda: _plain_logger(plain, cst.Lambda)(), lambda: _plain_logger(plain, cst.Call)(),
                     _EveryNode):
            theirs, ours = make(), make()
            root.visit(theirs)
            visit(root, ours)
            assert ours.log == theirs.log
            assert ours.log


@pytest.mark.parametrize(("name", "source"), _sources(), ids=[name for name, _ in _sources()])
def test_positions_are_libcsts(name, source):
    """`node_positions`'s lean recorder gives every node libcst's own `PositionProvider` range."""
    module = cst.parse_module(source)
    theirs = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ours = node_positions(MetadataWrapper(module, unsafe_skip_copy=True))
    assert dict(ours) == dict(theirs)
    assert ours
