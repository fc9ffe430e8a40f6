"""How to read a Miles/slime-shaped data path (docs/design.md#a-real-data-path-miles).

All trainer-specific knowledge of the runtime lives here: which parameters
each hooked role must have (checked when a function is wrapped), where the
layout and the alignment unit come from (``args``), what the parallel state
looks like, how a ``DataIterator`` says which samples a micro-batch holds,
which keys a batch dict has, how the replay filler calls its register
function, what a response-offset helper returns. The checks
(`layoutcheck.runtime.contract.checks`) know none of it, and `LayoutChecker` asks an
adapter object, so another trainer family is one more adapter class.

Every reader raises `LayoutSpecError` on a shape it does not know; the
checker turns that into a note and lets the call through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any, NamedTuple

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError, describe_value
from layoutcheck.runtime.contract.common import is_mapping
from layoutcheck.runtime.contract.meta import metadata_only, numel, shape_of

__all__ = ["BatchCall", "MilesAdapter", "OffsetCall", "Parallel", "ReplayCall", "RoleSpec", "TrainerLayout"]


@dataclass(frozen=True)
class RoleSpec:
    """What a function must accept to be wrapped in one role: parameters it must name, and why."""

    label: str
    """The role as messages say it (``the batch builder``)."""
    required: Mapping[str, str]
    """Parameter name -> what it must carry (shown as "expected")."""
    optional: tuple[str, ...] = ()
    """Parameters read when present (never positional-only)."""


class Parallel(NamedTuple):
    """This rank's TP and CP coordinates; ``known`` is False when no parallel state was configured.

    A named tuple: it is part of the key of every judged micro-batch, and a
    tuple hashes in C.
    """

    tp_size: int = 1
    tp_rank: int = 0
    cp_size: int = 1
    cp_rank: int = 0
    known: bool = False


_ONE_RANK = Parallel()


@dataclass(frozen=True)
class TrainerLayout:
    """What a trainer's ``args`` select: format (``None``: not known), CP scheme, alignment unit."""

    qkv_format: str | None
    scheme: str
    unit: geometry.AlignmentUnit
    sequence_parallel: bool = False
    """Sequence parallelism: replay rows are split over TP ranks in the SP region (G5)."""


class BatchCall(NamedTuple):
    """The arguments of one batch-builder call that the checks need."""

    iterator: Any
    qkv_format: str
    scheme: str
    pad_multiplier: int


@dataclass(frozen=True)
class ReplayCall:
    """The arguments of one replay-filler call that the checks need."""

    iterator: Any
    """The iterator the filler walks (the first of the list, one per virtual pipeline stage)."""
    rollout_data: Mapping[str, Any]
    data_key: str
    args: Any
    micro_batches: int
    """How many micro-batches the filler walks: ``sum(num_microbatches)``."""
    register_name: str
    sp_region: bool
    """In the sequence-parallel region: rows are split over TP when `TrainerLayout.sequence_parallel`."""


class OffsetCall(NamedTuple):
    """One response-offset-helper call: lengths, the layout arguments, and CP coordinates if passed."""

    total_length: int
    response_length: int
    qkv_format: object
    max_seq_len: object
    cp_rank: int | None
    cp_size: int | None


def _int(what: str, value: object, minimum: int = 0) -> int:
    # A Python (or numpy) integer; a tensor would need a value read (a GPU sync), so it is refused.
    if type(value) is int and value >= minimum:  # the common case, without the checks below
        return value
    with metadata_only():
        array = hasattr(value, "shape")
    if isinstance(value, bool) or not isinstance(value, Integral) or array or value < minimum:  # type: ignore[operator]
        raise LayoutSpecError(f"{what} must be an integer >= {minimum}, got {describe_value(value, 60, quote=True)}")
    return int(value)  # type: ignore[arg-type]


_MILES_ROLES: Mapping[str, RoleSpec] = {
    "producer": RoleSpec(
        "the producer",
        {"args": "the trainer's args namespace (qkv_format, allgather_cp, data_pad_size_multiplier, ...)"},
    ),
    "batch_builder": RoleSpec(
        "the batch builder",
        {
            "data_iterator": "the DataIterator the micro-batch comes from",
            "pad_multiplier": "the stream pad multiplier",
            "qkv_format": "the layout, 'bshd' or 'thd'",
            "allgather_cp": "the CP scheme (True: contiguous windows)",
        },
    ),
    "replay_filler": RoleSpec(
        "the replay filler",
        {
            "args": "the trainer's args namespace",
            "data_iterator": "the list of DataIterators (one per virtual pipeline stage)",
            "num_microbatches": "the micro-batch count of each step",
            "rollout_data": "the rollout dict",
            "data_key": "the replay field's key",
            "register_replay_list_func": "the register function, called (replay_list, replay_data, **kwargs)",
        },
        optional=("if_sp_region",),
    ),
    "offset_helper": RoleSpec(
        "the response-offset helper",
        {
            "total_length": "the sample's T",
            "response_length": "the sample's R",
            "qkv_format": "the layout",
            "max_seq_len": "the sample's padded length P (BSHD)",
        },
        optional=("cp_rank", "cp_size"),
    ),
}


class MilesAdapter:
    """Reads the shapes of a Miles-style trainer (and slime, minitrainer).

    * parallel state: ``get_parallel_state()`` returns ``.tp`` and ``.cp``
      groups with integer ``.size`` and ``.rank``;
    * producer: ``get_rollout_data(args, rollout_data_ref, witness_info=None)``
      returns ``(rollout_data, store_result)``;
    * ``args``: ``qkv_format``, ``allgather_cp``, ``data_pad_size_multiplier``
      (default 128), ``compress_ratios`` (a list, possibly empty or ``None``:
      the unit uses its largest entry), ``sequence_parallel``;
    * ``DataIterator``: ``.offset``, ``.micro_batch_size`` or
      ``.micro_batch_indices``, ``.rollout_data``;
    * batch builder: ``get_batch(data_iterator, keys, pad_multiplier=128,
      qkv_format="thd", get_position_ids=False, allgather_cp=False)``;
    * replay filler: ``fill_replay_data(*, args, models, data_iterator,
      num_microbatches, rollout_data, data_key, replay_list,
      register_replay_list_func, if_sp_region=True, ...)``, walking
      ``data_iterator[0]`` from its reset for ``sum(num_microbatches)``
      micro-batches and calling ``register_replay_list_func(replay_list,
      replay_data, models=models)`` once each (no index);
    * response offsets: ``get_logits_and_tokens_offset_with_cp(total_length,
      response_length, qkv_format="thd", max_seq_len=None, cp_rank=None,
      cp_size=None)`` returns ``(c, chunks, logits, tokens)``, two ranges
      each; omitted ``cp_rank``/``cp_size`` come from the parallel state;
    * response-space tensors are sliced with the zigzag rule under both CP
      schemes (`response_scheme`): only tokens, masks and replay use
      all-gather windows.
    """

    roles: Mapping[str, RoleSpec] = _MILES_ROLES
    _last_parallel: tuple[Any, tuple[object, ...], Parallel] | None = None
    """The last parallel-state function asked, its raw coordinates and their `Parallel` (ints only)."""
    register_argument = "register_replay_list_func"
    response_scheme = "zigzag"
    """The CP rule response fields and offsets follow, whatever the tokens' scheme."""

    # --- parallel state and args --------------------------------------

    def parallel(self, parallel_state: Callable[[], Any] | None) -> Parallel:
        """This rank's coordinates from a ``get_parallel_state``-like callable (one rank if ``None``)."""
        if parallel_state is None:
            return _ONE_RANK
        state = parallel_state()
        tp, cp = getattr(state, "tp", None), getattr(state, "cp", None)
        raw = (getattr(tp, "size", None), getattr(tp, "rank", None), getattr(cp, "size", None), getattr(cp, "rank", None))
        last = self._last_parallel
        # Every hooked call asks; the answer changes only when the trainer sets a new state. Plain ints
        # only on this path: comparing a tensor would read its value.
        if (last is not None and last[0] is parallel_state and type(raw[0]) is type(raw[1]) is type(raw[2])
                is type(raw[3]) is int and raw == last[1]):
            return last[2]
        values = {}
        for group in ("tp", "cp"):
            info = getattr(state, group, None)
            for part in ("size", "rank"):
                value = getattr(info, part, None)
                values[f"{group}_{part}"] = _int(f"`parallel_state().{group}.{part}`", value, 1 if part == "size" else 0)
        if values["cp_rank"] >= values["cp_size"] or values["tp_rank"] >= values["tp_size"]:
            raise LayoutSpecError(f"the parallel state has a rank outside its group: {values}")
        par = Parallel(**values, known=True)
        self._last_parallel = (parallel_state, raw, par)
        return par

    def qkv_format(self, args: Any) -> str | None:
        """``args.qkv_format``, or ``None`` when ``args`` do not say (never a default: the layout is not guessed)."""
        value = getattr(args, "qkv_format", None)
        return None if value is None else geometry.check_layout(value)

    def layout(self, args: Any, parallel: Parallel, *, layout: str | None = None) -> TrainerLayout:
        """Format (``layout`` if given, else ``args``), scheme and alignment unit ``A`` (via `geometry`)."""
        if args is None:
            raise LayoutSpecError("the trainer's `args` are needed to know the CP scheme and the alignment unit")
        scheme = "allgather" if getattr(args, "allgather_cp", False) else "zigzag"
        unit = geometry.alignment_unit(
            parallel.tp_size,
            getattr(args, "data_pad_size_multiplier", geometry.DEFAULT_PAD_MULTIPLIER),
            cp_size=parallel.cp_size,
            compression_ratio=self.compression_ratio(args),
            scheme=scheme,
        )
        return TrainerLayout(
            qkv_format=layout if layout is not None else self.qkv_format(args),
            scheme=scheme,
            unit=unit,
            sequence_parallel=bool(getattr(args, "sequence_parallel", False)),
        )

    def compression_ratio(self, args: Any) -> int | None:
        """The compressed-attention ratio the unit uses: the largest of ``args.compress_ratios`` (``None``: none)."""
        ratios = getattr(args, "compress_ratios", None)
        if ratios is None:
            return None
        if not isinstance(ratios, (list, tuple)):
            raise LayoutSpecError(f"`args.compress_ratios` must be a list of ints, got {describe_value(ratios, 60)}")
        largest = max((_int("`args.compress_ratios[i]`", k) for k in ratios), default=0)
        return largest or None  # 0 (or an empty list) means no compressed attention

    # --- producer -------------------------------------------------------

    def producer_args(self, call: Mapping[str, Any]) -> Any:
        """The ``args`` namespace of a producer call (its bound arguments)."""
        return call.get("args")

    def producer_rollout(self, result: Any) -> Mapping[str, Any]:
        """The ``rollout_data`` dict out of the producer's ``(rollout_data, store_result)``."""
        if isinstance(result, tuple) and result and isinstance(result[0], Mapping):
            return result[0]
        if isinstance(result, Mapping):
            return result
        raise LayoutSpecError(
            f"the producer returned {type(result).__name__}; expected (rollout_data, store_result) "
            "with rollout_data a dict of per-sample lists"
        )

    # --- micro-batches --------------------------------------------------

    def first_iterator(self, data_iterator: Any) -> Any:
        """The iterator to follow (the first one when given a list, one per virtual pipeline stage)."""
        if isinstance(data_iterator, (list, tuple)):
            if not data_iterator:
                raise LayoutSpecError("`data_iterator` is an empty list")
            return data_iterator[0]
        return data_iterator

    def next_micro_batch(self, iterator: Any) -> int | None:
        """The index ``k`` of the micro-batch the iterator hands out next (``None``: unknown)."""
        offset = getattr(iterator, "offset", None)
        if not isinstance(offset, int):
            return None
        if getattr(iterator, "micro_batch_indices", None) is not None:
            return offset  # the offset counts micro-batches of the schedule
        size = getattr(iterator, "micro_batch_size", None)
        return offset // size if isinstance(size, int) and size > 0 else None

    def micro_batch_samples(self, iterator: Any, k: int | None) -> list[int] | None:
        """The rollout indices of the samples in micro-batch ``k`` of the iterator's schedule (``None``: unknown)."""
        if k is None:
            return None
        indices = getattr(iterator, "micro_batch_indices", None)
        if indices is not None:
            return [int(i) for i in indices[k]] if 0 <= k < len(indices) else None
        size = getattr(iterator, "micro_batch_size", None)
        if not isinstance(size, int) or size < 1:
            return None
        total = len(self.rollout_of(iterator).get("tokens") or ())
        samples = list(range(k * size, min((k + 1) * size, total)))
        return samples or None

    def rollout_of(self, iterator: Any) -> Mapping[str, Any]:
        """The rollout dict an iterator walks (empty when it has none)."""
        data = getattr(iterator, "rollout_data", None)
        return data if is_mapping(data) else {}

    def sample_lists(
        self, rollout_data: Mapping[str, Any], samples: Sequence[int], bshd: bool
    ) -> tuple[list[Any] | None, list[Any] | None, list[Any] | None, list[int] | None]:
        """``max_seq_lens`` (BSHD only), ``total_lengths``, ``response_lengths`` and token counts of ``samples``.

        One pass, no copies of the whole lists: every batch-builder and
        replay-filler call reads them (call inside `metadata_only()`).
        """
        top = max(samples, default=-1)

        def pick(key: str) -> list[Any] | None:
            values = rollout_data.get(key)
            if values is None:
                return None
            if top >= len(values):
                raise LayoutSpecError(f"micro-batch samples {list(samples)} run past the {len(values)} entries of `{key}`")
            return [values[i] for i in samples]

        lens = pick("max_seq_lens") if bshd else None
        totals, responses, tokens = pick("total_lengths"), pick("response_lengths"), pick("tokens")
        if tokens is not None:
            tokens = [numel(t) for t in tokens]
            if None in tokens:
                tokens = None
        return lens, totals, responses, tokens

    # --- batch builder ------------------------------------------------

    def batch_call(self, call: Mapping[str, Any]) -> BatchCall:
        """Read a ``get_batch`` call's bound arguments (defaults applied: what the builder does)."""
        return BatchCall(
            iterator=call.get("data_iterator"),
            qkv_format=geometry.check_layout(call.get("qkv_format")),  # type: ignore[arg-type]
            scheme="allgather" if call.get("allgather_cp") else "zigzag",
            pad_multiplier=_int("`pad_multiplier`", call.get("pad_multiplier"), 1),
        )

    def batch_padded(self, batch: Mapping[str, Any], rollout_lens: Sequence[int] | None) -> int | None:
        """The ``P`` a BSHD batch builder uses: the first entry of the micro-batch's ``max_seq_lens``.

        Without static buckets; with them, the checker reads ``P`` from the
        batch's shape (`batch_local_length`).
        """
        lens = batch.get("max_seq_lens") if is_mapping(batch) else None
        lens = lens if lens else rollout_lens
        return lens[0] if lens else None

    def batch_local_length(self, batch: Mapping[str, Any]) -> int | None:
        """The local length ``L`` a BSHD batch was laid out with: the last dim of its ``(B, L)`` tokens."""
        shape = self.batch_shape(batch)
        return int(shape[-1]) if shape is not None and len(shape) == 2 else None

    def batch_shape(self, batch: Mapping[str, Any]) -> tuple[int, ...] | None:
        """The local shape of the batch's ``tokens`` tensor (``None`` when it has none)."""
        if not is_mapping(batch):
            return None
        with metadata_only():
            shape = shape_of(batch.get("tokens"))
        return None if shape is None else tuple(int(d) for d in shape)

    def batch_rows(self, batch: Mapping[str, Any]) -> int | None:
        """Token positions the builder laid out on this rank (``B * L``, or ``N`` under THD)."""
        with metadata_only():
            return numel(batch.get("tokens")) if is_mapping(batch) else None

    # --- replay filler --------------------------------------------------

    def replay_call(self, call: Mapping[str, Any]) -> ReplayCall:
        """Read a ``fill_replay_data`` call's bound arguments (defaults applied)."""
        counts = call.get("num_microbatches")
        if isinstance(counts, (list, tuple)):
            total = sum(_int("`num_microbatches[i]`", n) for n in counts)
        else:
            total = _int("`num_microbatches`", counts)
        iterator = self.first_iterator(call.get("data_iterator"))
        rollout = self.rollout_of(iterator) or call.get("rollout_data") or {}
        if not isinstance(rollout, Mapping):
            raise LayoutSpecError(f"`rollout_data` must be a dict of per-sample lists, got {type(rollout).__name__}")
        return ReplayCall(
            iterator=iterator,
            rollout_data=rollout,
            data_key=str(call.get("data_key")),
            args=call.get("args"),
            micro_batches=total,
            register_name=self.register_argument,
            sp_region=bool(call.get("if_sp_region", True)),
        )

    def registered_replay(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        """The replay tensor out of one register call ``(replay_list, replay_data, **kwargs)``."""
        if len(args) >= 2:
            return args[1]
        if "replay_data" in kwargs:
            return kwargs["replay_data"]
        raise LayoutSpecError(
            "the register function was called without `replay_data` (expected (replay_list, replay_data, **kwargs))"
        )

    # --- response offsets ---------------------------------------------

    def offset_call(self, call: Mapping[str, Any]) -> OffsetCall:
        """Lengths, layout arguments and CP coordinates of an offset-helper call (``None``: not passed)."""
        cp_rank, cp_size = call.get("cp_rank"), call.get("cp_size")
        return OffsetCall(
            total_length=_int("`total_length`", call.get("total_length")),
            response_length=_int("`response_length`", call.get("response_length")),
            qkv_format=call.get("qkv_format"),
            max_seq_len=call.get("max_seq_len"),
            cp_rank=None if cp_rank is None else _int("`cp_rank`", cp_rank),
            cp_size=None if cp_size is None else _int("`cp_size`", cp_size, 1),
        )

    def offset_logit_ranges(self, result: Any) -> list[tuple[int, int]]:
        """The response-logit ranges out of an offset helper's ``(c, chunks, logits, tokens)`` (empties dropped)."""
        if not isinstance(result, (tuple, list)) or len(result) != 4:
            raise LayoutSpecError(
                f"the offset helper returned {describe_value(result, 80)}; expected (chunk_size, chunks, logits, tokens)"
            )
        logits = result[2]
        ranges = [logits] if isinstance(logits, (tuple, list)) and logits and not isinstance(logits[0], (tuple, list)) else logits
        out = []
        for pair in ranges:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise LayoutSpecError(f"the offset helper's logit ranges are {describe_value(logits, 80)}; expected (start, end) pairs")
            a, b = (_int("a logit range bound", x) for x in pair)
            if b > a:
                out.append((a, b))
        return out
