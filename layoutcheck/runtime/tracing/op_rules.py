"""The tracer's op rules: what each torch op does to tags, and what it is checked for.

Each rule reads an op's arguments before it runs (with torch-function
handling off: shapes and Python ints only), hands tags and shapes to the
pure rules of `layoutcheck.runtime.tracing.propagation` (lengths) and
`layoutcheck.runtime.tracing.space_rules` (spaces), reports what they find
through the mode (``mode.flag``) and returns an `After` that tags the op's
output. `RULES` maps each torch function to its rule, `NAMES` to the name
messages use; `OPERANDS` says which arguments of an op with several tensor
operands may carry a tag (the mode's fast path looks only there).

Ops and what they do:

* layout ops (indexing, ``narrow``, ``split``/``chunk``/``unbind``, ``cat``/
  ``stack``, ``F.pad``, views, dtype and device moves) carry the tag as
  `propagation` says, and a one-position slice or a ``roll`` moves its
  shift (`space_rules.slice_problems`, `space_rules.roll`);
* elementwise ops (arithmetic, comparisons, ``where``, ``masked_fill``,
  ``minimum``/``maximum``, ``*_like``), ``gather``, ``index_select`` and the
  losses of ``torch.nn.functional`` check their tagged operands as partners
  (S3) and index-valued ones as positions (S4), and tag the result like the
  operand it is shaped like.

Every other op is untouched and its result untagged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import torch
import torch.nn.functional as functional

from layoutcheck.errors import Violation
from layoutcheck.runtime.tracing import propagation, space_rules
from layoutcheck.runtime.tracing.tags import Tag, geometry_of
from layoutcheck.runtime.tracing.tags import set_tag as tag

__all__ = ["JOINS", "NAMES", "OPERANDS", "RULES", "After", "Mode", "Rule"]

After = Callable[[Any], None]
"""What a rule does once the op has run: tag its output."""


class Mode(Protocol):
    """What a rule needs of the tracer's mode: its tracer's settings, and where to report."""

    tracer: Any

    def flag(self, violations: list[Violation], func: Any) -> None: ...


Rule = Callable[[Mode, Any, tuple[Any, ...], dict[str, Any]], "After | None"]
"""Runs before the op (torch-function handling off): reads tags and shapes, flags, returns an `After`."""


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str, default: Any = None) -> Any:
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _shape(x: Any) -> tuple[int, ...] | None:
    shape = getattr(x, "shape", None)
    return None if shape is None else tuple(shape)


def _tag_output(new: Tag | None) -> After | None:
    if new is None:
        return None
    return lambda out: tag(out, new)


def _same_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    # to/contiguous/clone/detach and dtype casts (same shape); view/reshape/... (`reshape=True`)
    x = _arg(args, kwargs, 0, "input")
    g = geometry_of(x)
    if g is None:
        return None
    in_shape = _shape(x)
    reshape = func in _RESHAPES

    def after(out: Any) -> None:
        if out is x:
            return
        out_shape = _shape(out)
        if in_shape is not None and out_shape is not None:
            new = propagation.reshape(g, in_shape, out_shape) if reshape else propagation.same(g, in_shape, out_shape)
            if new is not None:
                tag(out, new)

    return after


def _narrow_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    x = _arg(args, kwargs, 0, "input")
    g = geometry_of(x)
    if g is None:
        return None
    dim, start, length = (_arg(args, kwargs, i, n) for i, n in ((1, "dim"), (2, "start"), (3, "length")))
    shape = _shape(x)
    if not shape or not all(type(v) is int for v in (dim, start, length)) or not -len(shape) <= dim < len(shape):
        return None
    d = dim % len(shape)
    if start < 0:
        start += shape[d]
    new, problems = propagation.index(g, shape, (slice(None),) * d + (slice(start, start + length),))
    mode.flag(problems, func)
    return _tag_output(new)


def _pieces_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    # split / chunk / unbind: pieces along one dimension, read from the outputs.
    x = _arg(args, kwargs, 0, "input")
    g = geometry_of(x)
    if g is None:
        return None
    unbind = func in _UNBIND
    dim = _arg(args, kwargs, 1 if unbind else 2, "dim", 0)
    shape = _shape(x)
    if type(dim) is not int or not shape or not -len(shape) <= dim < len(shape):
        return None
    d = dim % len(shape)
    sections = _arg(args, kwargs, 1, "split_size_or_sections", kwargs.get("split_size"))
    if func in _SPLITS and isinstance(sections, (list, tuple)) and all(type(n) is int for n in sections):
        # explicit sizes: judged before the op runs (raise mode stops at it)
        tags, problems = propagation.split(g, shape, d, list(sections), explicit=True)
        mode.flag(problems, func)
        return lambda out: _tag_pieces(out, tags)

    def after(out: Any) -> None:
        if not isinstance(out, (tuple, list)):
            return
        if unbind:
            tags = [propagation.index(g, shape, (slice(None),) * d + (i,))[0] for i in range(len(out))]
        else:
            sizes = [(_shape(piece) or (0,) * (d + 1))[d] for piece in out]
            tags, _ = propagation.split(g, shape, d, sizes, explicit=False)
        _tag_pieces(out, tags)

    return after


def _tag_pieces(out: Any, tags: list[Tag | None]) -> None:
    if isinstance(out, (tuple, list)):
        for piece, t in zip(out, tags):
            if t is not None:
                tag(piece, t)


def _join_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    tensors = _arg(args, kwargs, 0, "tensors")
    if not isinstance(tensors, (list, tuple)):
        return None
    tags = [geometry_of(t) for t in tensors]
    if not any(tags):
        return None
    dim = _arg(args, kwargs, 1, "dim", kwargs.get("axis", 0))
    if type(dim) is not int:
        return None
    shapes = [_shape(t) for t in tensors]
    if any(s is None for s in shapes):
        return None
    tracer = mode.tracer
    new, problems = propagation.join(tags, shapes, dim, stack=func in _STACKS,  # type: ignore[arg-type]
                                     stream_multiple=tracer.stream_multiple, per_sample=tracer.per_sample)
    mode.flag(problems, func)
    return _tag_output(new)


def _pad_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    x = _arg(args, kwargs, 0, "input")
    g = geometry_of(x)
    if g is None:
        return None
    amounts = _arg(args, kwargs, 1, "pad")
    shape = _shape(x)
    if not isinstance(amounts, (list, tuple)) or shape is None:
        return None
    tracer = mode.tracer
    new, problems = propagation.pad(g, shape, amounts, stream_multiple=tracer.stream_multiple,
                                    per_sample=tracer.per_sample)
    mode.flag(problems, func)
    return _tag_output(new)


def _operands(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    names = _OPERAND_NAMES.get(func, ("input", "other"))
    return [_arg(args, kwargs, i, name) for i, name in zip(OPERANDS[func], names)]


def _elementwise_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    # arithmetic, comparisons, where, masked_fill, minimum/maximum: partners must share their spaces (S3)
    operands = _operands(func, args, kwargs)
    tags = [geometry_of(x) for x in operands]
    shapes = [_shape(x) if t is not None else None for x, t in zip(operands, tags)]
    keeps = func in _KEEPS_POSITIONS
    tagged = [i for i, t in enumerate(tags) if t is not None]
    if len(tagged) == 1:  # one tagged operand beside a number or an untagged tensor: no partners (a hot path)
        t, shape = tags[tagged[0]], shapes[tagged[0]]
        own = t if keeps or t.positions is None else t.evolve(positions=None)

        def alone(out: Any) -> None:
            out_shape = _shape(out)
            if out_shape == shape:
                if geometry_of(out) is None:
                    tag(out, own)
            elif out_shape is not None:
                new = space_rules.elementwise(tags, shapes, out_shape, keeps_positions=keeps)
                if new is not None and geometry_of(out) is None:
                    tag(out, new)

        return alone
    mode.flag(space_rules.partner_problems(NAMES.get(func, "op"), tags, shapes), func)

    def after(out: Any) -> None:
        out_shape = _shape(out)
        if out_shape is not None:
            new = space_rules.elementwise(tags, shapes, out_shape, keeps_positions=keeps)
            if new is not None and geometry_of(out) is None:
                tag(out, new)

    return after


def _like_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    # zeros_like / ones_like / full_like: a new tensor laid out like its input (values aside)
    g = geometry_of(_arg(args, kwargs, 0, "input"))
    if g is None:
        return None
    return _tag_output(g.evolve(positions=None) if g.positions else g)


def _roll_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    x = _arg(args, kwargs, 0, "input")
    g = geometry_of(x)
    shape = _shape(x)
    if g is None or not shape or g.seq_dim >= len(shape):
        return None
    shifts, dims = _arg(args, kwargs, 1, "shifts"), _arg(args, kwargs, 2, "dims")
    if dims is None:
        if len(shape) != 1:
            return None  # a roll of the flattened tensor: positions mixed with the batch
        dims = 0
    shifts = shifts if isinstance(shifts, (tuple, list)) else (shifts,)
    dims = dims if isinstance(dims, (tuple, list)) else (dims,)
    if len(shifts) != len(dims) or not all(type(v) is int for v in (*shifts, *dims)):
        return None
    amount = sum(k for k, d in zip(shifts, dims) if -len(shape) <= d < len(shape) and d % len(shape) == g.seq_dim)
    size = shape[g.seq_dim]
    amount %= max(size, 1)
    if amount == 0:
        return _tag_output(g)
    if amount > size // 2:
        amount -= size  # roll(x, size - 1) is roll(x, -1)
    shift, problems = space_rules.roll(g, size, amount)
    mode.flag(problems, func)
    return _tag_output(None if shift is None else g.evolve(shift=shift, window=None))


def _gather_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    # gather(input, dim, index): along the sequence the index holds positions (S4);
    # along another dimension input and index are partners (S3). The output is laid out like the index.
    x, dim, index = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "dim"), _arg(args, kwargs, 2, "index")
    g, i = geometry_of(x), geometry_of(index)
    shape, index_shape = _shape(x), _shape(index)
    if type(dim) is not int or not shape or index_shape is None:
        return None
    d = dim % len(shape)
    if g is not None and d == g.seq_dim:
        if i is not None:
            mode.flag(space_rules.position_index(g, i, shape[d]), func)
        new = None if i is None else i.evolve(positions=None)
    else:
        mode.flag(space_rules.partner_problems(NAMES.get(func, "gather"), [g, i], [shape, index_shape]), func)
        new = i if i is not None else (g if g is not None and index_shape[g.seq_dim:g.seq_dim + 1] ==
                                        shape[g.seq_dim:g.seq_dim + 1] else None)
    return _tag_output(new)


def _index_select_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    x, dim, index = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "dim"), _arg(args, kwargs, 2, "index")
    g, i = geometry_of(x), geometry_of(index)
    shape = _shape(x)
    if g is None or type(dim) is not int or not shape:
        return None
    d = dim % len(shape)
    if d == g.seq_dim:
        if i is not None:
            mode.flag(space_rules.position_index(g, i, shape[d]), func)
        return None  # positions picked from the sequence: no longer its layout
    return _tag_output(g.evolve(samples=()) if d == 0 and g.samples else g)


def _loss_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    # a loss of input against target: partners when both are tagged and line up (S3); with
    # reduction="none" the result is laid out like the target
    x, target = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "target")
    g, t = geometry_of(x), geometry_of(target)
    shape, target_shape = _shape(x), _shape(target)
    if g is not None and t is not None and shape is not None and target_shape is not None \
            and len(shape) == len(target_shape):
        mode.flag(space_rules.partner_problems(NAMES.get(func, "loss"), [g, t], [shape, target_shape]), func)
    if kwargs.get("reduction", "mean") != "none":
        return None

    def after(out: Any) -> None:
        out_shape = _shape(out)
        for source, source_shape in ((t, target_shape), (g, shape)):
            if source is not None and out_shape == source_shape:
                tag(out, source)
                return

    return after


def _getitem_rule(mode: Mode, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> After | None:
    x = args[0]
    g = geometry_of(x)
    if g is None:
        return None
    shape = _shape(x)
    if shape is None:
        return None
    idx = args[1]
    positions = None if type(idx) is slice or type(idx) is int else _position_item(g, idx)
    if positions is not None:  # a tensor of positions along the sequence (advanced indexing): S4
        mode.flag(space_rules.position_index(g, positions, shape[g.seq_dim]), func)
        return None
    new, problems = propagation.index(g, shape, idx)
    mode.flag(problems, func)
    return _tag_output(new)


def _position_item(g: Tag, idx: Any) -> Tag | None:
    # The tag of a tensor used as the index of the sequence dimension (x[pos], x[:, pos]), if it has one
    items = idx if type(idx) is tuple else (idx,)
    dim = 0
    for item in items:
        if type(item) is int or type(item) is slice:
            dim += 1
        elif item is None or item is Ellipsis:
            return None  # the dimension count is not worth following here
        else:
            t = geometry_of(item)
            return t if dim == g.seq_dim and t is not None and t.positions is not None else None
    return None


def _build() -> tuple[dict[Any, Rule], dict[Any, str], dict[Any, tuple[int, ...]]]:
    rules: dict[Any, Rule] = {}
    names: dict[Any, str] = {}
    operands: dict[Any, tuple[int, ...]] = {}

    def add(rule: Rule, owner: Any, prefix: str, *attrs: str, at: tuple[int, ...] | None = None) -> None:
        for attr in attrs:
            func = getattr(owner, attr, None)
            if func is not None:
                rules[func] = rule
                names[func] = f"{prefix}.{attr}"
                if at is not None:
                    operands[func] = at

    T = torch.Tensor
    same = ("to", "contiguous", "clone", "detach", "float", "double", "half", "bfloat16", "long", "int",
            "short", "bool", "cuda", "cpu", "type", "type_as", "pin_memory", "neg", "abs", "exp", "log",
            "logical_not", "__invert__")
    add(_same_rule, T, "Tensor", *same)
    add(_same_rule, torch, "torch", "clone", "detach", "neg", "abs", "exp", "log", "logical_not")
    reshapes = ("view", "reshape", "flatten", "unsqueeze", "squeeze", "view_as", "reshape_as")
    add(_same_rule, T, "Tensor", *reshapes)
    add(_same_rule, torch, "torch", "reshape", "flatten", "unsqueeze", "squeeze")
    add(_getitem_rule, T, "Tensor", "__getitem__")
    add(_narrow_rule, T, "Tensor", "narrow")
    add(_narrow_rule, torch, "torch", "narrow")
    add(_pieces_rule, T, "Tensor", "split", "chunk", "unbind")
    add(_pieces_rule, torch, "torch", "split", "chunk", "unbind")
    add(_join_rule, torch, "torch", "cat", "concat", "concatenate", "stack")
    add(_roll_rule, T, "Tensor", "roll")
    add(_roll_rule, torch, "torch", "roll")
    binary = ("mul", "add", "sub", "div", "true_divide", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
              "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "minimum", "maximum")
    dunders = ("__eq__", "__ne__", "__and__", "__or__", "__xor__", "__rsub__", "__rtruediv__", "__rdiv__")
    add(_elementwise_rule, T, "Tensor", *binary, *dunders, "masked_fill", at=(0, 1))
    add(_elementwise_rule, torch, "torch", *binary, "masked_fill", at=(0, 1))
    add(_elementwise_rule, T, "Tensor", "where", at=(0, 1, 2))
    add(_elementwise_rule, torch, "torch", "where", at=(0, 1, 2))
    add(_like_rule, torch, "torch", "zeros_like", "ones_like", "full_like", "empty_like")
    add(_gather_rule, T, "Tensor", "gather", at=(0, 2))
    add(_gather_rule, torch, "torch", "gather", at=(0, 2))
    add(_index_select_rule, T, "Tensor", "index_select", at=(0, 2))
    add(_index_select_rule, torch, "torch", "index_select", at=(0, 2))
    losses = ("cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
              "mse_loss", "l1_loss", "smooth_l1_loss")
    add(_loss_rule, functional, "F", *losses, at=(0, 1))
    rules[functional.pad] = _pad_rule
    names[functional.pad] = "F.pad"
    names[T.__getitem__] = "indexing (Tensor.__getitem__)"
    return rules, names, operands


RULES, NAMES, OPERANDS = _build()
JOINS = frozenset(f for f, rule in RULES.items() if rule is _join_rule)
_STACKS = frozenset({torch.stack})
_RESHAPES = frozenset(
    f for f in (*(getattr(torch.Tensor, n) for n in ("view", "reshape", "flatten", "unsqueeze", "squeeze",
                                                     "view_as", "reshape_as")),
                torch.reshape, torch.flatten, torch.unsqueeze, torch.squeeze)
)
_UNBIND = frozenset({torch.Tensor.unbind, torch.unbind})
_SPLITS = frozenset({torch.Tensor.split, torch.split})
_KEEPS_POSITIONS = frozenset(f for name in ("where", "masked_fill", "minimum", "maximum")
                             for f in (getattr(torch.Tensor, name), getattr(torch, name)))
_OPERAND_NAMES: dict[Any, tuple[str, ...]] = {
    **{getattr(owner, "where"): ("condition", "input", "other") for owner in (torch, torch.Tensor)},
    **{getattr(owner, name): ("input", "dim", "index") for owner in (torch, torch.Tensor)
       for name in ("gather", "index_select") if hasattr(owner, name)},
    **{getattr(functional, name): ("input", "target") for name in ("cross_entropy", "nll_loss",
                                                                   "binary_cross_entropy",
                                                                   "binary_cross_entropy_with_logits", "kl_div",
                                                                   "mse_loss", "l1_loss", "smooth_l1_loss")},
}
"""Keyword names of the operands, in the order of `OPERANDS` (default ``input``, ``other``)."""
