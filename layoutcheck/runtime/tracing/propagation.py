"""How tags move through tensor operations, and what breaks a layout on the way.

Pure Python over `Tag` values, shapes (tuples of ints) and the operations'
integer arguments: no torch, no tensor, so every rule is cheap and testable
alone. `layoutcheck.runtime.tracing.tracer` reads the shapes (metadata only) and calls
these rules around each traced op. A rule returns the output's tag (``None``:
the output is not tagged) and the violations it saw, with ``where`` left
empty: the tracer fills in the operation and the user's source line.

What is flagged, and under which invariant (docs/design.md#the-invariants):

* a pad of a tensor's sequence dimension to a length that is not one of its
  layout's lengths (``T``, ``P``, the length zigzag CP materialises, or the
  local length once CP-sliced): **G3**, or **G6** when the sample is laid
  out in a static shape bucket; a pad that truncates (a negative pad) is
  **G2** (tokens are dropped);
* a ``stack``, or a ``cat`` along a batch dimension (not the sequence one), of
  tensors whose samples have different padded lengths: **G1**;
* a ``split`` of a packed stream of samples with sizes that are not its
  samples' lengths, and a slice of a response field that runs past its end
  (bounds computed for a longer sample): **G4** (response space) or **G3**;
* a tail pad of a packed (THD) stream to another length than the batch
  builder's (``round_up(N, stream multiple)``, the tracer's
  ``stream_multiple``): **G5** for replay rows, **G3** otherwise.

Two invariants of the owner are also seen where a wrong ``P`` is first laid
out (``per_sample`` given, BSHD, a sample with its ``T`` and ``A``): a pad
to a ``P`` that is not a multiple of ``A`` (**O2**), and, in per-sample mode,
to a ``P`` at least ``A`` above ``round_up(T, A)`` (**O3**, rollout-global
padding: this pad is where it costs memory). The ``P`` is the owner's; the
op is where it is materialised.

CP layouts are recognised from slices: the all-gather window of rank ``r``
of a tensor padded to ``P``, and the ``cat`` of the two zigzag chunks of
rank ``r`` (how ``slice_with_cp`` lays a sample out), each from
`layoutcheck.geometry`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from layoutcheck import geometry
from layoutcheck.errors import Violation
from layoutcheck.runtime.contract.common import HINTS
from layoutcheck.runtime.tracing import space_rules
from layoutcheck.runtime.tracing.findings import violation
from layoutcheck.runtime.tracing.tags import Tag, layout_lengths

__all__ = [
    "index",
    "join",
    "length_problem",
    "owner_problem",
    "pad",
    "reshape",
    "same",
    "slice_sequence",
    "split",
    "stream_problem",
]

Shape = tuple[int, ...]

STREAM_HINT = (
    "pad a packed stream with the batch builder's multiple (tp_size * the pad_multiplier get_batch is called "
    "with); do not re-derive it from another setting"
)
PAD_HINT = (
    "pad to the sample's own P (its `max_seq_lens` entry, or the micro-batch's bucket) as the batch builder "
    "does; do not re-derive a pad target (such as a rollout or batch maximum) after the owner"
)
TRUNCATE_HINT = "recompute `max_seq_lens` after any step that changes the tokens; never pad to below the current length"
SPLIT_HINT = "split a packed stream with the lengths its samples were laid out with (on this CP rank)"
SLICE_HINT = "slice a response field with its own sample's offsets (T, R and P of that sample)"


# --- shape-preserving and reshaping ops ----------------------------------------------


def same(tag: Tag, in_shape: Shape, out_shape: Shape) -> Tag | None:
    """``to``/``contiguous``/``clone``/``detach`` and dtype casts: the same tag, unless the shape changed."""
    return tag if in_shape == out_shape else reshape(tag, in_shape, out_shape)


def reshape(tag: Tag, in_shape: Shape, out_shape: Shape) -> Tag | None:
    """``view``/``reshape``/``flatten``/``unsqueeze``/``squeeze``: find where the sequence dimension went.

    It survives when some output dimension has its size and the same number
    of elements before it; merged or split (``[B, L] -> [B * L]``), the tag is dropped.
    """
    s = tag.seq_dim
    if s >= len(in_shape):
        return None
    before = 1
    for d in in_shape[:s]:
        before *= d
    prefix = 1
    for j, d in enumerate(out_shape):
        if prefix == before and d == in_shape[s]:
            if j == s:
                return tag
            # The batch dimension is dim 0 before and after, or the samples are no longer known.
            samples = tag.samples if (s > 0 and j > 0 and out_shape[0] == in_shape[0]) else ()
            return tag.evolve(seq_dim=j, samples=samples) if samples != tag.samples else tag.evolve(seq_dim=j)
        prefix *= d
        if prefix > before:
            return None
    return None


# --- slicing -----------------------------------------------------------------------------


def slice_sequence(tag: Tag, size: int, start: int, stop: int) -> Tag | None:
    """The tag of ``[start, stop)`` of the sequence dimension (``size`` long now).

    A slice of a whole layout (the tensor is ``P``, the materialised zigzag
    length, or its local length long) keeps the tag with the ``window`` it
    holds; an all-gather window of rank ``r`` is recognised as that rank's CP
    layout. Pieces of anything else (a prompt cut out of the raw tokens, a
    part of a response field) are not tagged: padding them is not the layout.
    """
    if start == 0 and stop == size:
        return tag
    if tag.space == "response" or stop < start:
        return None
    if tag.window is not None:
        base = tag.window[0]
        if tag.raw:
            return tag.evolve(window=(base + start, base + stop))
        return _recognise_window(tag, (base + start, base + stop))
    if size in tag.full_lengths():
        return _recognise_window(tag, (start, stop))
    if not tag.sliced and tag.sample is not None and size == tag.total:
        # a piece of the unpadded tokens: kept so that a cat that puts the
        # sample back together (multimodal expansion) is still that sample
        return tag.evolve(window=(start, stop), raw=True)
    return None


@functools.lru_cache(maxsize=4096)
def _allgather_ranks(target: int, cp_size: int) -> dict[tuple[int, int], int]:
    # window -> the rank that keeps it under all-gather CP (empty when P % cp != 0)
    if not geometry.cp_can_slice(target, cp_size, "allgather"):
        return {}
    return {geometry.allgather_window(target, cp_size, r): r for r in range(cp_size)}


@functools.lru_cache(maxsize=4096)
def _zigzag_ranks(target: int, cp_size: int) -> dict[tuple[tuple[int, int], ...], int]:
    # (chunk r, chunk 2cp-1-r) -> r under zigzag CP
    return {tuple(geometry.zigzag_chunks(target, cp_size, r)): r for r in range(cp_size)}


def _recognise_window(tag: Tag, window: tuple[int, int]) -> Tag:
    target = tag.length
    if tag.local is None and target is not None and tag.cp_size > 1:
        r = _allgather_ranks(target, tag.cp_size).get(window)
        if r is not None:
            return tag.evolve(cp_rank=r, local=window[1] - window[0], scheme="allgather", window=None)
    return tag.evolve(window=window)


def _recognise_pieces(tag: Tag, windows: list[tuple[int, int]]) -> Tag | None:
    # Pieces of one sample concatenated along the sequence: zigzag chunks of a
    # rank, or contiguous windows (merged again).
    target = tag.length
    if tag.local is None and target is not None and tag.cp_size > 1 and len(windows) == 2:
        r = _zigzag_ranks(target, tag.cp_size).get(tuple(windows))
        if r is not None:
            local = geometry.local_length(target, tag.cp_size, "zigzag")
            return tag.evolve(cp_rank=r, local=local, scheme="zigzag", window=None)
    if all(a[1] == b[0] for a, b in zip(windows, windows[1:])):
        return _recognise_window(tag, (windows[0][0], windows[-1][1]))
    return None


def _is_int(value: object) -> bool:
    return type(value) is int


def index(tag: Tag, shape: Shape, idx: Any) -> tuple[Tag | None, list[Violation]]:
    """``tensor[idx]`` for basic indexing (ints, slices, ``None``, ``...``); advanced indexing drops the tag.

    Only Python ints are read (a tensor or a SymInt index drops the tag
    unread: reading it would synchronise a GPU). An int on the batch
    dimension of a micro-batch selects one sample; on the sequence dimension it
    drops the tag. A response-field slice whose explicit bounds run past its
    end is flagged (G4): Python clamps it silently, so the bounds were computed
    for another, longer sample.
    """
    if type(idx) is slice and tag.seq_dim == 0 and shape:
        # the common case: x[a:b] along the sequence of a per-sample tensor
        parts = (idx.start, idx.stop, idx.step)
        if not all(p is None or type(p) is int for p in parts):
            return None, []
        start, stop, step = idx.indices(shape[0])
        if step != 1:
            return None, []
        shift, problems = None, []
        if space_rules.may_matter(idx, shape[0]):
            shift, problems = space_rules.slice_problems(tag, shape[0], idx)
        out = slice_sequence(tag, shape[0], start, max(start, stop))
        if shift is not None and out is not None:
            out = out.evolve(shift=shift)
        return out, problems + _past_the_end(tag, shape[0], idx)
    items = idx if type(idx) is tuple else (idx,)
    consuming = 0
    for item in items:
        if _is_int(item) or type(item) is slice:
            consuming += 1
        elif item is not None and item is not Ellipsis:
            return None, []  # advanced indexing (tensors, lists, bools)
    if consuming > len(shape) or sum(1 for item in items if item is Ellipsis) > 1:
        return None, []
    s = tag.seq_dim
    if s >= len(shape):
        return None, []
    in_dim, out_dim = 0, 0
    new_seq: int | None = None
    seq_slice: tuple[int, int] | None = None
    shift: int | None = None
    chosen: int | None = None
    samples = tag.samples
    problems: list[Violation] = []
    for item in items:
        if item is None:
            out_dim += 1
        elif item is Ellipsis:
            skip = len(shape) - consuming
            if in_dim <= s < in_dim + skip:
                new_seq = out_dim + (s - in_dim)
            in_dim += skip
            out_dim += skip
        elif _is_int(item):
            if in_dim == s:
                return None, space_rules.negative_index(tag, shape[s], item)
            if in_dim == 0 and samples and len(samples) == shape[0] and -shape[0] <= item < shape[0]:
                chosen = samples[item]
            samples = ()
            in_dim += 1
        else:  # a slice
            parts = (item.start, item.stop, item.step)
            if not all(p is None or _is_int(p) for p in parts):
                return None, []
            start, stop, step = item.indices(shape[in_dim])
            if in_dim == s:
                if step != 1:
                    return None, []
                problems += _past_the_end(tag, shape[in_dim], item)
                if space_rules.may_matter(item, shape[in_dim]):
                    shift, found = space_rules.slice_problems(tag, shape[in_dim], item)
                    problems += found
                seq_slice = (start, max(start, stop))
                new_seq = out_dim
            elif in_dim == 0 and samples:
                samples = tuple(samples[start:stop:step]) if len(samples) == shape[0] else ()
            in_dim += 1
            out_dim += 1
    if new_seq is None:
        new_seq = out_dim + (s - in_dim)
    out = tag if new_seq == s and samples == tag.samples else tag.evolve(seq_dim=new_seq, samples=samples)
    if chosen is not None:
        out = out.evolve(sample=chosen, samples=())
    if seq_slice is not None:
        sliced = slice_sequence(out, shape[s], *seq_slice)
        if shift is not None and sliced is not None:
            sliced = sliced.evolve(shift=shift)
        return sliced, problems
    return out, problems


def _past_the_end(tag: Tag, size: int, item: slice) -> list[Violation]:
    # A CP-local response field: its entries are the rank's, cut at offsets of its own sample. An unsliced
    # one cut at CP chunk positions (which run into the pad past R) is read up to its end on purpose.
    start, stop = item.start, item.stop
    if (tag.space != "response" or not tag.sliced or not (_is_int(start) and _is_int(stop)) or start < 0
            or stop < 0):
        return []
    if stop <= size and start <= size:
        return []
    return [violation(
        "G4", tag, f"slices entries [{start}:{stop}) of a response field that holds {size}: bounds of another sample",
        actual=f"[{start}:{stop})", expected=f"bounds within the {size} entries of this sample", hint=SLICE_HINT,
    )]


def split(tag: Tag, shape: Shape, dim: int, sizes: Sequence[int], *, explicit: bool) -> tuple[
        list[Tag | None], list[Violation]]:
    """``split``/``chunk``/``unbind``-like ops: the tag of each piece (``sizes`` along ``dim``).

    Along the sequence dimension, each piece is a slice (`slice_sequence`);
    a packed stream split at exactly its samples' lengths gives each piece its
    sample's tag back, and split with ``explicit`` other sizes for as many
    pieces as it has samples is flagged. Along the batch dimension of a
    micro-batch, each piece keeps its samples.
    """
    if not shape:
        return [None] * len(sizes), []
    d = dim % len(shape)
    s = tag.seq_dim
    if d != s:
        if d == 0 and tag.samples and len(tag.samples) == shape[0]:
            out: list[Tag | None] = []
            start = 0
            for n in sizes:
                out.append(tag.evolve(samples=tag.samples[start:start + n]))
                start += n
            return out, []
        return [tag.evolve(samples=()) if tag.samples else tag for _ in sizes], []
    if tag.members:
        if list(sizes) == list(tag.segments):
            return [m.evolve(seq_dim=tag.seq_dim) if m.seq_dim != tag.seq_dim else m for m in tag.members], []
        if explicit and len(sizes) == len(tag.segments):
            invariant = "G4" if tag.space == "response" else "G3"
            problem = (f"splits a packed stream of {len(tag.segments)} samples into pieces of {list(sizes)}, "
                       f"but its samples hold {list(tag.segments)}")
            return [None] * len(sizes), [violation(
                invariant, tag, problem, actual=list(sizes), expected=list(tag.segments), hint=SPLIT_HINT,
                samples=tag.samples or None,
            )]
        return [None] * len(sizes), []
    pieces: list[Tag | None] = []
    start = 0
    for n in sizes:
        pieces.append(slice_sequence(tag, shape[s], start, start + n))
        start += n
    return pieces, []


# --- joins -----------------------------------------------------------------------------


def join(tags: Sequence[Tag | None], shapes: Sequence[Shape], dim: int, *, stack: bool,
         stream_multiple: int | None = None, per_sample: bool | None = None) -> tuple[Tag | None, list[Violation]]:
    """``torch.cat`` (``stack=False``) and ``torch.stack`` of tensors with these tags and shapes.

    A stack, or a cat along another dimension than the sequence one, makes a
    batch: every tagged input must be laid out with the same ``P`` (or
    bucket), else G1. A cat along the sequence dimension either reassembles
    pieces of one sample (a zigzag CP layout when they are the two chunks of a
    rank) or packs samples into a stream that remembers each one; a cat of a
    tagged tensor and untagged filler is a pad (checked as `pad` checks it).
    """
    tagged = [t for t in tags if t is not None]
    if not tagged or not shapes:
        return None, []
    s = tagged[0].seq_dim
    if any(t.seq_dim != s for t in tagged):
        return None, []
    ndim = len(shapes[0]) + (1 if stack else 0)
    if ndim == 0:
        return None, []
    d = dim % ndim
    if stack or d != s:
        return _batch_join(tags, tagged, s + 1 if stack and d <= s else s)
    sizes = [shape[s] if s < len(shape) else 0 for shape in shapes]
    if len(tagged) != len(tags):
        if tags[0] is not None and tags[0].window is None and len(tagged) == 1:
            return _extension(tags[0], sizes, stream_multiple, per_sample, left=False)
        if tags[-1] is not None and tags[-1].window is None and len(tagged) == 1 and not tags[-1].members:
            return _extension(tags[-1], sizes[::-1], None, per_sample, left=True)
        return _reassembly(tagged, tags, sizes), []
    return _sequence_join(tagged, sizes), []


def _reassembly(tagged: list[Tag], tags: Sequence[Tag | None], sizes: list[int]) -> Tag | None:
    # Pieces of one sample's unpadded tokens (and whole ones), with new
    # tokens between them: the sample again, with another length (multimodal
    # expansion). Its T is the owner's, now stale; a later pad shows it.
    first = tagged[0]
    if first.sample is None or any(t.sample != first.sample or t.field != first.field for t in tagged):
        return None
    for t, n in zip(tags, sizes):
        if t is not None and not (t.raw or (t.window is None and not t.sliced and n == t.total)):
            return None
    return first.evolve(window=None, raw=False)


def _extension(first: Tag, sizes: list[int], stream_multiple: int | None,
               per_sample: bool | None, *, left: bool) -> tuple[Tag | None, list[Violation]]:
    # cat([sample, filler, ...]) along the sequence: a right pad written as a
    # cat (how a replay filler pads its arrays); cat([filler, ..., sample]) a left pad.
    side = "left" if left else "right"
    if first.members:
        problem = stream_problem(first, sizes[0], sum(sizes), stream_multiple, action="extends (by cat)")
        return first.evolve(pad_side=side), [problem] if problem else []
    if first.space == "response" or first.padded is None:
        return None, []
    problem = length_problem(first, sizes[0], sum(sizes), action="extends (by cat)", per_sample=per_sample)
    return _padded(first, side), [problem] if problem else []


def _padded(tag: Tag, side: str) -> Tag:
    # padded on one side: the pad moves no position (index j still holds token j + shift)
    return tag if tag.pad_side == side and tag.window is None else tag.evolve(pad_side=side, window=None)


def _members(t: Tag) -> tuple[int, ...] | None:
    if t.sample is not None:
        return (t.sample,)
    return t.samples or None


def _batch_join(tags: Sequence[Tag | None], tagged: list[Tag], seq_dim: int) -> tuple[Tag, list[Violation]]:
    first = tagged[0]
    lengths = [t.length for t in tagged]
    problems: list[Violation] = []
    if len(set(lengths)) > 1:
        ids = tuple(s for t in tagged for s in (_members(t) or ()))
        seen = ", ".join(t.describe() for t in tagged[:6]) + (", ..." if len(tagged) > 6 else "")
        problems.append(violation(
            "G1", first,
            f"puts tensors laid out with different padded lengths into one batch: {seen}",
            actual="P = " + ", ".join(str(n) for n in lengths[:16]),
            expected="one P for every sample of the micro-batch", hint=HINTS["G1"],
            samples=ids or None, extra={"P values": tuple(sorted({n for n in lengths if n is not None}))},
        ))
    ids_known = all(t is not None and _members(t) for t in tags)
    samples = tuple(s for t in tagged for s in (_members(t) or ())) if ids_known else ()
    out = first.evolve(
        sample=None, samples=samples, total=None, response=None, seq_dim=seq_dim, members=(), segments=(),
        window=first.window if all(t.window == first.window for t in tagged) else None,
    )
    return out, problems


def _sequence_join(tagged: list[Tag], sizes: list[int]) -> Tag | None:
    first = tagged[0]
    if first.sample is not None and all(t.sample == first.sample and t.field == first.field for t in tagged):
        windows = [t.window for t in tagged]
        if any(t.raw for t in tagged):
            return _reassembly(tagged, tagged, sizes)
        if all(w is not None for w in windows):
            return _recognise_pieces(first, windows)  # type: ignore[arg-type]
        return None
    if any(t.sample is None or t.members for t in tagged):
        return None
    return Tag(
        field=first.field, padded=None, layout=first.layout, cp_size=first.cp_size, scheme=first.scheme,
        cp_rank=first.cp_rank, micro_batch=first.micro_batch,
        samples=tuple(t.sample for t in tagged),  # type: ignore[misc]
        space=first.space, seq_dim=first.seq_dim, segments=tuple(sizes), members=tuple(tagged),
    )


# --- pads --------------------------------------------------------------------------------


def length_problem(tag: Tag, size: int, new: int, *, action: str, allowed: Sequence[int] | None = None,
                   given: str | None = None, per_sample: bool | None = None) -> Violation | None:
    """Whether laying ``tag``'s sequence out to ``new`` positions (from ``size``) breaks its layout.

    ``allowed`` defaults to the tag's whole-layout lengths (and ``T`` for an
    unsliced sample). ``given`` says how the op chose ``new`` (default
    ``"to N positions"``). ``per_sample`` (``None``: not judged) also judges
    the owner's ``P`` when ``new`` is it: O2, and O3 when ``True``
    (`owner_problem`). Shared by the pad rule and the CP helper wrappers.
    """
    labels = _allowed_lengths(tag) if allowed is None else {n: f"P={n}" for n in allowed}
    given = given or f"to {new} positions"
    if new in labels and new >= size:
        return None if per_sample is None else owner_problem(tag, new, action=action, given=given,
                                                              per_sample=per_sample)
    who = tag.describe()
    expected = " or ".join(labels.values())
    if new < size:  # even to its P: the sample grew past it (its lengths went stale)
        return violation(
            "G2", tag, f"{action} {who} {given}, below the {size} positions it holds: tokens are dropped",
            actual=new, expected=f"{expected} (at least {size})", hint=TRUNCATE_HINT,
        )
    if tag.cp_local and tag.length is not None and new in layout_lengths(tag.length, tag.cp_size, tag.scheme):
        return space_rules.cp_again(tag, size, action=action, given=given)  # the first step of a CP slice: S1
    if tag.sliced:
        held = (f"already laid out to L={tag.local} positions at cp=1" if not tag.cp_local
                else f"CP-sliced to its local length L={tag.local}")
        problem = f"{action} {who} {given}, but it is {held}"
        return violation("G3", tag, problem, actual=new, expected=expected, hint=PAD_HINT)
    if tag.bucket is not None:
        problem = f"{action} {who} {given}, but its bucket is {tag.bucket}"
        return violation("G6", tag, problem, actual=new, expected=expected, hint=PAD_HINT)
    kind = "the micro-batch's" if tag.sample is None else "the sample's"
    problem = f"{action} {who} {given}, but {kind} padded length is P={tag.padded}"
    return violation("G3", tag, problem, actual=new, expected=expected, hint=PAD_HINT)


def owner_problem(tag: Tag, new: int, *, action: str, given: str, per_sample: bool) -> Violation | None:
    """O2 / O3 where a sample is laid out with its owner's ``P`` (``new``), if that ``P`` is wrong.

    Judged only for an unsliced BSHD sample with its ``T`` and ``A`` and no
    bucket (a bucketed micro-batch is padded past ``T + A`` on purpose):
    ``P % A != 0`` is O2; in per-sample mode ``P >= round_up(T, A) + A`` is
    O3 (rollout-global padding, here where the positions are spent).
    """
    total, unit = tag.total, tag.unit
    if (tag.sample is None or tag.sliced or tag.bucket is not None or tag.layout != "bshd" or total is None
            or not unit or new != tag.padded):
        return None
    if new % unit == 0 and not (per_sample and new >= total + unit):  # the usual answer, without the model's call
        return None
    if new % unit:
        return violation(
            "O2", tag, f"{action} {tag.describe()} {given}: P={new} is not a multiple of the alignment unit A={unit}",
            actual=new, expected=f"a multiple of A={unit}", hint=HINTS["O2"], extra={"A": unit},
        )
    own = geometry.padded_length(total, unit)
    if per_sample and new >= own + unit:
        return violation(
            "O3", tag,
            f"{action} {tag.describe()} {given}: {new / max(total, 1):.1f}x its true length, {new - own} positions "
            f"past its own aligned length round_up(T, A) = {own} (rollout-global padding)",
            actual=new, expected=f"{own} (T <= P < T + A)", hint=HINTS["O3"],
            extra={"A": unit, "P/T": f"{new / max(total, 1):.1f}x"},
        )
    return None


def stream_problem(tag: Tag, size: int, new: int, stream_multiple: int | None, *, action: str) -> Violation | None:
    """Whether padding a packed (THD) stream of samples from ``size`` to ``new`` positions is the batch builder's pad.

    The batch builder pads a micro-batch's stream to ``round_up(N, m)``, ``m``
    its ``tp_size * pad_multiplier`` (``cp`` times that for the global stream
    of all-gather CP): ``stream_multiple`` is that ``m``. Streams of
    unsliced samples under zigzag CP are not judged.
    """
    if not stream_multiple or tag.layout != "thd" or not tag.members:
        return None
    sliced = all(m.sliced for m in tag.members)
    if sliced or tag.cp_size == 1:
        multiple = stream_multiple
    elif tag.scheme == "allgather" and not any(m.sliced for m in tag.members):
        multiple = stream_multiple * tag.cp_size
    else:
        return None
    want = geometry.round_up(size, multiple)
    if new == want:
        return None
    replay = tag.space == "replay"
    who = f"the packed stream of samples {', '.join(str(s) for s in tag.samples)} `{tag.field}`"
    problem = (f"{action} {who} from {size} to {new} {'rows' if replay else 'positions'}, but the batch builder "
               f"pads a micro-batch's stream to a multiple of {multiple}: round_up({size}, {multiple}) = {want}")
    return violation("G5" if replay else "G3", tag, problem, actual=new, expected=want, hint=STREAM_HINT,
                     extra={"stream multiple": multiple})


def _allowed_lengths(tag: Tag) -> dict[int, str]:
    # length -> how messages name it
    if tag.sliced:
        return {tag.local: f"L={tag.local} (local)"}  # type: ignore[dict-item]
    labels: dict[int, str] = {}
    lengths = tag.full_lengths()
    if lengths:
        labels[lengths[0]] = f"{'bucket' if tag.bucket is not None else 'P'}={lengths[0]}"
    if len(lengths) > 1:
        labels[lengths[1]] = f"{lengths[1]} (P materialised by {tag.scheme} CP)"
    if tag.total is not None:
        labels.setdefault(tag.total, f"T={tag.total} (unpadded)")
    return labels


def pad(tag: Tag, shape: Shape, amounts: Sequence[object], *, stream_multiple: int | None = None,
        per_sample: bool | None = None) -> tuple[Tag | None, list[Violation]]:
    """``F.pad(x, amounts)``: check the new length of the sequence dimension and tag the result.

    ``amounts`` pairs from the last dimension backwards, as ``F.pad`` reads
    them. A response field padded to ``T`` positions (the loss-mask alignment
    ``(p - 1, 1)``) becomes token-space; other response-space pads (batching
    log-probs) are not the token layout and drop the tag; a packed stream's
    tail pad keeps it, and is judged against ``stream_multiple``
    (`stream_problem`). ``per_sample``: see `length_problem`.
    """
    s = tag.seq_dim
    if s >= len(shape) or not all(_is_int(a) for a in amounts):
        return None, []
    k = len(shape) - 1 - s
    if len(amounts) < 2 * k + 2:
        return tag, []
    left, right = amounts[2 * k], amounts[2 * k + 1]
    size = shape[s]
    new = size + left + right  # type: ignore[operator]
    if new == size and left == 0:
        return tag, []
    if tag.space == "response":
        if not tag.sliced and tag.total is not None and tag.response is not None and size == tag.response \
                and new == tag.total:
            # R entries placed at token positions: entry j (token p + j) at index left + j, so index t holds
            # token t + p - left: (p, 0) aligns to the tokens, (p - 1, 1) to the logits that predict them
            shift = tag.total - tag.response - left  # type: ignore[operator]
            if abs(shift) <= 1:
                return tag.evolve(space="tokens", window=None, shift=shift), []
        return None, []
    if tag.raw:
        if not (tag.shift and tag.window == (1, tag.total)):
            return None, []  # a piece of the unpadded tokens (a prompt, say) padded: not the layout
        tag = tag.evolve(window=None, raw=False)  # x[1:] of a whole sample, padded back: the sample, shifted
    side = "left" if left and not right else "right" if right and not left else None
    if tag.members:
        problem = stream_problem(tag, size, new, stream_multiple, action="pads")
        return (tag if side is None else tag.evolve(pad_side=side)), [problem] if problem else []
    if tag.padded is None and not tag.sliced:
        return tag, []
    problem = length_problem(tag, size, new, action="pads", per_sample=per_sample)
    out = tag.evolve(window=None) if side is None else _padded(tag, side)
    return out, [problem] if problem else []
