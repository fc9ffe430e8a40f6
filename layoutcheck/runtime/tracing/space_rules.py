"""The tracer's space rules: bugs that keep every shape intact, seen from the tags' layout spaces.

Pure Python over `Tag` values, shapes and the ops' integer arguments, like
`layoutcheck.runtime.tracing.propagation` (whose rules judge lengths). Each
rule names a part of the layout space (`layoutcheck.spaces`) that two tensors,
or a tensor and an op, disagree on; none of them changes a shape, so no
check at a function boundary sees them (docs/design.md#layout-spaces-and-bug-classes, classes 3-7):

==== ===============================================================================
S1   a CP slice of a tensor that is already CP-local (its positions would be cut
     into chunks a second time: half of each chunk becomes pad, the length stays)
S2   a one-position shift (``x[1:]``, ``roll(x, +-1)``) of a CP-local tensor along
     its sequence, which crosses the rank's chunk boundaries; or of a tensor
     already shifted (the transform applied twice)
S3   partners (tensors of the same samples, on the same positions) that meet in
     an elementwise op, a ``gather``, an index or a loss with different shifts,
     pad sides or CP coordinates (scheme, rank, sliced or not)
S4   positions of one space used in the other: a negative index (``x[-1]``) into a
     CP-local sequence (the rank's last position, not the sequence's); global
     position ids indexing a CP-local tensor, or local ones an unsliced tensor;
     slice bounds computed as positions that went negative (``x[a - p : b - p]``)
     and wrap around to the end
S5   a slice of unpadded (``T``-long) data with bounds of its padded layout
     (``P``): PyTorch cuts it short without an error
==== ===============================================================================

A rule returns violations with ``where`` left empty: the tracer fills in
the op and the user's source line. What they cannot see: values (a position
computed with the wrong offset but in range, an index tensor whose values
are wrong), a shift written as anything but a one-position slice or roll, a
conversion between global and local positions done with arithmetic (the
tracer forgets whether positions are global once they are shifted by a
number), and tensors that carry no tag (the model's output, unless a
boundary contract tags it).
"""

from __future__ import annotations

from collections.abc import Sequence

from layoutcheck.errors import Violation
from layoutcheck.runtime.tracing.findings import violation
from layoutcheck.runtime.tracing.tags import Tag

__all__ = [
    "HINTS",
    "broadcast_seq_dim",
    "cp_again",
    "elementwise",
    "may_matter",
    "negative_index",
    "partner_problems",
    "position_index",
    "roll",
    "slice_problems",
]

Shape = tuple[int, ...]

HINTS = {
    "S1": "slice each sample for CP once, from its unsliced positions; a tensor the batch builder (or a CP "
    "helper) already returned CP-local is used as it is",
    "S2": "shift (or roll) the whole sequence before the CP split, then slice the shifted tensor as the tokens "
    "are sliced; and shift each tensor once",
    "S3": "lay partners out alike: shift, pad and CP-slice every tensor of a sample in the same way before they "
    "meet",
    "S4": "index a CP-local tensor with positions in the rank's part (or convert global positions with the "
    "rank's chunk offsets, clamped to the data), and an unsliced tensor with global positions",
    "S5": "pad the data to its layout length before cutting it at layout offsets, or clamp the bounds to the "
    "data's own length",
}


def _cp(tag: Tag) -> str:
    # the CP coordinates as messages say them
    if not tag.cp_local:
        return "unsliced"
    rank = "" if tag.cp_rank is None else f" rank {tag.cp_rank}"
    return f"{tag.scheme}{rank} of {tag.cp_size}"


def _described(tag: Tag, size: int | None = None) -> str:
    return f"{tag.describe()} [{tag.layout_space(size).describe()}]"


# --- S1: CP-sliced again ---------------------------------------------------------------------


def cp_again(tag: Tag, size: int, *, action: str, given: str) -> Violation:
    """S1: ``tag``'s tensor (``size`` positions, CP-local) is being CP-sliced (or laid out for it) again."""
    problem = (f"{action} {_described(tag, size)} {given}, but it is already CP-local ({_cp(tag)}, L={tag.local}): "
               f"cut into CP chunks a second time, half of each chunk becomes pad and the length stays the same")
    return violation("S1", tag, problem, actual=f"a CP slice of a tensor of {size} local positions",
                     expected="one CP slice per sample, from its unsliced positions", hint=HINTS["S1"])


# --- slices along the sequence: S2 (shift), S4 (wrapping bounds), S5 (past the end of T) ---------


def may_matter(item: slice, size: int) -> bool:
    """Whether `slice_problems` can say anything of ``item`` on an axis of ``size`` (a cheap test: a hot path)."""
    start, stop = item.start, item.stop
    return start is not None and (start == 1 or start < 0 or (stop is not None and stop > size))


def slice_problems(tag: Tag, size: int, item: slice) -> tuple[int | None, list[Violation]]:
    """``x[item]`` along ``tag``'s sequence (``size`` long): ``(the output's shift, or None if unchanged, violations)``.

    A one-position shift is ``x[1:]``: it moves the axis by one (S2 when the
    tensor is CP-local, or already shifted). Wrapping bounds (a negative
    start with an explicit stop that reads data) are S4; explicit bounds of
    the padded layout on unpadded data are S5.
    """
    start, stop, step = item.start, item.stop, item.step
    if step not in (None, 1):
        return None, []
    problems: list[Violation] = []
    if type(start) is int and type(stop) is int and start < 0 and _wraps(start, stop):
        problems.append(violation(
            "S4", tag, f"slices [{start}:{stop}) of {_described(tag, size)}: a negative start with an explicit stop "
            f"wraps around to the end (bounds computed as positions in another space, such as the whole "
            f"sequence minus an offset, went negative)",
            actual=f"[{start}:{stop})", expected=f"bounds within [0, {size}), clamped at 0", hint=HINTS["S4"],
        ))
    if type(start) is int and type(stop) is int and 0 <= start and stop > size:
        problems += _past_t(tag, size, start, stop)
    shifts = start == 1 and (stop is None or stop == size) and size >= 2
    if not shifts:
        return None, problems
    if tag.cp_local:
        problems.append(_shift_of_local(tag, size, "shifts (x[1:])"))
    elif tag.shift:
        problems.append(_shifted_twice(tag, size, "shifts (x[1:])"))
    return tag.shift + 1 if abs(tag.shift + 1) <= 1 else None, problems


def _wraps(start: int, stop: int) -> bool:
    # x[-k:m] with m > 0 mixes a from-the-end start with a from-the-start stop; x[-k:-j] (k > j) reads the
    # end. x[-k:0] and x[-k:-k] read nothing, as the data there would be (an empty part).
    return stop > 0 or start < stop < 0


def _past_t(tag: Tag, size: int, start: int, stop: int) -> list[Violation]:
    # S5: unpadded data (T tokens, or T - 1 replay rows) cut at offsets of its padded layout (up to P, or the
    # length zigzag CP materialises). Past the layout too, it reads as an "at most n" bound: not judged.
    if tag.space == "response" or tag.cp_local or tag.window is not None or tag.total is None:
        return []
    unpadded = tag.total - 1 if tag.space == "replay" else tag.total
    lengths = tag.full_lengths()
    if size != unpadded or not lengths or stop > max(lengths) or size in lengths:
        return []
    problem = (f"slices [{start}:{stop}) of {_described(tag, size)}, which holds its {size} unpadded positions: "
               f"bounds of its padded layout (up to {max(lengths)}), and PyTorch cuts the slice short without "
               f"an error")
    return [violation("S5", tag, problem, actual=f"[{start}:{stop})", expected=f"bounds within [0, {size})",
                      hint=HINTS["S5"])]


def _shift_of_local(tag: Tag, size: int, action: str) -> Violation:
    problem = (f"{action} {_described(tag, size)} along its sequence, but it is CP-local ({_cp(tag)}): the shift "
               f"crosses this rank's chunk boundaries, so the position at each boundary gets the wrong neighbour")
    return violation("S2", tag, problem, actual=f"a shift of {size} CP-local positions",
                     expected="the whole sequence shifted before the CP split", hint=HINTS["S2"])


def _shifted_twice(tag: Tag, size: int, action: str) -> Violation:
    problem = (f"{action} {_described(tag, size)}, which is already shifted by {tag.shift:+d}: the transform is "
               f"applied twice, so index j now holds token j{tag.shift * 2:+d}")
    return violation("S2", tag, problem, actual=f"shift {tag.shift:+d} then another", expected="one shift",
                     hint=HINTS["S2"])


def roll(tag: Tag, size: int, amount: int) -> tuple[int | None, list[Violation]]:
    """``roll(x, amount)`` along ``tag``'s sequence: ``(the output's shift, or None when it is not tracked, violations)``.

    ``roll(x, -1)`` shifts by +1 (index j holds token j + 1). Any roll of a
    CP-local tensor along its sequence is S2; a roll of a shifted tensor
    that does not undo the shift is S2 too (applied twice).
    """
    new = tag.shift - amount
    problems: list[Violation] = []
    if amount and tag.cp_local:
        problems.append(_shift_of_local(tag, size, f"rolls by {amount}"))
    elif amount and tag.shift and new != 0:
        problems.append(_shifted_twice(tag, size, f"rolls by {amount}"))
    return (new if abs(new) <= 1 else None), problems


# --- S4: indices -------------------------------------------------------------------------------


def negative_index(tag: Tag, size: int, index: int) -> list[Violation]:
    """``x[index]`` on ``tag``'s sequence (a Python int): S4 when it is negative and the tensor CP-local."""
    if index >= 0 or not tag.cp_local:
        return []
    problem = (f"takes position {index} of {_described(tag, size)}, which is CP-local ({_cp(tag)}): that is this "
               f"rank's last local position, not the sequence's")
    return [violation("S4", tag, problem, actual=f"[{index}] of {size} local positions",
                      expected="the sequence's position, converted to this rank's part (or read on the rank that "
                      "holds it)", hint=HINTS["S4"])]


def position_index(data: Tag, index: Tag, size: int) -> list[Violation]:
    """``data`` (``size`` positions along its sequence) indexed along it with the positions ``index`` holds."""
    if index.positions == "global" and data.cp_local:
        problem = (f"indexes {_described(data, size)}, which is CP-local ({_cp(data)}), with {index.describe()}, "
                   f"which holds global positions (in the whole sequence)")
        actual, expected = "global positions", "positions in this rank's part (local)"
    elif index.positions == "local" and not data.cp_local and index.cp_size > 1 and data.sample is not None:
        problem = (f"indexes {_described(data, size)}, which is unsliced, with {index.describe()}, which holds "
                   f"local positions (in one CP rank's part)")
        actual, expected = "local positions", "global positions"
    else:
        return []
    return [violation("S4", data, problem, actual=actual, expected=expected, hint=HINTS["S4"])]


# --- S3: partners --------------------------------------------------------------------------------


def _members(tag: Tag) -> tuple[int, ...]:
    if tag.sample is not None:
        return (tag.sample,)
    return tag.samples


def _family(tag: Tag) -> str:
    # replay rows laid out like the tokens are on token positions; response fields on response entries
    return "response" if tag.space == "response" else "positions"


def broadcast_seq_dim(tag: Tag, ndim: int, out_ndim: int) -> int | None:
    """Where ``tag``'s sequence dimension lands in an elementwise result of ``out_ndim`` dimensions (``None``: nowhere)."""
    if tag.seq_dim >= ndim:
        return None
    return out_ndim - (ndim - tag.seq_dim)


def partner_problems(op: str, tags: Sequence[Tag | None], shapes: Sequence[Shape | None]) -> list[Violation]:
    """S3: tagged operands of one op that are partners (same samples, same positions) but in different spaces.

    Partners: the same sample (or the same samples of a micro-batch), the
    same kind of axis (token positions, or response entries), and sequence
    dimensions that the op lines up (right-aligned, as broadcasting does).
    Judged: the shift (between axes of one kind: two token axes, two
    response fields), the pad side (when both are padded), and the CP
    coordinates (scheme, rank, sliced or not) when CP is on.
    """
    seen: list[tuple[Tag, int, Shape]] = []
    for t, shape in zip(tags, shapes):
        if t is None or shape is None or t.seq_dim >= len(shape) or not _members(t):
            continue
        seen.append((t, len(shape) - t.seq_dim, shape))
    if len(seen) < 2:
        return []
    first, where, shape = seen[0]
    for other, other_where, other_shape in seen[1:]:
        if (other_where != where or _members(other) != _members(first) or _family(other) != _family(first)
                or other_shape[-other_where] != shape[-where]):
            continue
        parts = _differences(first, other)
        if parts:
            return [_partners(op, first, other, shape[-where], parts)]
    return []


def _differences(a: Tag, b: Tag) -> list[str]:
    parts = []
    if a.shift != b.shift and a.space == b.space:  # a T-1 axis (logits, replay rows) has its own alignment
        parts.append("shift")
    if a.pad_side is not None and b.pad_side is not None and a.pad_side != b.pad_side:
        parts.append("pad side")
    if (a.cp_size > 1 or b.cp_size > 1) and (a.cp_local != b.cp_local or (
            a.cp_local and (a.scheme != b.scheme or None not in (a.cp_rank, b.cp_rank) and a.cp_rank != b.cp_rank))):
        parts.append("CP coordinates")
    return parts


def _partners(op: str, a: Tag, b: Tag, size: int, parts: list[str]) -> Violation:
    what = {"shift": f"shift {a.shift:+d} vs {b.shift:+d}", "pad side": f"padded {a.pad_side} vs {b.pad_side}",
            "CP coordinates": f"{_cp(a)} vs {_cp(b)}"}
    seen = "; ".join(what[p] for p in parts)
    problem = (f"{op} combines partners laid out in different spaces ({seen}): {_described(a, size)} and "
               f"{_described(b, size)}; position j of one is not position j of the other")
    return violation("S3", a, problem, actual=seen, expected="the same " + " and ".join(parts), hint=HINTS["S3"],
                     extra={"partner": b.field})


def elementwise(tags: Sequence[Tag | None], shapes: Sequence[Shape | None], out_shape: Shape,
                *, keeps_positions: bool) -> Tag | None:
    """The tag of an elementwise op's result: that of the tagged operand shaped like it (else the first).

    Index-valued tags lose ``positions`` unless ``keeps_positions`` (an op
    that moves values, such as adding an offset, may have converted them).
    """
    chosen: tuple[Tag, Shape] | None = None
    for t, shape in zip(tags, shapes):
        if t is None or shape is None:
            continue
        if chosen is None or (shape == out_shape and chosen[1] != out_shape):
            chosen = (t, shape)
    if chosen is None:
        return None
    t, shape = chosen
    seq = broadcast_seq_dim(t, len(shape), len(out_shape))
    if seq is None or seq < 0 or out_shape[seq] != shape[t.seq_dim]:
        return None
    if seq != t.seq_dim:
        t = t.evolve(seq_dim=seq, samples=t.samples if len(out_shape) == len(shape) else ())
    if t.positions is not None and not keeps_positions:
        t = t.evolve(positions=None)
    return t
