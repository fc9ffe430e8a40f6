"""Padded-tensor annotations, checked by typeguard 4.

    from typing import Annotated
    import torch
    from layoutcheck.typing import Padded

    Tokens = Annotated[torch.Tensor, Padded("B", "L")]          # a laid-out micro-batch

    @typechecked                                                # or typeguard.install_import_hook
    def lay_out(tokens: Annotated[torch.Tensor, Padded("P")],   # one sample, padded
                masks: Annotated[torch.Tensor, Padded("P")]) -> Tokens: ...

Each argument of `Padded` describes one dimension: a name (``"B"``, ``"P"``),
a name with an offset (``"T-1"``: replay rows), an int (exact size), ``"*"``
(any one dimension) or ``"..."`` (any number of them, once). A name is bound
the first time it is seen in a call and must mean the same length in every
other argument, annotated local and the return value of that call (a
direct ``typeguard.check_type`` is a call of its own).

Four names are geometry (docs/design.md#vocabulary) and, on a tensor the tracer
tagged, read the tag at the tag's sequence dimension instead of the size:

=====  ===============================================================
``P``  the sample's padded length (its bucket when buckets are set)
``L``  the local length on this CP rank (``P`` when ``cp == 1``)
``T``  the sample's true total length
``R``  the sample's response entries (on this rank, once CP-sliced)
=====  ===============================================================

so ``Padded("P")`` on an unpadded, or a CP-sliced, sample fails even when
no other argument binds ``P``. Untagged, they bind to sizes like any name.

Why a call, ``Padded("B", "P")``, and not a subscript: typeguard's
instrumentation re-parses every string constant of an annotation as a
forward reference, so ``Padded["B P"]`` is a ``SyntaxError`` and
``Padded["B", "P"]`` looks up variables named ``B`` and ``P``; it does not
enter calls. Why bindings live in the call's own locals mapping
(``memo.locals``, under a key no identifier can spell) and not in a
``ContextVar``: a ``TypeCheckMemo`` has slots and no weakref support, so a
context variable keyed by the memo could not tell a finished call from a new
one at a reused address without holding the memo, and with it the call's
arguments (tensors), alive. The locals mapping lives exactly as long as the
call.

The module is ``layoutcheck.typing`` (as ``numpy.typing``, and as the
design's architecture lays out): annotations are what users import from it, and nothing in it needs
torch or typeguard until a check runs (package modules import the standard
``typing`` absolutely, so the name shadows nothing).

The checks plug in through typeguard's ``typeguard.checker_lookup`` entry
point (declared by this package, loaded when typeguard is imported); call
`install` where plugins are not auto-loaded. Importing this module imports
neither torch nor typeguard; shapes are read with torch-function handling
off, never values (no GPU sync).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from inspect import isclass
from typing import Any

from layoutcheck.errors import LayoutSpecError, describe_value, metadata_only

__all__ = ["GEOMETRY_NAMES", "Padded", "checker_lookup", "install"]

GEOMETRY_NAMES: tuple[str, ...] = ("P", "L", "T", "R")
"""Names that read a tagged tensor's geometry (see the module docs)."""

_SCOPE_KEY = "<layoutcheck bound lengths>"
_DIM = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\s*([+-])\s*(\d+))?$")


class _Dim:
    __slots__ = ("kind", "name", "offset", "size")

    def __init__(self, kind: str, name: str = "", offset: int = 0, size: int = 0) -> None:
        self.kind, self.name, self.offset, self.size = kind, name, offset, size


def _parse(dim: object) -> _Dim:
    if isinstance(dim, bool) or not isinstance(dim, (int, str)):
        got = describe_value(dim, quote=True)
        raise LayoutSpecError(f"a Padded dimension is a name, an int, '*' or '...', got {got}")
    if isinstance(dim, int):
        if dim < 0:
            raise LayoutSpecError(f"a Padded dimension size must be >= 0, got {dim}")
        return _Dim("int", size=dim)
    text = dim.strip()
    if text == "...":
        return _Dim("rest")
    if text in ("*", "_"):
        return _Dim("any")
    match = _DIM.match(text)
    if match is None:
        hint = " (one name per dimension: Padded('B', 'P'))" if " " in text else ""
        raise LayoutSpecError(f"cannot read the Padded dimension {text!r}{hint}")
    name, sign, number = match.groups()
    offset = 0 if sign is None else (int(number) if sign == "+" else -int(number))
    return _Dim("name", name=name, offset=offset)


class Padded:
    """``Annotated[torch.Tensor, Padded(*dims)]``: a tensor's dimensions, with padded geometry.

    Instances are cached per ``dims`` (the instrumented code builds the
    annotation at every call). Bad dimension specs raise `LayoutSpecError`.
    """

    __slots__ = ("_checker", "_dims", "_geometry", "_pairs", "_rest", "dims")
    _cache: dict[tuple[object, ...], Padded] = {}

    def __new__(cls, *dims: int | str) -> Padded:
        cached = cls._cache.get(dims)
        if cached is not None:
            return cached
        self = super().__new__(cls)
        self.dims = dims
        self._dims = tuple(_parse(d) for d in dims)
        rests = [i for i, d in enumerate(self._dims) if d.kind == "rest"]
        if len(rests) > 1:
            raise LayoutSpecError(f"Padded{dims!r}: '...' may appear once")
        self._rest = rests[0] if rests else None
        # (dimension index, spec) of the dimensions that say something; negative indices count from the end
        head = self._dims if self._rest is None else self._dims[: self._rest]
        tail = () if self._rest is None else self._dims[self._rest + 1:]
        pairs = [(i, d) for i, d in enumerate(head)] + [(i - len(tail), d) for i, d in enumerate(tail)]
        self._pairs = tuple((i, d) for i, d in pairs if d.kind in ("int", "name"))
        self._geometry = any(d.kind == "name" and d.name in GEOMETRY_NAMES for _, d in self._pairs)
        self._checker = _make_checker(self)
        cls._cache[dims] = self
        return self

    def __repr__(self) -> str:
        return f"Padded({', '.join(repr(d) for d in self.dims)})"

    def __reduce__(self) -> tuple[Any, tuple[object, ...]]:
        return (Padded, self.dims)


# --- typeguard plug-in ---------------------------------------------------------------


def checker_lookup(origin_type: Any, args: tuple[Any, ...], extras: tuple[Any, ...]) -> Callable[..., None] | None:
    """typeguard's checker lookup (entry point ``typeguard.checker_lookup``): a checker for ``Padded`` extras.

    Runs for every annotation typeguard checks, so it returns at once when
    there is no ``Padded`` among the ``Annotated`` extras. Only class origins
    (tensor and array types) are checked; ``Padded`` on anything else is left
    to typeguard.
    """
    if extras and isclass(origin_type):
        for extra in extras:
            if type(extra) is Padded:
                return extra._checker  # type: ignore[no-any-return]
    return None


def install() -> None:
    """Register `checker_lookup` with typeguard by hand (where its plug-ins are not auto-loaded)."""
    import typeguard

    if checker_lookup not in typeguard.checker_lookup_functions:
        typeguard.checker_lookup_functions.insert(0, checker_lookup)


def _make_checker(spec: Padded) -> Callable[..., None]:
    def check_padded(value: Any, origin_type: Any, args: tuple[Any, ...], memo: Any) -> None:
        _check(spec, value, origin_type, memo)

    return check_padded


def _error(message: str) -> Exception:
    from typeguard import TypeCheckError

    return TypeCheckError(message)


_PHASES = {
    "check_argument_types_internal": "argument",
    "check_argument_types": "argument",
    "check_return_type_internal": "return",
    "check_return_type": "return",
    "check_variable_assignment": "assignment",
    "check_type": "check_type",
}


def _phase() -> tuple[str, Any]:
    # Which typeguard entry point is checking (an instrumented call's
    # arguments, return value or annotated local; or a direct check_type),
    # from typeguard's own frames: a few co_name comparisons.
    frame = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            break
        phase = _PHASES.get(frame.f_code.co_name)
        if phase is not None:
            return phase, frame
        frame = frame.f_back
    return "check_type", None


def _scope(memo: Any, phase: str) -> dict[str, tuple[int, str, Any]]:
    # One dict of bound lengths per instrumented call, kept in the call's own
    # locals mapping (the memo's). A check_type call is a scope of its own.
    local = memo.locals
    if phase == "check_type" or local is memo.globals:
        return {}
    try:
        scope = local.get(_SCOPE_KEY)
        if scope is None:
            scope = {}
            local[_SCOPE_KEY] = scope
    except (AttributeError, TypeError):  # a read-only mapping: bind within this check only
        return {}
    return scope  # type: ignore[no-any-return]


def _who(phase: str, frame: Any) -> str:
    # What is being checked, for messages; read only when a name is first bound.
    if phase == "argument":
        return f'argument "{frame.f_locals.get("argname", "?")}"'
    if phase == "return":
        return "the return value"
    if phase == "assignment":
        return f'the value assigned to {frame.f_locals.get("varname", "?")}'
    return "another dimension of this value"


def _tag_value(name: str, tag: Any) -> int | None:
    if name == "P":
        return tag.length  # type: ignore[no-any-return]
    if name == "T":
        return tag.total  # type: ignore[no-any-return]
    if name == "R":
        return tag.local if (tag.sliced and tag.space == "response") else tag.response  # type: ignore[no-any-return]
    if name == "L":
        if tag.sliced:
            return tag.local  # type: ignore[no-any-return]
        if tag.cp_size == 1:
            return tag.length  # type: ignore[no-any-return]
        from layoutcheck import geometry

        length = tag.length
        if length is None or not geometry.cp_can_slice(length, tag.cp_size, tag.scheme):
            return None
        return geometry.local_length(length, tag.cp_size, tag.scheme)
    return None


def _check(spec: Padded, value: Any, origin_type: Any, memo: Any) -> None:
    if not isinstance(value, origin_type):
        raise _error(f"is not an instance of {origin_type.__module__}.{origin_type.__qualname__}")
    with metadata_only():
        shape = getattr(value, "shape", None)
    if shape is None:
        raise _error("has no shape to check against " + repr(spec))
    ndim, wanted = len(shape), len(spec._dims)
    if spec._rest is None and ndim != wanted:
        raise _error(f"has {ndim} dimensions {tuple(shape)}, but {spec!r} describes {wanted}")
    if spec._rest is not None and ndim < wanted - 1:
        raise _error(f"has {ndim} dimensions {tuple(shape)}, but {spec!r} needs at least {wanted - 1}")
    tag = None
    if spec._geometry:
        tags = sys.modules.get("layoutcheck.runtime.tracing.tags")
        if tags is not None:  # nothing can be tagged before the tags module is loaded
            tag = tags.geometry_of(value)
    scope: dict[str, tuple[int, str, Any]] | None = None
    who = None
    for i, dim in spec._pairs:
        if i < 0:
            i += ndim
        size = shape[i]
        if dim.kind == "int":
            if size != dim.size:
                raise _error(f"has size {size} in dimension {i}, but {spec!r} says {dim.size}")
            continue
        name, from_tag = dim.name, None
        value_of_name = size - dim.offset
        if tag is not None and i == tag.seq_dim and name in GEOMETRY_NAMES:
            known = _tag_value(name, tag)
            if known is not None:
                if size != known + dim.offset:
                    raise _error(
                        f"has {size} positions in dimension {i}, but {_label(dim)} is {known + dim.offset} "
                        f"for {tag.describe()}{_sliced_hint(name, tag)}"
                    )
                value_of_name, from_tag = known, tag
        if scope is None:
            phase, frame = _phase()
            scope = _scope(memo, phase)
        bound = scope.get(name)
        if bound is None:
            if who is None:
                who = _who(phase, frame)
            scope[name] = (value_of_name, who, from_tag)
        elif bound[0] != value_of_name:
            source = bound[1] + (f" (the tag of {bound[2].describe()})" if bound[2] is not None else "")
            raise _error(
                f"has {name}={value_of_name} (size {size} in dimension {i}), "
                f"but {name}={bound[0]} was bound by {source}"
            )


def _label(dim: _Dim) -> str:
    if not dim.offset:
        return dim.name
    return f"{dim.name}{'+' if dim.offset > 0 else '-'}{abs(dim.offset)}"


def _sliced_hint(name: str, tag: Any) -> str:
    if name == "P" and tag.sliced and tag.cp_size > 1:
        return ": it is CP-sliced (annotate its local length as L)"
    if name == "P" and tag.total is not None and tag.length is not None and tag.length != tag.total:
        return ": the sample is not padded to P yet"
    return ""
