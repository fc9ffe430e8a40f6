"""Where a value goes in one function: into metrics, out of the function, or nowhere.

A round-up of lengths summed for a throughput figure, or a maximum over
lengths that sizes a logging grid, decides no sample's layout; docs/development.md#what-the-linter-avoids
wants both left alone. A pad whose value the function returns (or
stores into a field, or uses to size or pad what it returns) is a decision
its callers read. `Sinks` reads one function once, top down, and gives
every expression a *context* (what its value feeds) and every local the
contexts it is used in; `Sinks.fate` follows a value through locals:

* ``metric``: it only reaches metric sinks: a reduction (`sum`, `len`,
  `mean`...) unless its result sizes a tensor, a logging or print call, an
  f-string or a ``%``/``.format`` string, a store into a metrics record
  (``metrics["padded"] = ...``, a key with a ``/``), a comparison, an
  ``if``/``assert`` test, or an expression statement's dropped value;
* ``escapes``: it is returned, yielded, stored into a field
  (``batch["tokens"] = ...``, ``self.pad = ...``), passed to a call whose
  result is one of those, or sizes or pads a tensor that is;
* ``local``: anything else (used for a kernel launch, a local loop...).

A tensor that token tensors are stored into or combined with is a token
batch, so storing into it is no fill. The analysis is flow-insensitive and
purely syntactic; when in doubt a value is not a metric, so the rules stay
as strict as without it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from layoutcheck.model.imports import Imports
from layoutcheck.model.syntax import last_name, root_name, string_key

__all__ = ["Sinks", "is_metric_container"]

Context = tuple[Any, ...]
SINK: Context = ("sink",)
"""Consumed as a metric, a message or a condition."""
OTHER: Context = ("other",)
"""Anything that may shape the layout but is not seen to leave the function."""
FILL: Context = ("fill",)
"""The target of an element store that puts no tokens in (``grid[i, :n] = 1``)."""
OUT: Context = ("out",)
"""Returned, yielded, or stored into a field: the callers see it."""


def _bound(name: str) -> Context:
    return ("bound", name)


def _reduced(inner: Context) -> Context:
    return ("reduced", inner)


def _size(call: ast.AST) -> Context:
    return ("size", id(call))


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
    if name is None:
        return False
    found = _METRIC_NAMES.get(name)
    if found is None:
        found = _METRIC_NAMES[name] = _metric_container().fullmatch(name) is not None
    return found


_METRIC_NAMES: dict[str, bool] = {}
"""`is_metric_container` by name: a few names (``self``, ``batch``, ``logger``) are asked about again and again."""


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


_COMPREHENSIONS = frozenset({ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp})


class Sinks:
    """The contexts of one function's expressions, and the uses of its locals.

    ``body`` is the statements of the function (or module) walked;
    ``is_tokens`` says whether an expression holds token tensors (the
    flow's classification).
    """

    def __init__(self, body: Iterable[ast.stmt], imports: Imports, is_tokens: Callable[[ast.AST], bool]) -> None:
        self.imports = imports
        self.is_tokens = is_tokens
        self.contexts: dict[int, Context] = {}
        self.uses: dict[str, list[Context]] = {}
        self._block(body)

    # -- questions --

    def fate(self, node: ast.AST) -> str:
        """``metric``, ``escapes`` or ``local``: where the value of ``node`` goes (see the module docs)."""
        reached = self._reach(self.contexts.get(id(node), OTHER), set())
        if "out" in reached:
            return "escapes"
        if reached <= {"sink", "fill"}:
            return "metric"
        return "local"

    def metric_only(self, node: ast.AST) -> bool:
        """Does the value of ``node`` only ever reach metric sinks?"""
        return self.fate(node) == "metric"

    def _reach(self, context: Context, seen: set[Any]) -> set[str]:
        kind = context[0]
        if kind in ("sink", "fill", "out", "other"):
            return {kind}
        if kind == "reduced":
            # A count (`sum`, `len`) is a metric unless it sizes something.
            return self._reach(context[1], seen) if self._sizes(context[1], set()) else {"sink"}
        if kind == "size":
            key = ("size", context[1])
            if key in seen:
                return {"sink"}
            seen.add(key)
            return {"sized", *self._reach(self.contexts.get(context[1], OTHER), seen)}
        if kind == "bound":
            name = context[1]
            if name in seen:
                return {"sink"}
            seen.add(name)
            out: set[str] = set()
            for use in self.uses.get(name, ()):
                out |= self._reach(use, seen)
            return out or {"sink"}
        return {"other"}

    def _sizes(self, context: Context, seen: set[Any]) -> bool:
        kind = context[0]
        if kind == "size":
            return True
        if kind == "reduced":
            return self._sizes(context[1], seen)
        if kind == "bound" and context[1] not in seen:
            seen.add(context[1])
            return any(self._sizes(use, seen) for use in self.uses.get(context[1], ()))
        return False

    # -- statements --

    def _block(self, body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            self._statement(stmt)

    def _statement(self, node: ast.stmt) -> None:
        kind = type(node)
        # The commonest statements first (the classes below exclude one another: only the order of the
        # tests changes).
        if kind is ast.Assign:
            self._assign(node.targets, node.value)  # type: ignore[attr-defined]
            return
        if kind is ast.Expr:
            value = node.value  # type: ignore[attr-defined]
            if isinstance(value, (ast.Yield, ast.YieldFrom)):
                if value.value is not None:
                    self._expr(value.value, OUT)
            else:
                self._expr(value, SINK)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # its own function: judged on its own
        if isinstance(node, (ast.If, ast.While)):
            self._expr(node.test, SINK)
            self._block(node.body)
            self._block(node.orelse)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            target = node.target
            self._expr(node.iter, _bound(target.id) if isinstance(target, ast.Name) else OTHER)
            self._block(node.body)
            self._block(node.orelse)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self._block(node.body)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                self._block(handler.body)
            self._block(node.orelse)  # type: ignore[attr-defined]
            self._block(node.finalbody)  # type: ignore[attr-defined]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self._expr(item.context_expr, OTHER)
            self._block(node.body)
        elif isinstance(node, ast.Match):
            self._expr(node.subject, OTHER)
            for case in node.cases:
                self._block(case.body)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            if node.value is not None:
                self._assign([node.target], node.value)
        elif isinstance(node, ast.Assert):
            self._expr(node.test, SINK)
            if node.msg is not None:
                self._expr(node.msg, SINK)
        elif isinstance(node, ast.Raise):
            if node.exc is not None:
                self._expr(node.exc, SINK)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self._expr(node.value, OUT)

    def _assign(self, targets: list[ast.expr], value: ast.expr) -> None:
        if len(targets) == 1 and isinstance(targets[0], (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            parts = targets[0].elts
            if len(parts) == len(value.elts):
                for part, element in zip(parts, value.elts):
                    self._assign([part], element)
                return
        contexts = [self._store(t, value) for t in targets]
        self._expr(value, contexts[0] if len(set(contexts)) == 1 else OTHER)

    def _store(self, target: ast.expr, value: ast.expr) -> Context:
        """What storing ``value`` into ``target`` makes of it; records the target's own use."""
        if isinstance(target, ast.Name):
            return _bound(target.id)
        if isinstance(target, (ast.Tuple, ast.List)):
            return OTHER
        if isinstance(target, ast.Attribute):
            root = root_name(target)
            return SINK if is_metric_container(root) or is_metric_container(target.attr) else OUT
        if isinstance(target, ast.Subscript):
            root = root_name(target)
            key = string_key(target)
            if key is None:
                self._expr(target.slice, OTHER)
            if is_metric_container(root) or (key is not None and "/" in key):
                return SINK
            if isinstance(target.value, ast.Name) and key is None:
                # An element store: `grid[i, :n] = 1` fills a scratch tensor; storing
                # tokens into it makes it a token batch.
                tokens = self.is_tokens(value)
                self._use(target.value.id, OTHER if tokens else FILL)
                return _bound(target.value.id)
            if isinstance(target.value, ast.Name):
                # `batch["tokens"] = ...` into a local: the local's fate is the value's.
                self._use(target.value.id, FILL)
                return _bound(target.value.id)
            return OUT
        return OTHER

    # -- expressions --

    def _use(self, name: str, context: Context) -> None:
        self.uses.setdefault(name, []).append(context)

    def _each(self, nodes: Iterable[ast.AST | None], context: Context) -> None:
        for node in nodes:
            if node is not None:
                self._expr(node, context)

    def _expr(self, node: ast.AST, context: Context) -> None:
        self.contexts[id(node)] = context
        # By the node's class (`ast.parse` and the walk's synthetic nodes make no subclasses), the
        # commonest first: a constant leads nowhere.
        kind = type(node)
        if kind is ast.Name:
            self._use(node.id, context)  # type: ignore[attr-defined]
        elif kind is ast.Constant:
            return
        elif kind is ast.Call:
            self._call(node, context)  # type: ignore[arg-type]
        elif kind is ast.Attribute:
            self._expr(node.value, context)  # type: ignore[attr-defined]
        elif kind is ast.Subscript:
            self._expr(node.value, context)  # type: ignore[attr-defined]
            self._expr(node.slice, OTHER)  # type: ignore[attr-defined]
        elif kind is ast.BinOp:
            if type(node.op) is ast.Mod and _is_text(node.left):  # type: ignore[attr-defined]
                self._expr(node.right, SINK)  # type: ignore[attr-defined]  # "%d tokens" % n
                return
            # Arithmetic with a token tensor makes the result one.
            meets = self.is_tokens(node.left) or self.is_tokens(node.right)  # type: ignore[attr-defined]
            self._each((node.left, node.right), OTHER if meets and context != OUT else context)  # type: ignore[attr-defined]
        elif kind is ast.Tuple or kind is ast.List or kind is ast.Set:
            self._each(node.elts, context)  # type: ignore[attr-defined]
        elif kind is ast.UnaryOp:
            self._expr(node.operand, context)  # type: ignore[attr-defined]
        elif kind is ast.Await:
            self._expr(node.value, context)  # type: ignore[attr-defined]
        elif kind is ast.BoolOp:
            self._each(node.values, context)  # type: ignore[attr-defined]
        elif kind is ast.Compare:
            self._each((node.left, *node.comparators), SINK)  # type: ignore[attr-defined]
        elif kind is ast.IfExp:
            self._expr(node.test, SINK)  # type: ignore[attr-defined]
            self._each((node.body, node.orelse), context)  # type: ignore[attr-defined]
        elif kind is ast.Slice:
            self._each((node.lower, node.upper, node.step), OTHER)  # type: ignore[attr-defined]
        elif kind is ast.Starred:
            self._expr(node.value, context)  # type: ignore[attr-defined]
        elif kind is ast.Dict:
            for key, value in zip(node.keys, node.values):  # type: ignore[attr-defined]
                if key is not None:
                    self._expr(key, SINK)
                self._expr(value, context)
        elif kind in _COMPREHENSIONS:
            if kind is ast.DictComp:
                self._expr(node.key, SINK)  # type: ignore[attr-defined]
                self._expr(node.value, context)  # type: ignore[attr-defined]
            else:
                self._expr(node.elt, context)  # type: ignore[attr-defined]
            for gen in node.generators:  # type: ignore[attr-defined]
                self._expr(gen.iter, OTHER)
                self._each(gen.ifs, SINK)
        elif kind is ast.JoinedStr:
            for part in node.values:  # type: ignore[attr-defined]
                if type(part) is ast.FormattedValue:
                    self._expr(part.value, SINK)
        elif kind is ast.NamedExpr:
            self._expr(node.value, context)  # type: ignore[attr-defined]
            if type(node.target) is ast.Name:  # type: ignore[attr-defined]
                self._expr(node.value, _bound(node.target.id))  # type: ignore[attr-defined]
        elif kind is ast.Lambda:
            self._expr(node.body, OTHER)  # type: ignore[attr-defined]
        elif kind is ast.Yield or kind is ast.YieldFrom:
            if node.value is not None:  # type: ignore[attr-defined]
                self._expr(node.value, OUT)  # type: ignore[attr-defined]

    def _call(self, node: ast.Call, context: Context) -> None:
        func = node.func
        name = self.imports.qualify(func) or ""
        tail = last_name(func) or ""
        receiver = func.value if isinstance(func, ast.Attribute) else None
        values: list[ast.AST] = [*node.args, *(k.value for k in node.keywords)]
        if name in _MATH or name in _PASS_CALLS:
            self._each(values, context)
        elif name in _REDUCTIONS:
            self._each(values, _reduced(context))
        elif isinstance(func, ast.Name) and tail in _SINK_CALLS:
            self._each(values, SINK)  # print(...), str(...)
        elif receiver is not None and (tail in _SINK_CALLS or is_metric_container(root_name(receiver))):
            self._expr(receiver, SINK)  # logger.info(...), wandb.log(...), "{}".format(...)
            self._each(values, SINK)
        elif name in _CONSTRUCTORS or (receiver is not None and tail in _NEW_METHODS):
            if receiver is not None:
                self._expr(receiver, OTHER)
            filled = tail in ("full", "new_full")
            sizes = node.args[:1] if filled else node.args
            self._each(sizes, _size(node))
            self._each([a for a in node.args if a not in sizes], OTHER)
            self._each((k.value for k in node.keywords if k.arg == "size"), _size(node))
            self._each((k.value for k in node.keywords if k.arg != "size"), OTHER)
        elif name in _PADS:
            self._each(node.args[:1], context)
            self._each(node.args[1:], _size(node))
            self._each((k.value for k in node.keywords), _size(node))
        elif receiver is not None and tail in _REDUCTION_METHODS:
            self._expr(receiver, _reduced(context))
            self._each(values, OTHER)
        elif receiver is not None and tail in _PASS_METHODS:
            self._expr(receiver, context)
            self._each(values, OTHER)
        elif receiver is not None and tail in _FILL_METHODS:
            tokens = any(self.is_tokens(v) for v in values)
            self._expr(receiver, OTHER if tokens else FILL)
            self._each(values, OTHER)
        elif receiver is not None and tail in _ADD_METHODS and isinstance(receiver, ast.Name):
            # `padded.append(p)`: the value joins the list; the list's fate is its own.
            self._use(receiver.id, FILL)
            self.contexts[id(receiver)] = FILL
            self._each(values, _bound(receiver.id))
        else:
            if receiver is not None:
                self._expr(receiver, OTHER)
            elif not isinstance(func, ast.Name):
                self._expr(func, OTHER)
            # An argument of another call goes where the call's result goes: a callee
            # that returns it hands it on (`return F.pad(x, (0, pad))`, `return helper(pad)`).
            self._each(values, context if context in (OUT,) else OTHER)
