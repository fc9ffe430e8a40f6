"""Where a value goes in one function: into metrics, or into the token layout.

A round-up of lengths summed for a throughput figure, or a maximum over
lengths that sizes a logging grid, decides no sample's layout; DESIGN.md
section 5 wants both left alone. `Sinks` reads one function once, top down,
and gives every expression a *context* (what its value feeds), and every
local a list of the contexts it is used in. `Sinks.metric_only` then
follows a value through locals to say whether it only ever reaches metric
sinks:

* a reduction (`sum`, `len`, `mean`, `.sum()`...), unless its result sizes
  a tensor or a pad;
* a logging or print call (`logger.info`, `wandb.log`, `print`, `json.dumps`,
  `f.write`), an f-string or a `%`/`.format` string;
* a store into a metrics record (`metrics["padded"] = ...`, a key with a
  `/` as trackers spell them: `log["perf/tokens"] = ...`);
* a comparison, an `if`/`assert` test, or an expression statement's
  dropped value.

Anything else (a return, an argument of an unknown call, a tensor size, an
index or slice, a store into a field) may shape the layout, and so does a
tensor that token tensors are stored into or combined with. The analysis is
flow-insensitive and purely syntactic; when in doubt a value is not a
metric, so the rules stay as strict as without it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

import libcst as cst

from layoutcheck.lint.names import Tag
from layoutcheck.lint.nodes import last_name, root_name, string_key

if TYPE_CHECKING:
    from layoutcheck.lint.flow import Value
    from layoutcheck.lint.imports import Imports

__all__ = ["Sinks"]

Context = tuple[object, ...]
SINK: Context = ("sink",)
"""Consumed as a metric, a message or a condition."""
SIZE: Context = ("size",)
"""Sizes a tensor or a pad."""
OTHER: Context = ("other",)
"""Anything that may shape the layout."""
FILL: Context = ("fill",)
"""The target of an element store that puts no tokens in (``grid[i, :n] = 1``)."""


def _bound(name: str) -> Context:
    return ("bound", name)


def _reduced(inner: Context) -> Context:
    return ("reduced", inner)


_REDUCTIONS = frozenset({
    "sum", "len", "math.fsum", "statistics.mean", "statistics.median", "statistics.fmean",
    "numpy.sum", "numpy.mean", "numpy.average", "numpy.median", "numpy.percentile", "numpy.std",
    "numpy.var", "torch.sum", "torch.mean", "torch.median", "torch.std", "torch.var",
})
_REDUCTION_METHODS = frozenset({"sum", "mean", "median", "std", "var", "nansum", "nanmean"})
_MATH = frozenset({"math.log", "math.log2", "math.log10", "numpy.log", "torch.log", "torch.log2"})
_SINK_CALLS = frozenset({
    "print", "log", "info", "debug", "warning", "warn", "error", "critical", "exception",
    "add_scalar", "add_scalars", "add_histogram", "add_text", "add_image", "log_metrics", "log_dict",
    "dumps", "dump", "write", "set_postfix", "set_description", "format", "str", "repr",
    "imshow", "plot", "hist", "savefig",
})
_PASS_CALLS = frozenset({
    "int", "float", "round", "abs", "list", "tuple", "sorted", "reversed", "max", "min",
    "math.ceil", "math.floor", "torch.tensor", "torch.as_tensor", "numpy.array", "numpy.asarray",
})
_PASS_METHODS = frozenset({
    "item", "tolist", "to", "cuda", "cpu", "long", "int", "float", "clone", "detach", "numpy",
    "contiguous", "view", "reshape", "flatten", "squeeze", "unsqueeze", "copy",
})
_CONSTRUCTORS = frozenset({
    "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.arange", "torch.randn",
    "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full",
})
_NEW_METHODS = frozenset({"new_zeros", "new_ones", "new_empty", "new_full"})
_PADS = frozenset({"torch.nn.functional.pad", "numpy.pad"})
_FILL_METHODS = frozenset({"fill_", "zero_", "copy_", "index_fill_", "masked_fill_", "scatter_", "index_put_"})
_ADD_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})
_METRIC_CONTAINER = (
    r"(?:.*_)?(?:log|logs|logger|logging|metric|metrics|stats|statistics|summary|report|records?|scalars|writer)"
    r"|(?:wandb|tb|writer|tracker|tensorboard|mlflow|swanlab)(?:_.*)?"
)
"""Containers and objects that hold metrics: `metrics`, `train_log`, `wandb`, `step_stats`
(not `log_probs`: the last word decides, or a tracker's name the first)."""


@lru_cache(maxsize=1)
def _metric_container() -> re.Pattern[str]:
    return re.compile(_METRIC_CONTAINER, re.IGNORECASE)  # compiled on first use: start-up counts


def is_metric_container(name: str | None) -> bool:
    """Is ``name`` a metrics record or a tracker (`metrics`, `train_log`, `wandb`)?"""
    return name is not None and _metric_container().fullmatch(name) is not None


def _is_text(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))


class Sinks:
    """The contexts of one function's expressions, and the uses of its locals.

    ``body`` is the function (or module) walked; ``classify`` is the flow's
    `layoutcheck.lint.flow.Flow.classify`, used to see token tensors.
    """

    def __init__(self, body: cst.CSTNode, imports: Imports, classify: Callable[[cst.CSTNode], Value]) -> None:
        self.imports = imports
        self.classify = classify
        self.contexts: dict[int, Context] = {}
        self.uses: dict[str, list[Context]] = {}
        self._statements(body)

    # -- questions --

    def metric_only(self, node: cst.CSTNode) -> bool:
        """Does the value of ``node`` only ever reach metric sinks?"""
        return self._metric(self.contexts.get(id(node), OTHER), set())

    def _metric(self, context: Context, seen: set[str]) -> bool:
        kind = context[0]
        if kind in ("sink", "fill"):
            return True
        if kind == "reduced":
            return not self._sizes(context[1], set())  # type: ignore[arg-type]
        if kind == "bound":
            name = context[1]
            if name in seen:
                return True
            seen.add(name)  # type: ignore[arg-type]
            return all(self._metric(use, seen) for use in self.uses.get(name, ()))  # type: ignore[arg-type]
        return False

    def _sizes(self, context: Context, seen: set[str]) -> bool:
        kind = context[0]
        if kind == "size":
            return True
        if kind == "reduced":
            return self._sizes(context[1], seen)  # type: ignore[arg-type]
        if kind == "bound" and context[1] not in seen:
            seen.add(context[1])  # type: ignore[arg-type]
            return any(self._sizes(use, seen) for use in self.uses.get(context[1], ()))  # type: ignore[arg-type]
        return False

    # -- statements --

    def _statements(self, node: cst.CSTNode) -> None:
        if isinstance(node, (cst.Module, cst.IndentedBlock, cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for child in node.body:
                self._statements(child)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._statements(node.body)
        elif isinstance(node, (cst.If, cst.While)):
            self._expr(node.test, SINK)
            self._statements(node.body)
            if node.orelse is not None:
                self._statements(node.orelse)
        elif isinstance(node, cst.Else):
            self._statements(node.body)
        elif isinstance(node, cst.For):
            target = node.target
            self._expr(node.iter, _bound(target.value) if isinstance(target, cst.Name) else OTHER)
            self._statements(node.body)
            if node.orelse is not None:
                self._statements(node.orelse)
        elif isinstance(node, cst.Try):
            self._statements(node.body)
            for part in (*node.handlers, node.orelse, node.finalbody):
                if part is not None:
                    self._statements(part.body)
        elif isinstance(node, cst.With):
            for item in node.items:
                self._expr(item.item, OTHER)
            self._statements(node.body)
        elif isinstance(node, cst.Assign):
            self._assign([t.target for t in node.targets], node.value)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            if node.value is not None:
                self._assign([node.target], node.value)
        elif isinstance(node, (cst.Expr, cst.Del)):
            self._expr(node.value if isinstance(node, cst.Expr) else node.target, SINK)
        elif isinstance(node, cst.Assert):
            self._expr(node.test, SINK)
            if node.msg is not None:
                self._expr(node.msg, SINK)
        elif isinstance(node, cst.Raise):
            if node.exc is not None:
                self._expr(node.exc, SINK)
        elif isinstance(node, cst.Return):
            if node.value is not None:
                self._expr(node.value, OTHER)
        else:
            for child in node.children:
                if isinstance(child, cst.BaseExpression):
                    self._expr(child, OTHER)
                elif isinstance(child, (cst.BaseStatement, cst.BaseSmallStatement, cst.BaseSuite)):
                    self._statements(child)

    def _assign(self, targets: list[cst.BaseExpression], value: cst.BaseExpression) -> None:
        if len(targets) == 1 and isinstance(targets[0], (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
            parts = [e.value for e in targets[0].elements]
            if len(parts) == len(value.elements):
                for part, element in zip(parts, value.elements):
                    self._assign([part], element.value)
                return
        contexts = [self._store(t, value) for t in targets]
        self._expr(value, contexts[0] if len(set(contexts)) == 1 else OTHER)

    def _store(self, target: cst.BaseExpression, value: cst.BaseExpression) -> Context:
        """What storing ``value`` into ``target`` makes of it; records the target's own use."""
        if isinstance(target, cst.Name):
            return _bound(target.value)
        if isinstance(target, cst.Subscript):
            root = root_name(target)
            key = string_key(target)
            for element in target.slice:
                if isinstance(element.slice, cst.Index):
                    self._expr(element.slice.value, OTHER)
                else:
                    for part in (element.slice.lower, element.slice.upper, element.slice.step):
                        if part is not None:
                            self._expr(part, OTHER)
            if is_metric_container(root) or (key is not None and "/" in key):
                return SINK
            if isinstance(target.value, cst.Name):
                # An element store: `grid[i, :n] = 1` fills a scratch tensor; storing
                # tokens into it makes it a token batch.
                tokens = self.classify(value).has(Tag.TOK)
                self._use(target.value.value, OTHER if tokens else FILL)
                return _bound(target.value.value)
        return OTHER

    # -- expressions --

    def _use(self, name: str, context: Context) -> None:
        self.uses.setdefault(name, []).append(context)

    def _each(self, nodes: Iterable[cst.BaseExpression | None], context: Context) -> None:
        for node in nodes:
            if node is not None:
                self._expr(node, context)

    def _expr(self, node: cst.BaseExpression, context: Context) -> None:
        self.contexts[id(node)] = context
        if isinstance(node, cst.Name):
            self._use(node.value, context)
        elif isinstance(node, cst.Call):
            self._call(node, context)
        elif isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Modulo) and _is_text(node.left):
                self._expr(node.right, SINK)  # "%d tokens" % n
                return
            # Arithmetic with a token tensor makes the result one.
            meets = any(self.classify(side).has(Tag.TOK) for side in (node.left, node.right))
            self._each((node.left, node.right), OTHER if meets else context)
        elif isinstance(node, (cst.UnaryOperation, cst.Await)):
            self._expr(node.expression, context)
        elif isinstance(node, cst.BooleanOperation):
            self._each((node.left, node.right), context)
        elif isinstance(node, cst.Comparison):
            self._each((node.left, *(c.comparator for c in node.comparisons)), SINK)
        elif isinstance(node, cst.IfExp):
            self._expr(node.test, SINK)
            self._each((node.body, node.orelse), context)
        elif isinstance(node, cst.Attribute):
            self._expr(node.value, context)
        elif isinstance(node, cst.Subscript):
            self._expr(node.value, context)
            for element in node.slice:
                part = element.slice
                if isinstance(part, cst.Index):
                    self._expr(part.value, OTHER)
                else:
                    self._each((part.lower, part.upper, part.step), OTHER)
        elif isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            self._each((e.value for e in node.elements), context)
        elif isinstance(node, cst.Dict):
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    self._expr(element.key, SINK)
                self._expr(element.value, context)
        elif isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            if isinstance(node, cst.DictComp):
                self._expr(node.key, SINK)
                self._expr(node.value, context)
            else:
                self._expr(node.elt, context)
            comp: cst.CompFor | None = node.for_in
            while comp is not None:
                self._expr(comp.iter, OTHER)
                self._each((i.test for i in comp.ifs), SINK)
                comp = comp.inner_for_in
        elif isinstance(node, cst.FormattedString):
            for part in node.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    self._expr(part.expression, SINK)
        elif isinstance(node, cst.ConcatenatedString):
            self._each((node.left, node.right), SINK)
        elif isinstance(node, cst.NamedExpr):
            self._expr(node.value, OTHER)
        elif isinstance(node, cst.Lambda):
            self._expr(node.body, OTHER)
        else:
            for child in node.children:
                if isinstance(child, cst.BaseExpression):
                    self._expr(child, OTHER)

    def _call(self, node: cst.Call, context: Context) -> None:
        name = self.imports.qualify(node.func) or ""
        tail = last_name(node.func) or ""
        func = node.func
        receiver = func.value if isinstance(func, cst.Attribute) else None
        values = [a.value for a in node.args]
        if name in _MATH or name in _PASS_CALLS:
            self._each(values, context)
        elif name in _REDUCTIONS:
            self._each(values, _reduced(context))
        elif isinstance(func, cst.Name) and tail in _SINK_CALLS:
            self._each(values, SINK)  # print(...), str(...)
        elif receiver is not None and (tail in _SINK_CALLS or is_metric_container(root_name(receiver))):
            self._expr(receiver, SINK)  # logger.info(...), wandb.log(...), "{}".format(...)
            self._each(values, SINK)
        elif name in _CONSTRUCTORS or (receiver is not None and tail in _NEW_METHODS):
            if receiver is not None:
                self._expr(receiver, OTHER)
            filled = tail in ("full", "new_full")
            sizes = values[:1] if filled else values
            self._each(sizes, SIZE)
            self._each(values[len(sizes):], OTHER)
        elif name in _PADS:
            self._each(values[:1], context)
            self._each(values[1:], SIZE)
        elif receiver is not None and tail in _REDUCTION_METHODS:
            self._expr(receiver, _reduced(context))
            self._each(values, OTHER)
        elif receiver is not None and tail in _PASS_METHODS:
            self._expr(receiver, context)
            self._each(values, OTHER)
        elif receiver is not None and tail in _FILL_METHODS:
            tokens = any(self.classify(v).has(Tag.TOK) for v in values)
            self._expr(receiver, OTHER if tokens else FILL)
            self._each(values, OTHER)
        elif receiver is not None and tail in _ADD_METHODS and isinstance(receiver, cst.Name):
            # `padded.append(p)`: the value joins the list; the list's fate is its own.
            self._use(receiver.value, FILL)
            self.contexts[id(receiver)] = FILL
            self._each(values, _bound(receiver.value))
        else:
            if receiver is not None:
                self._expr(receiver, OTHER)
            elif not isinstance(func, cst.Name):
                self._expr(func, OTHER)
            self._each(values, OTHER)
