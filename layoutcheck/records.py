"""`dataclass`: the standard library's, with ``__repr__``, ``__eq__`` and ``__hash__`` shared.

`dataclasses.dataclass` writes each class's methods as source text and compiles
it (``exec``), about 0.07 ms a method; a one-file ``layoutcheck check`` (the
pre-commit run) imports about 60 dataclasses, and those compilations were a
sixth of its imports. Here the three comparison and display methods are
written once, as functions that read the fields' names kept on the class, and
give what the generated ones give: the same ``repr`` text (``...`` for an
object met again while its own repr is built), the same equality (the
compared fields as a tuple, objects of the same class only) and the same hash
values (``hash`` of that tuple; none, as with the standard decorator, for a
mutable class that compares by value), and with ``order`` the same ordering
(those tuples compared). The class is a dataclass all the same:
`dataclasses.fields`, `dataclasses.replace`, `dataclasses.asdict`, pickling
and frozen instances work as before. Classes with ``unsafe_hash`` or ``slots``
are left to the standard decorator whole.
"""

from __future__ import annotations

import dataclasses
import sys
from _thread import get_ident
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, overload

__all__ = ["dataclass"]

_T = TypeVar("_T", bound=type)
_F = TypeVar("_F")

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # type checkers read the branch above; at run time the marker does nothing
    def dataclass_transform(**_: Any) -> Callable[[_F], _F]:
        return lambda function: function


@overload
def dataclass(cls: _T, /) -> _T: ...


@overload
def dataclass(*, init: bool = True, repr: bool = True, eq: bool = True, order: bool = False,
              unsafe_hash: bool = False, frozen: bool = False, match_args: bool = True, kw_only: bool = False,
              slots: bool = False) -> Callable[[_T], _T]: ...


@dataclass_transform()  # so that type checkers read the decorated classes as dataclasses
def dataclass(cls: Any = None, /, *, init: bool = True, repr: bool = True, eq: bool = True,  # noqa: A002
              order: bool = False, unsafe_hash: bool = False, frozen: bool = False, match_args: bool = True,
              kw_only: bool = False, slots: bool = False) -> Any:
    """`dataclasses.dataclass`, with the same arguments and the same class made, its ``__repr__``,
    ``__eq__`` and ``__hash__`` shared (the module's docstring)."""

    def wrap(cls: _T) -> _T:
        own = cls.__dict__
        # The last: what the standard decorator refuses (order without eq, or over the class's own).
        if unsafe_hash or slots or (order and (not eq or any(name in own for name in _ORDER))):
            return dataclasses.dataclass(cls, init=init, repr=repr, eq=eq, order=order,  # type: ignore[no-any-return]
                                         unsafe_hash=unsafe_hash, frozen=frozen, match_args=match_args,
                                         kw_only=kw_only, slots=slots)
        share_repr = repr and "__repr__" not in own
        share_eq = eq and "__eq__" not in own
        # As `dataclasses` decides it: a ``__hash__`` the class body sets is kept.
        explicit_hash = "__hash__" in own
        made = dataclasses.dataclass(cls, init=init, repr=repr and not share_repr, eq=eq and not share_eq,
                                     frozen=frozen, match_args=match_args, kw_only=kw_only)
        fields = dataclasses.fields(made)
        if share_repr:
            made.__record_repr__ = tuple(f.name for f in fields if f.repr)  # type: ignore[attr-defined]
            made.__repr__ = _repr  # type: ignore[assignment]
        if share_eq:
            made.__record_compared__ = _tuple_of([f.name for f in fields if f.compare])  # type: ignore[attr-defined]
            made.__eq__ = _eq  # type: ignore[assignment]
            if not explicit_hash:
                if frozen:
                    hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
                    made.__record_hashed__ = _tuple_of(hashed)  # type: ignore[attr-defined]
                    made.__hash__ = _hash  # type: ignore[assignment]
                else:
                    made.__hash__ = None  # type: ignore[assignment]
        if order:
            made.__record_ordered__ = _tuple_of([f.name for f in fields if f.compare])  # type: ignore[attr-defined]
            for name, method in _ORDER.items():
                setattr(made, name, method)
        return made  # type: ignore[no-any-return]

    return wrap if cls is None else wrap(cls)


def _tuple_of(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The named attributes of an object as a tuple (`attrgetter` gives a bare value for one name)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        name = names[0]
        return lambda obj: (getattr(obj, name),)
    return lambda obj: ()


_REPR_RUNNING: set[tuple[int, int]] = set()


def _repr(self: Any) -> str:
    key = (id(self), get_ident())
    if key in _REPR_RUNNING:  # the object holds itself: as `dataclasses`' own repr
        return "..."
    _REPR_RUNNING.add(key)
    try:
        cls = self.__class__
        return cls.__qualname__ + "(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in cls.__record_repr__) + ")"
    finally:
        _REPR_RUNNING.discard(key)


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        compared = self.__class__.__record_compared__
        return compared(self) == compared(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self.__class__.__record_hashed__(self))


def _lt(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        ordered = self.__class__.__record_ordered__
        return ordered(self) < ordered(other)
    return NotImplemented


def _le(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        ordered = self.__class__.__record_ordered__
        return ordered(self) <= ordered(other)
    return NotImplemented


def _gt(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        ordered = self.__class__.__record_ordered__
        return ordered(self) > ordered(other)
    return NotImplemented


def _ge(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        ordered = self.__class__.__record_ordered__
        return ordered(self) >= ordered(other)
    return NotImplemented


_ORDER = {"__lt__": _lt, "__le__": _le, "__gt__": _gt, "__ge__": _ge}
