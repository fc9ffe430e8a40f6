"""Metadata access for the runtime checks: shapes and sizes, never values.

Every check reads tensors through these helpers, and only inside
`metadata_only()` (defined in `layoutcheck.errors`, which formats values with
it too), which switches torch-function handling off: an active
``TorchFunctionMode`` (the tracer's, a profiler's) or a tensor subclass would
otherwise see ``.shape`` and ``.size()`` (docs/development.md#what-the-runtime-is-built-on). Nothing here
calls ``.item()``, ``.tolist()``, ``.cpu()``, ``.numpy()`` or ``bool()`` on a
tensor: reading a shape never synchronises a GPU.

torch is never imported here. If it is not in ``sys.modules`` no tensor can
exist, so there is nothing to switch off. Values are duck-typed: a torch
tensor and a numpy array both have ``.shape``; a Python list or tuple counts
its entries.

A future tracer (tags on tensors, docs/development.md#what-the-runtime-is-built-on) plugs in beside this
module: the checks take plain ints and shapes, so a tag lookup can supply the
same arguments without any check changing.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

from layoutcheck.errors import metadata_only

__all__ = ["compiling", "count", "metadata_only", "numel", "shape_of"]

Shape = tuple[int, ...]


def shape_of(value: object) -> Shape | None:
    """The shape of an array-like, ``(len,)`` for a list or tuple, ``None`` otherwise.

    Call inside `metadata_only()` for tensors. Only the outer length of a
    nested list is read: a check never walks values.
    """
    shape = getattr(value, "shape", None)
    if shape is not None:
        return tuple(shape)
    if isinstance(value, (list, tuple)):
        return (len(value),)
    return None


def count(value: object) -> int | None:
    """Entries along the first dimension (``len`` semantics); ``None`` for scalars and 0-d arrays."""
    shape = getattr(value, "shape", None)  # shape_of without the copy: every per-sample field is counted
    if shape is not None:
        return int(shape[0]) if len(shape) else None
    return len(value) if isinstance(value, (list, tuple)) else None


def numel(value: object) -> int | None:
    """Total number of elements (product of the shape); ``None`` when unknown."""
    shape = shape_of(value)
    return None if shape is None else int(math.prod(shape))


_IS_COMPILING: list[Callable[[], bool]] = []
"""``torch.compiler.is_compiling``, once torch is imported (asked on every hooked call)."""


def compiling() -> bool:
    """Whether ``torch.compile`` is tracing now (``False`` while torch is not imported; never imports it).

    The hooks and the tags do nothing then: they belong at eager boundaries,
    and a weakref or a Python-side check would break the graph.
    """
    if not _IS_COMPILING:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        _IS_COMPILING.append(torch.compiler.is_compiling)
    return _IS_COMPILING[0]()
