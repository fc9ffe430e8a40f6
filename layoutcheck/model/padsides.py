"""Pad sides: where each padded row's real tokens sit (docs/design.md#layout-spaces-and-bug-classes, class 7).

What the code does decides, never a name:

* ``F.pad(x, (a, b, ...))``: the first pair that pads decides; ``(0, k)`` pads on the right (the
  real tokens stay at the row's start), ``(k, 0)`` on the left;
* ``pad_sequence(xs, padding_side="left")``: left; without the keyword, torch's right;
* a store into a buffer built in the function: ``buf[i, :n] = x`` places on the right,
  ``buf[i, P - n:] = x``, ``buf[i, -n:] = x`` or ``buf[i, off:off + n] = x`` with ``off = P - n``
  on the left;
* a read of a row, ``x[i, :n]`` with a true length ``n``, assumes the right side; ``x[i, -n:]``
  the left.

A placement tags the padded tensor (`Tag.LEFT` / `Tag.RIGHT`, `layoutcheck.model.flow`), which
follows it into the fields it is stored in and out of the functions that return it; each placement
and read is a `PadSide` fact. The project compares the sides each field is placed and read with
(`layoutcheck.model.sides`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from layoutcheck.model.facts import PadSide
from layoutcheck.model.syntax import argument, int_value, keyword, last_name, root_name, same, string_value
from layoutcheck.model.vocabulary import Tag

__all__ = ["SIDE_TAGS", "SidesMixin", "pad_call_side", "side_tag"]

LEFT, RIGHT = int(Tag.LEFT), int(Tag.RIGHT)
SIDE_TAGS = LEFT | RIGHT
_SEQ, _PAD, _SRC, _MAX = int(Tag.SEQ), int(Tag.PAD), int(Tag.SRC), int(Tag.MAX)
_PACKED, _STREAM = int(Tag.PACKED), int(Tag.STREAM)
_PADS = frozenset({"torch.nn.functional.pad", "numpy.pad"})


def side_tag(side: str) -> int:
    return LEFT if side == "left" else RIGHT


def pad_call_side(call: ast.Call, name: str) -> tuple[str, ast.expr | None] | None:
    """``(side, amount)`` of a pad call (``F.pad``, ``numpy.pad``, ``pad_sequence``), else None.

    ``amount`` is the padding added on that side (None for ``pad_sequence``, which pads to the
    longest)."""
    if name in _PADS:
        amount = argument(call, "pad" if name.startswith("torch") else "pad_width", 1)
        if not isinstance(amount, (ast.Tuple, ast.List)):
            return None
        elts = amount.elts
        if name == "numpy.pad":
            if elts and all(isinstance(e, (ast.Tuple, ast.List)) for e in elts):
                pairs = [tuple(e.elts) for e in reversed(elts) if len(e.elts) == 2]  # type: ignore[attr-defined]
            else:
                pairs = [tuple(elts)] if len(elts) == 2 else []
        else:
            pairs = [tuple(elts[i:i + 2]) for i in range(0, len(elts) - 1, 2)]  # last axis first
        for before, after in pairs:
            zero_before, zero_after = int_value(before) == 0, int_value(after) == 0
            if zero_before and zero_after:
                continue
            if zero_before:
                return "right", after
            if zero_after:
                return "left", before
            return None  # both sides (a centred pad): no side
        return None
    if name.rsplit(".", 1)[-1] == "pad_sequence":
        given = keyword(call, "padding_side")
        if given is None:
            return "right", None
        side = string_value(given)
        return (side, None) if side in ("left", "right") else None
    return None


def _row_slice(index: ast.expr, *, row: bool) -> ast.Slice | None:
    """The one partial slice of a subscript's index (``[i, :n]``, ``[0, a:b]``; ``[:n]`` unless
    ``row``: a read must name the row it reads)."""
    elts = index.elts if isinstance(index, ast.Tuple) else [index]
    slices = [e for e in elts if isinstance(e, ast.Slice) and not (e.lower is None and e.upper is None)]
    if len(slices) != 1 or slices[0].step is not None:
        return None
    if row and not any(not isinstance(e, ast.Slice) for e in elts):
        return None
    return slices[0]


def _negated(node: ast.expr | None) -> ast.expr | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and int_value(node.operand) is None:
        return node.operand
    return None


class SidesMixin:
    """The pad-side facts of the per-file walk (mixed into its extractor)."""

    def _from_end(self, lower: ast.expr) -> bool:
        """Is a slice's start counted back from the row's end (``P - n``, ``-n``, a name bound to one)?"""
        for _ in range(3):
            if _negated(lower) is not None:
                return True
            if isinstance(lower, ast.BinOp) and isinstance(lower.op, ast.Sub):
                return int_value(lower.right) is None and not self.classify(lower.left).tags & _PACKED  # type: ignore[attr-defined]
            if isinstance(lower, ast.Name):
                bound = self.bound_expr(lower.id)  # type: ignore[attr-defined]
                if bound is None:
                    return False
                lower = bound
                continue
            return False
        return False

    def _subtrahend(self, node: ast.expr | None) -> ast.expr | None:
        """``b`` of ``a - b``, directly or through a name bound to one."""
        for _ in range(3):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
                return node.right
            if not isinstance(node, ast.Name):
                return None
            node = self.bound_expr(node.id)  # type: ignore[attr-defined]
        return None

    def _rebased(self, lower: ast.expr, upper: ast.expr | None) -> bool:
        """Do both bounds subtract one base (``lo - base``, ``hi - base``)? A copy of a global window
        into a local buffer, not a row's tokens placed at its end."""
        base = self._subtrahend(lower)
        other = self._subtrahend(upper)
        return base is not None and other is not None and same(base, other)

    def _is_true_length(self, node: ast.expr) -> bool:
        tags = self.classify(node).tags  # type: ignore[attr-defined]
        return bool(tags & _SEQ) and not tags & (_PAD | _SRC | _MAX | _PACKED | _STREAM)

    def add_side(self, side: str, act: str, node: ast.AST, extent: tuple[str, ...] = (),
                 fields: frozenset[str] = frozenset(), params: frozenset[str] = frozenset()) -> None:
        text = self.source.snippet(node, 60)  # type: ignore[attr-defined]
        self.facts.sides.append(PadSide(  # type: ignore[attr-defined]
            self.frame.index, side, act, self.source.span(node), text, extent, tuple(sorted(fields)),  # type: ignore[attr-defined]
            tuple(sorted(params)), branch_arms(self.frame.node, node),  # type: ignore[attr-defined]
        ))
        space = f"padded on the {side}" if act == "place" else f"read as padded on the {side}"
        why = "where it puts the real tokens" if act == "place" else "a row read up to a true length"
        self.state.note_space(self.source.snippet(node, 40), space, node.lineno, why)  # type: ignore[attr-defined]

    def pad_call_placed(self, node: ast.Call, name: str) -> None:
        """A pad call that pads one side: a placement, to the length its amount pads to."""
        found = pad_call_side(node, name)
        if found is None:
            return
        side, amount = found
        data = argument(node, "input" if name.startswith("torch") else "array", 0)
        if data is not None and self.classify(data).tags & _PACKED:  # type: ignore[attr-defined]
            return  # `F.pad(cu_seqlens, (1, 0))`: a leading zero, not a row's padding
        extent: tuple[str, ...] = ()
        if amount is not None:
            target = amount.left if isinstance(amount, ast.BinOp) and isinstance(amount.op, ast.Sub) else amount
            extent = (self.source.segment(target),)  # type: ignore[attr-defined]
        self.add_side(side, "place", node, extent)

    def row_segments(self, node: ast.Call) -> None:
        """``torch.cat([prompts, responses], dim=-1)``: tensors joined along their rows are segments of
        one row, not partners (a ``join``: the names in order, for `Sides` to read with the sides)."""
        parts = node.args[0] if node.args else None
        dim = keyword(node, "dim")
        if dim is None and len(node.args) > 1:
            dim = node.args[1]
        if not isinstance(parts, (ast.List, ast.Tuple)) or int_value(dim) not in (1, -1):
            return
        names = [p.id for p in parts.elts if isinstance(p, ast.Name)]
        if len(names) == len(parts.elts) >= 2:
            self.facts.sides.append(PadSide(  # type: ignore[attr-defined]
                self.frame.index, "", "join", self.source.span(node), self.source.snippet(node, 60),  # type: ignore[attr-defined]
                (), tuple(names),
            ))

    def stored_side(self, target: ast.Subscript, value: ast.expr,
                    rebind: Callable[[str, int], None]) -> None:
        """``buf[i, :n] = x`` / ``buf[i, P - n:] = x`` into a buffer built here: a placement, and the
        buffer is padded on that side from now on (``rebind``)."""
        root = root_name(target)
        if root is None or root not in self.frame.fresh or isinstance(target.value, ast.Subscript):  # type: ignore[attr-defined]
            return
        if isinstance(value, ast.Constant) and value.value not in (1, True):
            return  # a fill of the padding itself
        if self.classify(value).tags & _PACKED:  # type: ignore[attr-defined]
            return
        part = _row_slice(target.slice, row=False)
        if part is None:
            return
        if part.lower is None or int_value(part.lower) == 0:
            side = "right" if part.upper is not None else None
        elif self._rebased(part.lower, part.upper):
            side = None  # `buf[lo - base:hi - base]`: a window moved into local coordinates, no side
        else:
            side = "left" if self._from_end(part.lower) else None
        if side is None:
            return
        self.add_side(side, "place", target, self._extent(root))
        rebind(root, side_tag(side))

    def _extent(self, buffer: str) -> tuple[str, ...]:
        """The sizes a buffer was built with (``torch.zeros(1, seq_len, k)``: ``seq_len``, ``k``)."""
        bound = self.bound_expr(buffer)  # type: ignore[attr-defined]
        if not isinstance(bound, ast.Call):
            return ()
        sizes: list[ast.expr] = []
        for arg in bound.args:
            sizes.extend(arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg])
        return tuple(sorted({self.source.segment(s) for s in sizes if int_value(s) is None}))  # type: ignore[attr-defined]

    def read_side(self, node: ast.Subscript) -> None:
        """``x[i, :n]`` (or ``x[i, -n:]``) with a true length ``n`` of a tensor the project can name."""
        part = _row_slice(node.slice, row=True)
        if part is None:
            return
        if part.lower is None and part.upper is not None and self._is_true_length(part.upper):
            side = "right"
        else:
            n = _negated(part.lower) if part.upper is None else None
            if n is None or not self._is_true_length(n):
                return
            side = "left"
        base = self.classify(node.value)  # type: ignore[attr-defined]
        params = base.params if isinstance(node.value, ast.Name) or last_name(node.value) else frozenset()
        if base.fields or params:
            self.add_side(side, "read", node, (), base.fields, params)


def branch_arms(function: ast.AST | None, target: ast.AST) -> tuple[str, ...]:
    """The arms of the ``if`` statements of ``function`` that hold ``target`` (`PadSide.arms`), outermost
    first; an ``elif`` is an ``if`` in the ``else`` arm. Searched only for the rare placement."""
    if function is None:
        return ()
    line = getattr(target, "lineno", None)
    if line is None:
        return ()

    def search(statements: list[ast.stmt], path: tuple[str, ...]) -> tuple[str, ...] | None:
        for statement in statements:
            end = getattr(statement, "end_lineno", statement.lineno)
            if not statement.lineno <= line <= end:
                continue
            if isinstance(statement, ast.If):
                where = f"{statement.lineno}:{statement.col_offset}"
                for arm, body in (("body", statement.body), ("else", statement.orelse)):
                    found = search(body, (*path, f"{where}:{arm}"))
                    if found is not None:
                        return found
                return path
            for child in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(statement, child, None)
                if isinstance(inner, list) and inner:
                    blocks = inner if child != "handlers" else [s for h in inner for s in h.body]
                    found = search(blocks, path)
                    if found is not None:
                        return found
            return path
        return None

    body = getattr(function, "body", None)
    return (search(body, ()) or ()) if isinstance(body, list) else ()
