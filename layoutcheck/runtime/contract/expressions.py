"""What a boundary contract reads from a call: paths into its arguments and return value, and small expressions.

A *path* names one value of a call the way the configuration writes it:
``args.input_ids`` (the parameter ``input_ids``), ``args.batch.tokens``
(then a key of a mapping, or an attribute), ``returns`` (the whole return
value), ``returns.0`` (an item of a returned tuple), ``returns.1.cu_seqlens_q``,
``args.episodes.*.ids`` (``*``: the rest of the path read from each entry of
a list, giving a list). Each part after the first is an index (digits), a
mapping key, or an attribute, tried in that order; nothing is called and no
tensor value is read.

An *expression* computes one small value per call: an alignment unit
(``"tp * cp * 2 if cp > 1 else tp"``, ``"args.data_pad_size_multiplier * tp"``),
a CP scheme (``"allgather if allgather_cp else zigzag"``), a pad value, a
switch (``"pre_process"``). Its names are the function's parameters, and
``tp``, ``cp``, ``rank`` (the run's tensor- and context-parallel sizes and
this rank's CP rank), ``zigzag`` and ``allgather`` (the CP schemes, as text).
Only literals, names, attributes, constant subscripts, arithmetic
(``+ - * // %``), comparisons, ``and``/``or``/``not``, ``x if c else y`` and
the calls ``lcm``, ``max``, ``min`` are allowed: anything else is refused when
the configuration is read. A parameter's value is read as the call passed it
(a tensor is never read: an expression that needs a tensor's value fails
with a note).

Pure Python: no torch.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from layoutcheck.errors import LayoutSpecError

__all__ = ["COORDINATES", "Expr", "MISSING", "Path", "entry_attributes", "parse_expr", "parse_path"]

COORDINATES: tuple[str, ...] = ("tp", "cp", "rank")
"""Names an expression may use besides the parameters: TP size, CP size, CP rank."""
_SCHEME_NAMES = {"zigzag": "zigzag", "allgather": "allgather"}
_FUNCTIONS = {"lcm": math.lcm, "max": max, "min": min}
_BUILTINS: dict[str, Any] = {"__builtins__": {}, **_FUNCTIONS}

_ALLOWED = (
    ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp,
    ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub,
    ast.Not, ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Is, ast.IsNot,
)
_DIGITS = re.compile(r"-?\d+\Z")
_NAME = re.compile(r"[A-Za-z_]\w*\Z")


class _Missing:
    """A path that leads nowhere in this call (an absent key, a ``None`` on the way)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Path:
    """A value of a call: ``args.<parameter>...`` or ``returns...`` (see the module docs)."""

    text: str
    root: str
    """``args`` or ``returns``."""
    parts: tuple[str | int, ...]
    """After the root: for ``args``, the parameter first."""

    @property
    def parameter(self) -> str | None:
        """The parameter an ``args`` path starts from (``None`` for ``returns``)."""
        return str(self.parts[0]) if self.root == "args" and self.parts else None

    def read(self, call: Mapping[str, Any], result: Any = MISSING) -> Any:
        """The value in this call (``MISSING`` when a step finds nothing); never calls, never reads a tensor's values."""
        if self.root == "args":
            value = call.get(self.parts[0], MISSING)  # type: ignore[call-overload]
            rest = self.parts[1:]
        else:
            value, rest = result, self.parts
        return _walk(value, rest)

    def compiled(self) -> Callable[[Mapping[str, Any], Any], Any]:
        """`read` as a function of ``(call, result)`` made for this path's form: the same answer, fewer steps.

        ``args.<parameter>``, ``args.<parameter>.*.<name>`` over a list of
        plain objects of one class, and ``returns.<name>`` on a plain object
        are read directly; anything else (and any value those do not fit)
        goes through `read`.
        """
        parts, read = self.parts, self.read
        if self.root == "args" and len(parts) == 1:
            name = parts[0]
            return lambda call, result: call.get(name, MISSING)
        if self.root == "args" and len(parts) == 3 and parts[1] == "*" and isinstance(parts[2], str):
            name, getter = parts[0], _getter(parts[2])

            def entries(call: Mapping[str, Any], result: Any) -> Any:
                value = call.get(name, MISSING)
                # `_walk`'s path for entries of one plain class (`_MAPPING` 2: `getattr` is all `_step` does)
                if type(value) is list and value and _MAPPING.get(type(value[0])) == 2 and len(set(map(type, value))) == 1:
                    try:
                        return list(map(getter, value))
                    except AttributeError:
                        pass
                return read(call, result)

            return entries
        if self.root == "returns" and len(parts) == 1 and isinstance(parts[0], str):
            attribute = parts[0]

            def returned(call: Mapping[str, Any], result: Any) -> Any:
                if _MAPPING.get(type(result)) == 2:
                    found = getattr(result, attribute, MISSING)
                    if found is not MISSING:
                        return found
                return read(call, result)

            return returned
        return read

    def explain(self, call: Mapping[str, Any], result: Any = MISSING) -> str:
        """Why `read` finds nothing in this call: the step that leads nowhere, and the names found there."""
        if self.root == "args":
            value, done, rest = call.get(self.parts[0], MISSING), f"args.{self.parts[0]}", self.parts[1:]  # type: ignore[call-overload]
            if value is MISSING:
                return f"the call has no `{self.parts[0]}`"
        else:
            value, done, rest = result, "returns", self.parts
        for part in rest:
            if value is None:
                return f"`{done}` is None"
            if part == "*":
                if not isinstance(value, (list, tuple)) and not _object_array(value):
                    return f"`{done}` is a {type(value).__name__}, not a list to read each entry of"
                return f"an entry of `{done}` leads nowhere"
            found = _step(value, part)
            if found is MISSING:
                names = _names(value)
                there = f"; it has {', '.join(names[:12])}" if names else ""
                return f"`{done}` (a {type(value).__name__}) has no `{part}`{there}"
            value, done = found, f"{done}.{part}"
        return f"`{done}` is None" if value is None else "it leads nowhere"

    def __str__(self) -> str:
        return self.text


def _names(value: Any) -> list[str]:
    # What a container offers a path, as a message shows it: `key`s, public `attribute`s, and a batch class's
    # inner fields as `name` (in `batch`)
    if isinstance(value, (list, tuple)):
        return [f"`0`..`{len(value) - 1}`"] if value else []
    return [f"`{name}`" for name in _keys(value)] + [
        f"`{name}` (in `{holder}`)" for holder in _WRAPPED if not hasattr(value, "keys")
        for name in _keys(getattr(value, holder, None))]


def _keys(value: Any) -> list[str]:
    if value is None:
        return []
    if hasattr(value, "keys") and hasattr(value, "__getitem__"):
        try:
            return [str(k) for k in list(value.keys())[:24]]
        except Exception:  # noqa: BLE001 - a container that cannot answer: no names
            return []
    fields = getattr(type(value), "model_fields", None) or getattr(value, "__dataclass_fields__", None)
    if isinstance(fields, Mapping):
        return list(fields)[:24]
    return [k for k in getattr(value, "__dict__", {}) if not k.startswith("_")][:24]


def entry_attributes(value: Any, names: tuple[str, ...]) -> list[list[Any]] | None:
    """Each name read from every entry of ``value`` (one new list a name), as `Path.read` reads ``x.*.name``.

    Only for a non-empty list of plain objects of one class already read by
    ``getattr`` (what `Path.compiled` reads directly); ``None`` otherwise (an
    entry without a name too), for the caller to read each path itself. Several
    fields of one list are read with one look at its entries' class.
    """
    if type(value) is list and value and _MAPPING.get(type(value[0])) == 2 and len(set(map(type, value))) == 1:
        try:
            return [list(map(_getter(name), value)) for name in names]
        except AttributeError:
            return None
    return None


def _walk(value: Any, parts: tuple[str | int, ...]) -> Any:
    for i, part in enumerate(parts):
        if value is MISSING or value is None:
            return MISSING
        if part == "*":
            if not isinstance(value, (list, tuple)) and not _object_array(value):
                return MISSING
            rest = parts[i + 1:]
            if len(rest) == 1 and isinstance(rest[0], str):  # `x.*.field`, per sample on every call: no recursion
                name = rest[0]
                plain = type(value[0]) if len(value) else None
                if plain is not None and _MAPPING.get(plain) == 2:  # entries of one plain class: `getattr` each
                    if len(set(map(type, value))) == 1:  # all of that class: one C loop (the usual batch)
                        try:
                            return list(map(_getter(name), value))
                        except AttributeError:
                            pass  # an entry without it: read one by one below, as `_step` reads it
                    out = [getattr(e, name, MISSING) if type(e) is plain else _entry(e, name) for e in value]
                    for j, got in enumerate(out):
                        if got is MISSING and type(value[j]) is plain:
                            out[j] = _wrapped(value[j], name)
                    return out
                return [_entry(e, name) for e in value]
            return [_walk(entry, rest) for entry in value]
        value = _step(value, part)
    return value


_GETTERS: dict[str, Any] = {}


def _getter(name: str) -> Any:
    found = _GETTERS.get(name)
    if found is None:
        found = _GETTERS[name] = operator.attrgetter(name)
    return found


def _entry(value: Any, name: str) -> Any:
    return MISSING if value is MISSING or value is None else _step(value, name)


def _object_array(value: Any) -> bool:
    # a 1-D numpy array of per-sample objects (verl's non_tensor_batch entries): `*` reads each entry
    shape = getattr(value, "shape", None)
    return getattr(getattr(value, "dtype", None), "kind", None) == "O" and shape is not None and len(shape) == 1


_MAPPING: dict[type, int] = {}
"""How `_step` reads a name from each type it met (`_kind`: the same answer for every instance)."""


def _step(value: Any, part: str | int) -> Any:
    if isinstance(part, int):
        if isinstance(value, (list, tuple)):
            return value[part] if -len(value) <= part < len(value) else MISSING
        shape = getattr(value, "shape", None)
        if shape is not None:  # a tensor's row: a view, no value read
            return value[part] if len(shape) and -int(shape[0]) <= part < int(shape[0]) else MISSING
        if isinstance(value, Mapping):
            return value.get(part, MISSING)
        return MISSING
    kind = _MAPPING.get(type(value))
    if kind is None:  # asked once per type: `isinstance` against an ABC is slow, and this runs per sample
        kind = _MAPPING[type(value)] = _kind(type(value))
    if kind == 1:
        return value.get(part, MISSING)
    if kind == 2:  # a plain object (a dataclass, say): its attribute, else a field it wraps
        found = getattr(value, part, MISSING)
        return found if found is not MISSING else _wrapped(value, part)
    if hasattr(value, "keys") and hasattr(value, "__getitem__"):  # mapping-like (a TensorDict, a batch dict)
        try:
            return value[part] if part in value.keys() else getattr(value, part, MISSING)
        except Exception:  # noqa: BLE001 - a container that cannot answer: nothing there
            return MISSING
    found = getattr(value, part, MISSING)
    return found if found is not MISSING else _wrapped(value, part)


def _kind(cls: type) -> int:
    # 1: a Mapping; 2: a class no instance of which is mapping-like (no `__getitem__`, no `__getattr__` that
    # could answer for one): `getattr` is all `_step` does on it; 0: anything else, asked per value
    if issubclass(cls, Mapping):
        return 1
    if not hasattr(cls, "__getitem__") and not hasattr(cls, "__getattr__") and cls.__getattribute__ is object.__getattribute__:
        return 2
    return 0


def _wrapped(value: Any, part: str) -> Any:
    for holder in _WRAPPED:  # a batch class wrapping its fields (verl's DataProto): `data.input_ids` reads
        inner = getattr(value, holder, None)  # `data.batch["input_ids"]`, else `data.non_tensor_batch[...]`
        if inner is not None and hasattr(inner, "keys") and hasattr(inner, "__getitem__"):
            found = _step(inner, part)
            if found is not MISSING:
                return found
    return MISSING


_WRAPPED = ("batch", "non_tensor_batch")
"""Attributes a batch class keeps its named fields in (a TensorDict-like ``batch``, a dict ``non_tensor_batch``)."""


def parse_path(text: object, *, what: str = "a path") -> Path:
    """``args.<parameter>[.part...]`` or ``returns[.part...]``; `LayoutSpecError` naming what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise LayoutSpecError(f"{what} is written `args.<parameter>` or `returns.<index or key>`, got {text!r}")
    words = text.strip().split(".")
    root, rest = words[0], words[1:]
    if root not in ("args", "returns"):
        raise LayoutSpecError(f"{what} {text!r} must start with `args.` (an argument) or `returns` (the return value)")
    if root == "args" and not rest:
        raise LayoutSpecError(f"{what} {text!r} names no parameter: write `args.<parameter>`")
    parts: list[str | int] = []
    for i, word in enumerate(rest):
        if _DIGITS.match(word) and not (root == "args" and i == 0):
            parts.append(int(word))
        elif _NAME.match(word) or (word == "*" and not (root == "args" and i == 0)) or (word and root == "returns"):
            parts.append(word)
        else:
            raise LayoutSpecError(f"{what} {text!r}: {word!r} is not a parameter, key, attribute or index")
    return Path(text.strip(), root, tuple(parts))


@dataclass(frozen=True)
class Expr:
    """A small expression evaluated per call (see the module docs); a literal is kept as it is."""

    text: str
    names: frozenset[str]
    """Free names: parameters (checked against the function's signature at install) and coordinates."""
    code: Any = None
    """Compiled code; ``None`` for a literal (`value`)."""
    value: Any = None

    @property
    def literal(self) -> bool:
        return self.code is None

    @property
    def needs_coordinates(self) -> bool:
        return bool(self.names & set(COORDINATES))

    @property
    def parameters(self) -> frozenset[str]:
        """The names that must be the function's parameters."""
        return self.names - set(COORDINATES) - set(_SCHEME_NAMES) - set(_FUNCTIONS)

    def evaluate(self, call: Mapping[str, Any], coordinates: Mapping[str, int] | None = None) -> Any:
        """The value for one call: parameters from ``call``, ``tp``/``cp``/``rank`` from ``coordinates``.

        Raises `LayoutSpecError` naming the expression when it cannot be
        computed (a name the call lacks, a tensor where an int belongs).
        """
        if self.code is None:
            return self.value
        if self.text in call and self.text not in COORDINATES:  # a bare parameter (`pad_id`): what `eval` gives
            value = call[self.text]
            if type(value) is int:  # the usual pad id: no attribute looked for (a failed `hasattr` raises inside)
                return value
            if hasattr(value, "shape") and hasattr(value, "dtype"):
                raise LayoutSpecError(f"`{self.text}` is a tensor; an expression must give a Python value (reading "
                                      "a tensor's value would synchronise the GPU)")
            return value
        namespace: dict[str, Any] = dict(_SCHEME_NAMES)
        for name in self.names:
            if name in COORDINATES and coordinates is not None and name in coordinates:
                namespace[name] = coordinates[name]
            elif name in call:
                namespace[name] = call[name]
        try:
            value = eval(self.code, _BUILTINS, namespace)  # noqa: S307 - the AST was checked in parse_expr
        except NameError as err:
            raise LayoutSpecError(f"`{self.text}`: {err}") from None
        except Exception as err:  # noqa: BLE001 - a tensor's truth value, a None attribute, ...
            raise LayoutSpecError(f"`{self.text}` cannot be computed for this call ({type(err).__name__}: {err})") from None
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            raise LayoutSpecError(f"`{self.text}` is a tensor; an expression must give a Python value (reading a "
                                  "tensor's value would synchronise the GPU)")
        return value

    def __str__(self) -> str:
        return self.text


def parse_expr(value: object, *, what: str = "an expression") -> Expr:
    """An `Expr` from the configuration: an int, a bool, or a string of the small language (see the module docs)."""
    if isinstance(value, bool) or isinstance(value, int):
        return Expr(str(value).lower() if isinstance(value, bool) else str(value), frozenset(), value=value)
    if not isinstance(value, str) or not value.strip():
        raise LayoutSpecError(f"{what} must be an integer or an expression such as \"tp * 2\", got {value!r}")
    text = value.strip()
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise LayoutSpecError(f"{what} {text!r} is not an expression: {err.msg}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise LayoutSpecError(f"{what} {text!r}: `{type(node).__name__}` is not allowed; write arithmetic, "
                                  "comparisons, `x if c else y`, lcm/max/min over parameters, tp, cp and rank")
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS) or node.keywords:
                raise LayoutSpecError(f"{what} {text!r}: only lcm(...), max(...) and min(...) may be called")
        elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            raise LayoutSpecError(f"{what} {text!r}: a subscript must be a constant (`x[0]`, `x['key']`)")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise LayoutSpecError(f"{what} {text!r}: private attribute `{node.attr}`")
        elif isinstance(node, ast.Name) and not (isinstance(node.ctx, ast.Load)):
            raise LayoutSpecError(f"{what} {text!r}: only reads are allowed")
        if isinstance(node, ast.Name):
            names.add(node.id)
    body = tree.body
    if isinstance(body, ast.Constant):
        return Expr(text, frozenset(), value=body.value)
    if isinstance(body, ast.Name) and body.id in _SCHEME_NAMES:
        return Expr(text, frozenset(), value=body.id)
    # `args.x` reads the parameter `args`: a call's parameters are the expression's names, whatever they are
    return Expr(text, frozenset(names), code=compile(tree, f"<layoutcheck {what}>", "eval"))
