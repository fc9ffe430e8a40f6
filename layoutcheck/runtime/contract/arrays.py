"""A boundary field's value, whatever holds it: torch tensors, numpy arrays, Python lists of ints, lists of arrays.

A trainer keeps per-sample data in whatever it likes: torch tensors on a
GPU, numpy arrays (routed-expert indices, verl's ``non_tensor_batch``: 1-D
arrays of ``dtype=object``, one entry per sample), Python lists and tuples
of ints, lists of tensors or arrays (one per sample), and containers of them
(dicts, dataclasses, pydantic models, TensorDict-like batches, which
`layoutcheck.runtime.contract.expressions` walks). This module is the one
place a boundary contract reads such a value:

* **shapes** (`shape`, `entries`, `int_list`) of every kind, read from
  ``.shape`` and ``len`` only: never a value, never a copy, never a GPU
  synchronisation; nested Python lists give their shape by walking their
  first entries;
* **host values** (`host_ints`, `host_sums`, `host_data`), for the value
  checks: lengths, a mask's row sums, and the data B6 compares, as Python
  ints or CPU torch tensors. They are asked only for values already on the
  host (a CPU tensor, a numpy array, a list); a device tensor goes through
  a snapshot first (`layoutcheck.runtime.checker.values`).

A value of a kind it cannot read raises `Unreadable`, which says what the
value is and what to write in the contract instead: the boundary reports it
once as a configuration problem (`layoutcheck.runtime.checker.boundaries`).

torch is never imported to read shapes; `host_data` imports it (the data
B6 compares are torch tensors), numpy is never imported (an array says what
it is through ``.shape``, ``.dtype`` and ``.tolist``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from numbers import Integral, Real
from typing import Any

from layoutcheck.errors import LayoutSpecError, describe_value

__all__ = [
    "Unreadable",
    "describe_kind",
    "entries",
    "host_data",
    "host_ints",
    "host_sums",
    "int_list",
    "is_array",
    "is_int",
    "shape",
    "unreadable",
]


class Unreadable(LayoutSpecError):
    """A field's value is of a kind the contract cannot read; the message says what to write instead."""


def is_array(value: object) -> bool:
    """A tensor or an array (has a ``shape`` and a ``dtype``), not a class, not a numpy scalar."""
    if isinstance(value, type) or not hasattr(value, "shape") or not hasattr(value, "dtype"):
        return False
    numpy = sys.modules.get("numpy")  # asked per field and call: a concrete class, not the numbers ABCs
    return numpy is None or not isinstance(value, numpy.generic)


def is_int(value: object) -> bool:
    """A Python or numpy integer (not a bool, not an array: a 0-d tensor's value would need a read)."""
    return type(value) is int or (isinstance(value, Integral) and not isinstance(value, bool)
                                  and type(value).__module__ == "numpy")


def _object_array(value: object) -> bool:
    # numpy's per-sample holder: an array of Python objects (verl's non_tensor_batch entries)
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray) and value.dtype.kind == "O"


def entries(value: object) -> list[Any] | None:
    """The per-sample entries of a list, a tuple or a 1-D numpy object array; ``None`` for anything else."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if _object_array(value) and len(value.shape) == 1:  # type: ignore[attr-defined]
        return list(value)  # type: ignore[call-overload]
    return None


def int_list(value: object) -> list[int] | None:
    """A list or tuple of Python or numpy ints as Python ints; ``None`` when it is anything else."""
    if isinstance(value, (list, tuple)):
        if set(map(type, value)) == {int}:  # Python ints (the usual case): no per-entry call
            return list(value)
        if all(is_int(v) for v in value):
            return [int(v) for v in value]
    return None


def shape(value: object) -> tuple[int, ...] | None:
    """The shape of an array, or of a nested list (walked down its first entries); ``None`` for anything else.

    Call inside `metadata_only()` for tensors. A list's shape is its length,
    then its first entry's shape: ragged nested lists are read entry by entry
    by the caller.
    """
    if is_array(value):
        if _object_array(value):
            return (int(value.shape[0]),) if len(value.shape) == 1 else None  # type: ignore[attr-defined]
        return tuple(int(d) for d in value.shape)  # type: ignore[attr-defined]
    if isinstance(value, (list, tuple)):
        out = [len(value)]
        inner: Any = value
        while isinstance(inner, (list, tuple)) and inner:
            inner = inner[0]
            if isinstance(inner, (list, tuple)):
                out.append(len(inner))
            elif is_array(inner):
                sub = shape(inner)
                return tuple(out + list(sub or ()))
            else:
                break
        return tuple(out)
    return None


# --- what a value is, and what to write instead -----------------------------------------------------------


def _inside(value: object) -> list[tuple[str, object]]:
    # The named parts of a container (keys, dataclass and pydantic fields, public attributes), for the hint.
    if isinstance(value, Mapping) or (hasattr(value, "keys") and hasattr(value, "__getitem__")):
        try:
            return [(str(k), value[k]) for k in list(value.keys())[:32]]  # type: ignore[attr-defined,index]
        except Exception:  # noqa: BLE001 - a container that cannot answer: nothing to suggest
            return []
    if is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name, None)) for f in fields(value)]
    model_fields = getattr(type(value), "model_fields", None)  # pydantic v2
    if isinstance(model_fields, Mapping):
        return [(name, getattr(value, name, None)) for name in model_fields]
    names = getattr(value, "__dict__", None)
    if isinstance(names, dict):
        return [(k, v) for k, v in names.items() if not k.startswith("_")][:32]
    return []


def _suggest(value: object, key: str, depth: int = 2) -> list[str]:
    # The paths of the arrays and lists of ints inside a container, two levels down (a batch's `.batch.input_ids`).
    out: list[str] = []
    for name, inner in _inside(value):
        if _layout_like(inner):
            out.append(f"{key}.{name}")
        elif depth > 1 and not isinstance(inner, (str, bytes, int, float, bool, type(None), list, tuple)):
            out += _suggest(inner, f"{key}.{name}", depth - 1)
    return out


def _layout_like(value: object) -> bool:
    return is_array(value) or int_list(value) is not None or (
        isinstance(value, (list, tuple)) and bool(value) and all(
            v is None or is_array(v) or isinstance(v, (list, tuple)) for v in value))


def describe_kind(value: object) -> str:
    """What a value is, for a message: a type, with its dtype and shape for arrays."""
    if is_array(value):
        return describe_value(value, 80)
    if isinstance(value, (list, tuple)):
        kinds = sorted({type(v).__name__ for v in value[:16]})
        return f"{_a(type(value).__name__)} of {len(value)} ({', '.join(kinds) or 'nothing'})"
    if type(value).__module__ != "builtins":
        return f"{_a(type(value).__module__, '`')}.{type(value).__qualname__}`"
    return f"{_a(type(value).__name__)} ({describe_value(value, 40, quote=True)})"


def _a(word: str, quote: str = "") -> str:
    """``word`` after its indefinite article (``a list``, ``an object``), ``quote`` opening it."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {quote}{word}"


def unreadable(key: str, value: object, holds: str) -> Unreadable:
    """The `Unreadable` for field ``key`` whose ``value`` is not the ``holds`` the contract says, with what to write."""
    parts = _suggest(value, key)
    if parts:
        names = ", ".join(f"`{name}`" for name in parts[:6]) + (f" (+{len(parts) - 6} more)" if len(parts) > 6 else "")
        instead = f"it holds {len(parts)} array field{'s' if len(parts) != 1 else ''}: name the one meant, such as {names}"
    elif isinstance(value, (str, bytes, bool, float)) or value is None:
        instead = "it holds no per-sample layout data: remove the field, or point it at the tensor or list that does"
    elif isinstance(value, (list, tuple)):
        instead = ("its entries are not tensors, arrays or lists of ints: point the field at the per-sample "
                   "tensors (write `.*.<name>` to read a name from each entry)")
    else:
        instead = "point the field at the tensor, array or list of ints inside it"
    return Unreadable(f"`{key}` should hold {holds}, but the call passed {describe_kind(value)}; {instead}")


# --- host values ---------------------------------------------------------------------------------------


def host_ints(value: Any, key: str) -> list[int] | int:
    """A host value's ints: a 1-D tensor or array, a list of ints, or one int (`Unreadable` otherwise)."""
    if is_int(value):
        return int(value)
    ints = int_list(value)
    if ints is not None:
        return ints
    if is_array(value) and not _object_array(value):
        got = value.tolist()  # a CPU tensor or a numpy array: no device is involved
        if isinstance(got, list) and all(isinstance(v, Integral) and not isinstance(v, bool) for v in got):
            return [int(v) for v in got]
        if isinstance(got, Integral):
            return int(got)
    raise unreadable(key, value, "ints (a list of ints, or a 1-D integer tensor or array)")


def _sum(mask: Any, key: str) -> int:
    if isinstance(mask, (list, tuple)):
        if all(isinstance(v, Real) for v in mask):
            return int(sum(bool(v) for v in mask))
        raise unreadable(key, mask, "masks (a (B, S) tensor or array, or a list of 1-D masks)")
    if is_array(mask) and not _object_array(mask):
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(mask, torch.Tensor):
            return int(mask.to(torch.bool).sum())  # a CPU tensor (callers keep device tensors out)
        return int((mask != 0).sum())
    raise unreadable(key, mask, "masks (a (B, S) tensor or array, or a list of 1-D masks)")


def host_sums(value: Any, key: str) -> list[int | None]:
    """Each mask's number of true positions: the rows of a ``(B, S)`` tensor or array, or each entry of a list."""
    rows = entries(value)
    if rows is None and is_array(value):
        dims = len(value.shape)
        if dims == 1:
            rows = [value]
        elif dims == 2:
            torch = sys.modules.get("torch")
            if torch is not None and isinstance(value, torch.Tensor):
                return value.to(torch.bool).sum(dim=-1, dtype=torch.int64).tolist()  # type: ignore[no-any-return]
            return [int(n) for n in (value != 0).sum(axis=-1).tolist()]
    if rows is None:
        raise unreadable(key, value, "masks (a (B, S) tensor or array, or a list of 1-D masks)")
    return [None if m is None else _sum(m, key) for m in rows]


def _sample_data(torch: Any, value: Any, key: str) -> Any:
    # one sample's data: a tensor, an array, or (nested) lists of numbers
    if isinstance(value, torch.Tensor):
        return value
    if is_array(value) and not _object_array(value):
        return host_data(value, key)
    if isinstance(value, (list, tuple)):
        try:
            return torch.tensor(value)
        except (TypeError, ValueError, RuntimeError):
            pass
    raise unreadable(key, value, "one sample's data (a tensor, an array, or a list of numbers) in each entry")


def host_data(value: Any, key: str) -> Any:
    """Host data as CPU torch tensors (a list of them for per-sample entries), for B6; `Unreadable` if not data.

    A numpy array is shared with torch when it can be (``torch.from_numpy``),
    copied when it is read-only; a list of numbers becomes a tensor. torch
    is imported here: B6 compares with torch.
    """
    try:
        import torch
    except ImportError:
        raise Unreadable(f"`{key}`: its values are compared (B6, a `from` field), which needs torch; install "
                         "torch, or drop `from`") from None
    if isinstance(value, torch.Tensor):
        return value
    if is_array(value) and not _object_array(value):
        try:
            if getattr(getattr(value, "flags", None), "writeable", False):
                return torch.from_numpy(value)
            return torch.tensor(value)
        except (TypeError, RuntimeError) as err:
            raise Unreadable(f"`{key}`: a {describe_value(value, 60)} cannot be compared ({err}); point the "
                             "field at an integer or float array") from None
    rows = entries(value)
    if rows is not None:
        kinds = set(map(type, rows))
        if kinds == {torch.Tensor} or kinds == {torch.Tensor, type(None)}:
            return rows  # per-sample tensors (the usual case): as they are, with no check per entry
        if rows and all(isinstance(v, Real) for v in rows):
            return torch.tensor(rows)  # one sample's values as a list
        return [None if v is None else _sample_data(torch, v, key) for v in rows]
    raise unreadable(key, value, "data (tensors, arrays or lists of numbers)")
