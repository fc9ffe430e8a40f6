"""The one entry point that tags a value with its layout space: what a boundary says a function holds.

A boundary (a debug-mode hook, the boundary contract's wrappers, a test, or
a user by hand) knows what a function's argument or return value holds: a
per-sample tensor (or a list of them, or a micro-batch, or a packed stream)
in a `layoutcheck.spaces.Space` (``"P zigzag"``, ``"T +1"``, ``"R"``,
``"T packed"``), for which samples, with which lengths. `tag_space` turns
that into the tracer's tags, so that the ops after the boundary are judged
against it::

    tag_space(labels, "T +1", field="labels", samples=3, lengths=SampleLengths(300, 100, 384))
    tag_space(batch["tokens"], "P zigzag", field="tokens", samples=[0, 4], lengths=[s0, s4], seq_dim=1,
              cp_size=2, cp_rank=1)

Lengths come from `layoutcheck.spaces.SampleLengths` (``T``, ``R``, ``P``).
Nothing here reads a value's data: shapes only (no GPU sync), and nothing
is tagged while ``torch.compile`` traces. Pure Python (torch need not be
imported).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.contract.meta import compiling, metadata_only, shape_of
from layoutcheck.runtime.tracing.tags import Tag, set_tag
from layoutcheck.spaces import SampleLengths, Space, parse_space

__all__ = ["tag_space"]

_KIND = {"T": "tokens", "P": "tokens", "R": "response", "T-1": "replay"}
"""The tag's axis kind for each basis (`Tag.space`)."""


def tag_space(
    value: Any,
    space: Space | str,
    *,
    field: str,
    samples: int | Sequence[int] | None = None,
    lengths: SampleLengths | Sequence[SampleLengths] | None = None,
    seq_dim: int = 0,
    cp_size: int | None = None,
    cp_rank: int | None = None,
    layout: str | None = None,
    micro_batch: int | None = None,
    unit: int | None = None,
) -> int:
    """Tag ``value`` (a tensor, or a per-sample list or tuple of tensors) as holding ``space``; return how many got a tag.

    * ``space``: a `Space`, or its short spelling (`layoutcheck.spaces.parse_space`).
    * ``field``: the name messages give the value (``"labels"``, ``"tokens"``).
    * ``samples``: the sample id (an int) of a one-sample tensor; the ids of
      a list's entries, of a micro-batch's rows (dimension 0), or of a packed
      stream's segments, in order. ``None``: a list's entries are ``0..n-1``.
    * ``lengths``: each sample's ``T``, ``R`` and ``P`` (one per sample id);
      a packed stream needs them (its segments' lengths come from them).
    * ``seq_dim``: the dimension that holds the positions (or response entries).
    * ``cp_size``, ``cp_rank``: this process's CP coordinates, when the
      space's CP part does not fix them; ``layout``: ``bshd`` or ``thd``
      (default: ``thd`` for a packed space, else ``bshd``); ``micro_batch``,
      ``unit`` (``A``): for messages.

    A CP-local space records the rank and the local length (the size of
    ``seq_dim``); its pad side and positions go to the tag as they are, and
    its shift as the alignment the tag keeps (`Tag.shift`): ``+1``
    (``x[..., 1:]``, ``roll(x, -1)``) stays ``+1``, ``-1`` (``x[..., :-1]``:
    the last position dropped) is ``0``, since each index still holds its
    own token.
    Entries that are not tensors are skipped. Raises `LayoutSpecError` when
    the space, the ids and the lengths do not fit together.
    """
    if isinstance(space, str):
        space = parse_space(space)
    if not isinstance(space, Space):
        raise LayoutSpecError(f"tag_space: `space` must be a layoutcheck.spaces.Space or its spelling, got "
                              f"{type(space).__name__}")
    if compiling():
        return 0
    ids = _ids(samples)
    all_lengths = None if lengths is None else ([lengths] if isinstance(lengths, SampleLengths) else list(lengths))
    if ids is not None and all_lengths is not None and len(all_lengths) != len(ids):
        raise LayoutSpecError(f"tag_space({field!r}): {len(all_lengths)} lengths for {len(ids)} samples")
    base = _base(space, field, seq_dim, cp_size, cp_rank, layout, micro_batch, unit)
    if isinstance(value, (list, tuple)):
        if space.packed and value and isinstance(value[0], (int, float)):
            return 0  # one stream kept as Python numbers: nothing in it can carry a tag
        ids = list(range(len(value))) if ids is None else ids
        if len(ids) != len(value):
            raise LayoutSpecError(f"tag_space({field!r}): {len(ids)} sample ids for {len(value)} entries")
        count = 0
        for i, (entry, sample) in enumerate(zip(value, ids)):
            own = None if all_lengths is None else all_lengths[i]
            count += _tag_one(entry, base, space, sample, own)
        return count
    if space.packed:
        if ids is None or all_lengths is None:
            raise LayoutSpecError(f"tag_space({field!r}): a packed stream needs `samples` and `lengths`")
        return _tag_stream(value, base, space, ids, all_lengths)
    if ids is not None and (not isinstance(samples, int)):
        common = {l.padded for l in all_lengths} if all_lengths else set()
        padded = common.pop() if len(common) == 1 else None
        return _tag_tensor(value, base.evolve(samples=tuple(ids), padded=padded), space)
    sample = ids[0] if ids else None
    return _tag_one(value, base, space, sample, all_lengths[0] if all_lengths else None)


def _ids(samples: int | Sequence[int] | None) -> list[int] | None:
    if samples is None:
        return None
    ids = [samples] if isinstance(samples, int) else list(samples)
    if not all(type(i) is int and i >= 0 for i in ids):
        raise LayoutSpecError(f"tag_space: sample ids are non-negative ints, got {samples!r}")
    return ids


def _base(space: Space, field: str, seq_dim: int, cp_size: int | None, cp_rank: int | None, layout: str | None,
          micro_batch: int | None, unit: int | None) -> Tag:
    part = space.cp
    size = part.size if part is not None and part.size is not None else (cp_size or 1)
    rank = part.rank if part is not None and part.rank is not None else cp_rank
    scheme = part.scheme if part is not None else "zigzag"
    chosen = layout or ("thd" if space.packed else "bshd")
    geometry.check_layout(chosen)
    # A space's -1 is x[..., :-1]: the last position dropped, each index still holding its own token (the
    # tag's shift is that alignment: `Tag.shift`); +1 is x[..., 1:] or roll(x, -1) in both.
    shift = 1 if space.shift == 1 else 0
    return Tag(field=field, padded=None, layout=chosen, cp_size=size, scheme=scheme, cp_rank=rank, unit=unit,
               micro_batch=micro_batch, space=_KIND[space.basis], seq_dim=seq_dim, shift=shift,
               pad_side=space.pad_side, positions=space.positions)


def _tag_one(value: Any, base: Tag, space: Space, sample: int | None, lengths: SampleLengths | None) -> int:
    t = base.evolve(sample=sample)
    if lengths is not None:
        t = t.evolve(total=lengths.total, response=lengths.response, padded=lengths.padded)
    return _tag_tensor(value, t, space)


def _tag_tensor(value: Any, t: Tag, space: Space) -> int:
    with metadata_only():
        shape = shape_of(value)
    if shape is None or isinstance(value, (list, tuple)):
        return 0
    if t.seq_dim >= len(shape):
        raise LayoutSpecError(f"tag_space({t.field!r}): seq_dim={t.seq_dim}, but the tensor has {len(shape)} "
                              f"dimensions")
    if space.cp is not None:
        t = t.evolve(local=int(shape[t.seq_dim]))
    set_tag(value, t)
    return 1


def _tag_stream(value: Any, base: Tag, space: Space, ids: list[int], lengths: list[SampleLengths]) -> int:
    # A packed stream: each segment is one sample's axis in the unpacked space, back to back.
    one = replace(space, packed=False)
    members, segments = [], []
    for sample, own in zip(ids, lengths):
        n = one.length(own, cp_size=base.cp_size, cp_rank=base.cp_rank or 0)
        member = base.evolve(sample=sample, total=own.total, response=own.response, padded=own.padded)
        if space.cp is not None:
            member = member.evolve(local=n)
        members.append(member)
        segments.append(n)
    stream = base.evolve(samples=tuple(ids), members=tuple(members), segments=tuple(segments))
    return _tag_tensor(value, stream, replace(space, cp=None))
