"""Tensor tags: what a per-sample tensor is, in layout terms, kept beside the tensor.

A `Tag` is a small frozen value of ints and strings (and tuples of them):
the sample it belongs to, the field it came from, the sample's lengths
(``T``, ``R``, ``P``, ``A``), the CP geometry, and, once CP-sliced, the rank
and the local length; and the parts of its sequence axis's layout space
(`layoutcheck.spaces`) that no shape shows: the shift, the pad side and,
for index-valued tensors, whether the positions are global or local.
`Tag.layout_space` reads them back as a `layoutcheck.spaces.Space`. It
never references a tensor, so keeping a tag (or a violation built from one)
never keeps a tensor alive.

The side table is keyed by tensor identity and holds each tensor weakly
(docs/development.md#what-the-runtime-is-built-on): a plain attribute on a tensor is lost by slicing,
``view``, ``detach``, ``clone`` and dtype changes, and a tensor subclass costs
3-7x per op and breaks ``torch.compile(fullgraph=True)``. It is a dict from
``id(tensor)`` to a weakref that carries the tag and whose callback drops the
entry when the tensor dies, which is what ``torch.utils.weak.WeakIdKeyDictionary``
does; measured here it looks up in 0.12-0.21 us against the dictionary's
1.2-2.0 us (which builds a ``WeakIdRef`` object per lookup), and the tracer
looks tags up on every traced op. A reused ``id`` cannot alias: an entry is
only returned when its weakref still points at the very tensor asked about.

Nothing here imports torch; tagging while ``torch.compile`` traces is a no-op
(a weakref would break the graph).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, NamedTuple

from layoutcheck import geometry
from layoutcheck.runtime.contract.meta import compiling
from layoutcheck.spaces import CPPart, Space

__all__ = ["Tag", "clear_tags", "geometry_of", "tag", "tagged_count", "untag"]


class Tag(NamedTuple):
    """The layout geometry of one tensor: a sample's (or a micro-batch's) lengths and CP state.

    ``padded`` is the owner's ``P`` (the sample's ``max_seq_lens`` entry; the
    packed length ``round_up(T, 2 cp)`` under THD); ``bucket``, when static
    shape buckets are configured, is the length the sample is actually laid
    out with. ``local`` (and ``cp_rank``, when known) are set once the tensor is CP-sliced.
    ``window`` is the ``[start, stop)`` part of the laid-out sequence a slice
    holds (before it is recognised as a CP layout), or of the unpadded
    tokens when ``raw``. A micro-batch tag has
    ``samples`` (in batch order) and no ``sample``; a packed stream also
    keeps each member's tag in ``members`` with its length in ``segments``.

    A named tuple, not a frozen dataclass: the tracer derives a new tag on
    most traced ops, and `evolve` costs about 0.6 us where
    ``dataclasses.replace`` of this many fields costs about 12 us.
    """

    field: str
    """The rollout or batch field the tensor came from (``tokens``, ``rollout_log_probs``, ...)."""
    padded: int | None
    """``P``: the sample's padded length (or the micro-batch's); ``None`` for a packed stream."""
    sample: int | None = None
    total: int | None = None
    """``T``, the sample's true total length."""
    response: int | None = None
    """``R``, the sample's response length."""
    unit: int | None = None
    """``A``, the alignment unit (informational)."""
    bucket: int | None = None
    layout: str = "bshd"
    cp_size: int = 1
    scheme: str = "zigzag"
    cp_rank: int | None = None
    local: int | None = None
    """Positions (or response entries) this CP rank holds, once sliced."""
    micro_batch: int | None = None
    samples: tuple[int, ...] = ()
    space: str = "tokens"
    seq_dim: int = 0
    """The dimension that holds positions (tokens, replay) or entries (response fields)."""
    window: tuple[int, int] | None = None
    raw: bool = False
    """The window is a piece of the sample's unpadded tokens (``[0, T)``), not of a laid-out sequence."""
    segments: tuple[int, ...] = ()
    members: tuple[Tag, ...] = ()
    shift: int = 0
    """Which token index ``j`` of the sequence axis holds: token ``j + shift``.

    ``+1`` after ``x[1:]`` or ``roll(x, -1)`` (next-token targets) and for a
    response field laid out at the logit positions that predict it (the
    ``(p - 1, 1)`` pad); ``-1`` after ``roll(x, 1)``. A slice that drops the
    last position (``x[:-1]``) shortens the axis and keeps the shift.
    """
    pad_side: str | None = None
    """``"right"`` or ``"left"``: where the pad positions sit, once the axis is padded."""
    positions: str | None = None
    """For index-valued tensors (position ids, offsets): ``"global"`` or ``"local"`` positions."""

    @property
    def length(self) -> int | None:
        """The length the sample is laid out with: its bucket if it has one, else ``P``."""
        return self.bucket if self.bucket is not None else self.padded

    @property
    def sliced(self) -> bool:
        """Whether the tensor holds one CP rank's part (its ``local`` length is set; ``cp_rank`` if known)."""
        return self.local is not None

    def full_lengths(self) -> tuple[int, ...]:
        """Lengths of the sequence dimension that are a whole layout of this tag (not a piece).

        Sliced: the local length. Unsliced: ``P`` (or the bucket) and the
        length the CP scheme materialises before slicing (zigzag pads to
        ``2 cp c``, which exceeds ``P`` when ``2 cp`` does not divide it).
        """
        if self.local is not None:
            return (self.local,)
        target = self.bucket if self.bucket is not None else self.padded
        if target is None:
            return ()
        return layout_lengths(target, self.cp_size, self.scheme)

    def layout_space(self, size: int | None = None) -> Space:
        """The `layoutcheck.spaces.Space` of the sequence axis, ``size`` positions long now (when known).

        Basis: ``R`` for a response field, ``T-1`` for replay rows not yet laid
        out, ``P`` for a laid-out (or CP-sliced) token axis, else ``T``.
        Packed when it is a stream of samples; the CP part once CP-sliced
        under ``cp > 1``. ``shift`` is the tag's alignment (see `Tag.shift`):
        ``+1`` reads as the space's ``+1``; a truncated axis (the space's
        ``-1``, ``x[..., :-1]``) has alignment 0 and reads as 0.
        """
        if self.space == "response":
            basis = "R"
        elif self.members:
            basis = "T" if all(m.total == n for m, n in zip(self.members, self.segments)) else "P"
        elif self.sliced or (size is not None and size in self.full_lengths()):
            basis = "P"
        elif self.space == "replay" and (size is None or self.total is None or size == self.total - 1):
            basis = "T-1"
        else:
            basis = "T"
        cp = CPPart(self.scheme, self.cp_size, self.cp_rank) if self.sliced and self.cp_size > 1 else None  # type: ignore[arg-type]
        shift = self.shift if self.shift in (-1, 0, 1) else 0
        return Space(basis, packed=bool(self.members), cp=cp, shift=shift,  # type: ignore[arg-type]
                     pad_side=self.pad_side, positions=self.positions)  # type: ignore[arg-type]

    @property
    def cp_local(self) -> bool:
        """Whether the tensor holds one rank's part under ``cp > 1`` (`sliced` is also true at ``cp == 1``)."""
        return self.local is not None and self.cp_size > 1

    def describe(self) -> str:
        """A short text for messages: who, which field, and the sizes that matter."""
        if self.sample is not None:
            who = f"sample {self.sample}"
        elif self.samples:
            who = "micro-batch" + (f" {self.micro_batch}" if self.micro_batch is not None else "")
            shown = ", ".join(str(s) for s in self.samples[:8]) + (", ..." if len(self.samples) > 8 else "")
            who += f" (samples {shown})"
        else:
            who = "micro-batch" + (f" {self.micro_batch}" if self.micro_batch is not None else "")
        return f"{who} `{self.field}` ({', '.join(f'{k}={v}' for k, v in self.sizes().items())})"

    def sizes(self) -> dict[str, object]:
        """The bound sizes, in the order messages show them."""
        out: dict[str, object] = {}
        for key, value in (("T", self.total), ("R", self.response), ("P", self.padded), ("bucket", self.bucket)):
            if value is not None:
                out[key] = value
        out["layout"] = self.layout
        if self.cp_size > 1:
            out.update({"cp": self.cp_size, "scheme": self.scheme})
            if self.cp_rank is not None:
                out["r"] = self.cp_rank
        if self.local is not None:
            out["L" if self.space != "response" else "local"] = self.local
        return out

    def evolve(self, **changes: Any) -> Tag:
        """A copy with ``changes`` (``_replace`` without its checks: a hot path)."""
        values = list(self)
        for name, value in changes.items():
            values[_INDEX[name]] = value
        return _new_tuple(Tag, values)


_INDEX = {name: i for i, name in enumerate(Tag._fields)}
_new_tuple = tuple.__new__


@functools.lru_cache(maxsize=4096)
def layout_lengths(target: int, cp_size: int, scheme: str) -> tuple[int, ...]:
    """``(P,)``, or ``(P, materialised)`` when the CP scheme materialises more than ``P`` (cached: a hot path)."""
    if cp_size > 1 and geometry.cp_can_slice(target, cp_size, scheme):
        materialised = geometry.materialised_length(target, cp_size, scheme)
        if materialised != target:
            return (target, materialised)
    return (target,)


# --- the side table ----------------------------------------------------------------

class _Ref(weakref.ref):  # type: ignore[type-arg]
    # One object per entry: the weakref carries its key and the tag, and its
    # callback (a module function, no closure) drops the entry. Built by the
    # C constructor, attributes set after: a Python __new__ doubles the cost.
    __slots__ = ("key", "value")
    key: int
    value: Tag


_TABLE: dict[int, _Ref] = {}


entry_at = _TABLE.get
"""The side table's raw entry for ``id(tensor)``, or ``None``: the tracer's per-op fast path.

``None`` means no tensor at that address carries a tag; an entry may be a
dead tensor's whose id was reused (`geometry_of` tells).
"""


def _remove(ref: _Ref) -> None:
    # Called when the tensor dies. The id may already carry a newer entry (a
    # new tensor tagged at a reused address after an explicit untag): keep it.
    if _TABLE.get(ref.key) is ref:
        del _TABLE[ref.key]


def tag(tensor: Any, value: Tag) -> Any:
    """Attach ``value`` to ``tensor`` (replacing any tag it had) and return the tensor.

    The tensor is held weakly: its tag goes when it goes. While
    ``torch.compile`` traces, nothing is attached (a weakref would break the graph).
    """
    if type(value) is not Tag:
        from layoutcheck.errors import LayoutSpecError

        raise LayoutSpecError(f"a tag must be a layoutcheck Tag, got {type(value).__name__}")
    if compiling():
        return tensor
    return set_tag(tensor, value)


def set_tag(tensor: Any, value: Tag) -> Any:
    """`tag` without its checks, for the tracer's rules (which never run while compiling)."""
    key = id(tensor)
    ref = _TABLE.get(key)
    if ref is not None and ref() is tensor:
        ref.value = value  # re-tag: keep the weakref
    else:
        ref = _Ref(tensor, _remove)
        ref.key, ref.value = key, value
        _TABLE[key] = ref
    return tensor


def geometry_of(tensor: Any) -> Tag | None:
    """The tag of ``tensor``, or ``None`` if it has none."""
    ref = _TABLE.get(id(tensor))
    if ref is None or ref() is not tensor:
        return None
    return ref.value


def untag(tensor: Any) -> None:
    """Remove the tag of ``tensor`` (if any)."""
    ref = _TABLE.get(id(tensor))
    if ref is not None and ref() is tensor:
        del _TABLE[id(tensor)]


def tagged_count() -> int:
    """How many live tensors carry a tag."""
    return len(_TABLE)


def clear_tags() -> None:
    """Drop every tag."""
    _TABLE.clear()
