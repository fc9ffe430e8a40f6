"""A read-only batched traversal: libcst's visiting order and callbacks, no tree rebuilt.

libcst's `CSTNode.visit` serves transformers too, so even a read-only
visitor makes it rebuild (and re-validate) every node of the tree, only to
throw the copies away ("TODO: provide traversal where children are not
replaced", libcst/_nodes/base.py). Measured on a trainer-shaped tree, that
walk costs as much as the parse itself. Lint rules never change the tree, so
`walk_batched` visits the original nodes directly:

* the same callbacks as `libcst.MetadataWrapper.visit_batched`, in the same
  order: ``visit_<Node>``, then per field ``visit_<Node>_<field>``, the
  field's subtree, ``leave_<Node>_<field>``, and finally ``leave_<Node>``;
* each node type's field order is learnt once from libcst itself (its
  ``_visit_and_replace_children`` run with a recorder that does not descend),
  so it follows libcst rather than a copy of it;
* subtrees of whitespace and punctuation tokens are skipped unless a rule
  has a callback for one of those node types;
* each rule class's callbacks are found once, not per file (libcst's
  ``get_visitors`` costs ~3 ms per rule per file).

The equivalence with libcst's walk is tested on real code (tests/test_lint_walk.py).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

__all__ = ["TRIVIA", "node_parents", "node_positions", "visit", "walk_batched"]

_Fields = tuple[tuple[str, bool], ...]
_ORDER: dict[type[cst.CSTNode], _Fields] = {}
"""Per node type: its fields in libcst's visiting order, and whether libcst calls field hooks on them."""

_HOOKED_WHEN_SET = frozenset({"FormattedStringExpression.format_spec", "TemplatedStringExpression.format_spec"})
"""Fields libcst visits (hooks included) only when they are not None: the one conditional
in its ``_visit_and_replace_children`` methods (libcst 1.x; tests/test_lint_walk.py checks)."""

_NODE, _SEQUENCE, _OTHER = 0, 1, 2
_KIND: dict[type, int] = {}


def _trivia() -> frozenset[type[cst.CSTNode]]:
    """Node types that hold only whitespace, comments or punctuation."""
    bases = (
        cst.BaseParenthesizableWhitespace, cst.TrailingWhitespace, cst.EmptyLine, cst.Newline,
        cst.Comment, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual,
        cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
        cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.BaseBinaryOp, cst.BaseBooleanOp,
        cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp, cst.ImportStar, cst.Asynchronous,
        cst.ParenthesizedWhitespace, cst.SimpleWhitespace,
    )
    # An `__mro__` test, not `issubclass`: libcst's bases are ABCs, and ABC
    # subclass checks over every libcst name cost ~40 ms of start-up.
    wanted = set(bases)
    return frozenset(
        value for value in vars(cst).values()
        if isinstance(value, type) and not wanted.isdisjoint(value.__mro__)
    )


TRIVIA = _trivia()
"""Skipped while no rule names one of them in a callback."""


class _FieldRecorder(cst.CSTVisitor):
    """Records which fields libcst visits on one node, without descending."""

    def __init__(self, parent: cst.CSTNode) -> None:
        super().__init__()
        self.parent = parent
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if node is self.parent:
            self.fields.append(attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


def _fields(node: cst.CSTNode) -> _Fields:
    kind = type(node)
    order = _ORDER.get(kind)
    if order is None:
        recorder = _FieldRecorder(node)
        node._visit_and_replace_children(recorder)  # once per node type
        visited = list(dict.fromkeys(recorder.fields))
        # A field libcst skips when it is None (an f-string's `format_spec`) was
        # not seen on this instance; it still holds children on others, and is
        # last in libcst's order. Non-node fields (strings) are harmless here.
        rest = [f.name for f in dataclasses.fields(kind) if f.name not in visited]
        order = tuple((name, True) for name in visited) + tuple(
            (name, f"{kind.__name__}.{name}" in _HOOKED_WHEN_SET) for name in rest
        )
        _ORDER[kind] = order
    return order


def _kind(value_type: type) -> int:
    kind = _KIND.get(value_type)
    if kind is None:
        # The MRO, not issubclass: CSTNode is an ABC, and an ABC answers "no"
        # (str, None, sentinels) by asking each of its ~250 node classes in
        # turn, about 4 ms per process.
        if cst.CSTNode in value_type.__mro__:
            kind = _NODE
        elif value_type in (list, tuple):
            kind = _SEQUENCE
        else:
            kind = _OTHER
        _KIND[value_type] = kind
    return kind


_Callbacks = list[Callable[[cst.CSTNode], None]]
_CALLBACK_NAMES: dict[type, tuple[str, ...]] = {}


def _callbacks(visitor: cst.BatchableCSTVisitor) -> dict[str, Callable[[cst.CSTNode], None]]:
    """``visitor.get_visitors()``, with the method names found once per class.

    libcst's version runs `inspect.getmembers` over ~1,600 attributes (a stub
    for every node type) per instance: about 3 ms per rule per file, more than
    most rules cost to run.
    """
    kind = type(visitor)
    if kind.get_visitors is not cst.BatchableCSTVisitor.get_visitors:
        return dict(visitor.get_visitors())  # a visitor with its own idea: respect it
    names = _CALLBACK_NAMES.get(kind)
    if names is None:
        # Only classes outside libcst can define callbacks: libcst's own are the
        # ~1,600 no-op stubs. Then the same test as libcst's: a function whose
        # own name is a callback name and that is not a no-op stub.
        candidates = {
            name for klass in kind.__mro__ if not klass.__module__.startswith("libcst")
            for name in vars(klass) if name.startswith(("visit_", "leave_"))
        }
        names = tuple(sorted(
            name for name in candidates
            if inspect.isfunction(function := getattr(kind, name))
            and function.__name__.startswith(("visit_", "leave_"))
            and not getattr(function, "_is_no_op", False)
        ))
        _CALLBACK_NAMES[kind] = names
    return {name: getattr(visitor, name) for name in names}


def walk_batched(wrapper: MetadataWrapper, visitors: Sequence[cst.BatchableCSTVisitor]) -> None:
    """Run ``visitors`` over ``wrapper.module`` in one read-only pass (see the module docs).

    Resolves the metadata the visitors declare first, as
    `MetadataWrapper.visit_batched` does.
    """
    methods: dict[str, _Callbacks] = {}
    for visitor in visitors:
        for name, function in _callbacks(visitor).items():
            methods.setdefault(name, []).append(function)
    named = {name.split("_", 2)[1] for name in methods}
    skip = frozenset() if any(t.__name__ in named for t in TRIVIA) else TRIVIA
    plans: dict[type, tuple[_Callbacks | None, _Callbacks | None, tuple]] = {}

    def plan(node: cst.CSTNode) -> tuple[_Callbacks | None, _Callbacks | None, tuple]:
        name = type(node).__name__
        fields = tuple(
            (field, methods.get(f"visit_{name}_{field}") if hooked else None,
             methods.get(f"leave_{name}_{field}") if hooked else None,
             f"{name}.{field}" in _HOOKED_WHEN_SET)
            for field, hooked in _fields(node)
        )
        made = (methods.get(f"visit_{name}"), methods.get(f"leave_{name}"), fields)
        plans[type(node)] = made
        return made

    def visit(node: cst.CSTNode) -> None:
        visits, leaves, fields = plans.get(type(node)) or plan(node)
        if visits:
            for function in visits:
                function(node)
        for field, field_visits, field_leaves, when_set in fields:
            value = getattr(node, field)
            if when_set and value is None:
                continue
            if field_visits:
                for function in field_visits:
                    function(node)
            kind = _KIND.get(type(value))
            if kind is None:
                kind = _kind(type(value))
            if kind == _NODE:
                if type(value) not in skip:
                    visit(value)
            elif kind == _SEQUENCE:
                for item in value:
                    if type(item) not in skip and _kind(type(item)) == _NODE:
                        visit(item)
            if field_leaves:
                for function in field_leaves:
                    function(node)
        if leaves:
            for function in leaves:
                function(node)

    with ExitStack() as stack:
        for visitor in visitors:
            stack.enter_context(visitor.resolve(wrapper))
        visit(wrapper.module)


def node_positions(wrapper: MetadataWrapper) -> Mapping[cst.CSTNode, CodeRange]:
    """Every node's range: one code-generation pass.

    ``wrapper.resolve(PositionProvider)`` would also walk the whole tree once
    more for batchable providers, even when there are none (libcst 1.x), which
    is about 40% of its cost; the provider's own code generation is all
    positions need, and it runs here with a leaner recorder (`_Positions`).
    """
    provider = PositionProvider()
    if _Positions is None or not hasattr(provider, "_computed"):  # pragma: no cover - another libcst
        return wrapper.resolve(PositionProvider)
    provider._computed = {}
    module = wrapper.module
    state = _Positions(default_indent=module.default_indent, default_newline=module.default_newline,
                       provider=provider)
    module._codegen(state)
    return provider._computed


def _positions_state() -> type | None:
    """libcst's `PositionProvidingCodegenState` with the same positions recorded at less cost: a
    position kept as two ints until a range is made of it, a token without a line break moving
    the column alone, and a plain context manager for a node's syntactic range (libcst's is a
    generator's, about a third of the pass). The ranges are libcst's own, compared on real code
    (tests/test_lint_walk.py)."""
    try:
        from libcst._position import CodePosition
        from libcst.metadata.position_provider import PositionProvidingCodegenState
    except ImportError:  # pragma: no cover - another libcst: its own provider
        return None

    class _Syntactic:
        __slots__ = ("column", "end_node", "line", "node", "start_node", "state")

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> bool:
            state = self.state
            computed = state.provider._computed
            start = computed[self.start_node].start if self.start_node is not None \
                else CodePosition(self.line, self.column)
            end = computed[self.end_node].end if self.end_node is not None else CodePosition(state.line, state.column)
            computed[self.node] = CodeRange(start, end)
            return False

    class Positions(PositionProvidingCodegenState):  # type: ignore[misc]
        def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                      end_node: cst.CSTNode | None = None) -> _Syntactic:
            recorder = _Syntactic()
            recorder.state, recorder.node, recorder.start_node, recorder.end_node = self, node, start_node, end_node
            recorder.line, recorder.column = self.line, self.column
            return recorder

        def _update_position(self, value: str) -> None:
            if "\n" in value or "\r" in value:
                super()._update_position(value)
            else:
                self.column += len(value)

        def before_codegen(self, node: cst.CSTNode) -> None:
            self._stack.append((self.line, self.column))  # type: ignore[arg-type]

        def after_codegen(self, node: cst.CSTNode) -> None:
            line, column = self._stack.pop()  # type: ignore[misc]
            computed = self.provider._computed
            if node not in computed:
                computed[node] = CodeRange(CodePosition(line, column), CodePosition(self.line, self.column))

    return Positions


_Positions = _positions_state()


def node_parents(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    """Every node's parent, by the fields `walk_batched` reads.

    ``node.children`` per node would give the same map at about 4x the cost:
    libcst collects a node's children by rebuilding the node with a visitor.
    The equivalence is tested on real code (tests/test_lint_walk.py).
    """
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for field, _hooked in _ORDER.get(type(node)) or _fields(node):
            value = getattr(node, field)
            kind = _KIND.get(type(value))
            if kind is None:
                kind = _kind(type(value))
            if kind == _NODE:
                parents[value] = node
                stack.append(value)
            elif kind == _SEQUENCE:
                for item in value:
                    if _kind(type(item)) == _NODE:
                        parents[item] = node
                        stack.append(item)
    return parents


_TRIVIA_NAMES = frozenset(t.__name__ for t in TRIVIA)
_SKIPS: dict[type, frozenset[type[cst.CSTNode]]] = {}


def _skipped(kind: type) -> frozenset[type[cst.CSTNode]]:
    """What `visit` may leave out for a visitor class: the trivia, unless the class can see them
    (its own ``on_visit``/``on_leave``, or a callback named for a trivia type)."""
    skip = _SKIPS.get(kind)
    if skip is None:
        own = kind.on_visit is not cst.CSTVisitor.on_visit or kind.on_leave is not cst.CSTVisitor.on_leave
        named = {
            name.split("_", 2)[1] for klass in kind.__mro__ if not klass.__module__.startswith("libcst")
            for name in vars(klass) if name.startswith(("visit_", "leave_"))
        }
        skip = frozenset() if own or not named.isdisjoint(_TRIVIA_NAMES) else TRIVIA
        _SKIPS[kind] = skip
    return skip


def visit(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a read-only visitor, without rebuilding a node.

    The same ``on_visit`` (``visit_<Node>``; False: skip the children) and
    ``on_leave`` (``leave_<Node>``) calls on the same nodes in libcst's order;
    per-field hooks (``visit_<Node>_<field>``) are not called, so a visitor
    that defines one must use ``node.visit``. libcst's ``visit`` rebuilds every
    node of the subtree even for a visitor that changes nothing (see the
    module docs). The equivalence is tested on real code (tests/test_lint_walk.py).
    """
    skip = _skipped(type(visitor))
    on_visit, on_leave = visitor.on_visit, visitor.on_leave

    def go(node: cst.CSTNode) -> None:
        if on_visit(node):
            for field, _hooked in _ORDER.get(type(node)) or _fields(node):
                value = getattr(node, field)
                kind = _KIND.get(type(value))
                if kind is None:
                    kind = _kind(type(value))
                if kind == _NODE:
                    if type(value) not in skip:
                        go(value)
                elif kind == _SEQUENCE:
                    for item in value:
                        if type(item) not in skip and _kind(type(item)) == _NODE:
                            go(item)
        on_leave(node)

    go(node)
