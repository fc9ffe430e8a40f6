"""Next-token shifts, mask selections and where a shifted value came from, read from syntax.

A language model's logit at position ``t`` predicts the token at ``t + 1``, so
trainers shift: the targets drop their first position (``labels[:, 1:]``,
``torch.roll(ids, -1)``), the predictions their last (``logits[:, :-1]``). Every
field that is aligned with the targets must be shifted the same way; a shift
applied twice, or two partners shifted opposite ways, misaligns them by one
token with no error (docs/design.md#layout-spaces-and-bug-classes, classes 4 and 5).

* `shift_kind`: ``"first"`` for a slice dropping the first position of an axis
  (``[1:]``, ``[:, 1:]``, ``[..., 1:, :]``), ``"last"`` for one dropping the last
  (``[:-1]``), None otherwise;
* `data_side`: ``"data"`` when the sliced value is read from a field or a
  parameter (through locals and conversions: the batch's own tensors),
  ``"model"`` when it is what a call computed (a model's logits);
* `is_mask_selection`: ``x[mask]``, ``x[i, mask[i]]``: exactly a sample's true tokens;
* `rolls_left`: ``torch.roll(x, -1)``, ``x.roll(shifts=-1)``: the targets' shift;
  `rolled_left`: the ``x`` such a call rolls.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from layoutcheck.model.imports import Imports
from layoutcheck.model.syntax import int_value, keyword, last_name, positional

__all__ = ["data_side", "is_mask_selection", "rolled_left", "rolls_left", "shift_kind", "shift_root"]

_PASS = frozenset({
    "to", "cuda", "cpu", "contiguous", "clone", "detach", "float", "long", "int", "bool", "view", "reshape",
    "flatten", "squeeze", "unsqueeze", "type_as",
})
_READS = frozenset({"pop", "get"})


def _axis_shift(part: ast.AST) -> str | None:
    if not isinstance(part, ast.Slice) or part.step is not None:
        return None
    if part.upper is None and int_value(part.lower) == 1:
        return "first"
    if part.lower is None and int_value(part.upper) == -1:
        return "last"
    return None


def _whole(part: ast.AST) -> bool:
    """``:`` or ``...``: an axis the index leaves alone."""
    if isinstance(part, ast.Constant) and part.value is Ellipsis:
        return True
    return isinstance(part, ast.Slice) and part.lower is None and part.upper is None and part.step is None


def shift_kind(index: ast.AST) -> str | None:
    """The next-token shift an index applies: exactly one axis cut by one position, the rest whole."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    kinds = [_axis_shift(p) for p in parts]
    shifted = [k for k in kinds if k is not None]
    if len(shifted) != 1:
        return None
    if not all(k is not None or _whole(p) for k, p in zip(kinds, parts)):
        return None
    return shifted[0]


def data_side(node: ast.AST, bound: Callable[[str], ast.expr | None], imports: Imports, depth: int = 0) -> str:
    """``data`` when ``node`` is read from a field or a parameter, ``model`` when a call computed it."""
    while depth < 6:
        depth += 1
        if isinstance(node, ast.Name):
            expr = bound(node.id)
            if expr is None:
                return "data"  # a parameter, or a name bound by a loop over data
            node = expr
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Call):
                return "model"  # `model(...).logits`
            node = node.value
        elif isinstance(node, ast.Call):
            func = node.func
            tail = last_name(func) or ""
            if isinstance(func, ast.Attribute) and (tail in _PASS or tail in _READS):
                node = func.value
            elif (imports.qualify(func) or "").startswith("torch.") and tail in ("as_tensor", "tensor"):
                args = positional(node)
                if not args:
                    return "model"
                node = args[0]
            else:
                return "model"
        else:
            return "data"
    return "data"


def shift_root(node: ast.AST, bound: Callable[[str], ast.expr | None]) -> str:
    """What a shifted value is, for telling two values apart: the field it was read from
    (``batch["loss_mask"]``, ``batch.pop("loss_mask")``: ``loss_mask``), else the local it was
    read through (``cu`` of ``cu[1:] - cu[:-1]``: one value shifted both ways)."""
    first: str | None = None
    for _ in range(6):
        if isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return key.value
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            args = positional(node)
            if node.func.attr in _READS and args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                return args[0].value
            if node.func.attr not in _PASS:
                break
            node = node.func.value
        elif isinstance(node, ast.Attribute):
            return node.attr
        elif isinstance(node, ast.Name):
            first = first or node.id
            expr = bound(node.id)
            if expr is None:
                break
            node = expr
        else:
            break
    return first or ""


def is_mask_selection(node: ast.Subscript,
                      resolve: Callable[[ast.expr], ast.expr | None] | None = None) -> bool:
    """``x[i, mask[i]]`` (a row's masked positions) or ``x[mask.bool()]`` / ``x[mask == 1]``; with
    ``resolve``, an index held in a local (``m = mask[i]`` then ``x[i, m]``) is read as its value."""
    index = node.slice
    if resolve is not None and not isinstance(index, ast.Tuple):
        index = resolve(index) or index
    if isinstance(index, ast.Tuple) and len(index.elts) == 2:
        row, mask = index.elts
        if resolve is not None:
            mask = resolve(mask) or mask
        if isinstance(row, ast.Name) and isinstance(mask, ast.Subscript) and isinstance(mask.slice, ast.Name):
            return mask.slice.id == row.id and isinstance(mask.value, (ast.Name, ast.Attribute, ast.Subscript))
        return False
    if isinstance(index, ast.Call) and isinstance(index.func, ast.Attribute) and index.func.attr == "bool":
        return True
    if isinstance(index, ast.Compare) and len(index.ops) == 1 and isinstance(index.ops[0], (ast.Eq, ast.Gt)):
        return int_value(index.comparators[0]) in (0, 1)
    return False


def rolls_left(node: ast.Call) -> bool:
    """``torch.roll(x, -1)`` / ``x.roll(-1, dims=...)`` / ``shifts=-1``: position ``t`` gets ``t + 1``."""
    args = positional(node)
    amount = keyword(node, "shifts")
    if amount is None:
        method = isinstance(node.func, ast.Attribute) and not isinstance(node.func.value, ast.Name) or (
            isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id not in ("torch", "np", "numpy")
        )
        amount = args[0] if method and args else (args[1] if len(args) > 1 else None)
    return int_value(amount) == -1


def rolled_left(node: ast.AST) -> ast.expr | None:
    """What ``torch.roll(x, -1)`` or ``x.roll(-1)`` rolls left (position ``t`` gets ``t + 1``), else None."""
    if not (isinstance(node, ast.Call) and last_name(node.func) == "roll" and rolls_left(node)):
        return None
    func = node.func
    if isinstance(func, ast.Name) or isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id == "torch":
        args = positional(node)
        return args[0] if args else None
    return func.value if isinstance(func, ast.Attribute) else None
