"""How to read a Miles/slime-shaped data path (DESIGN.md appendix).

All trainer-specific knowledge of the runtime lives here: where the
alignment unit comes from (``args``), what the parallel state looks like,
how a ``DataIterator`` says which samples the next micro-batch holds, which
keys a batch dict has, what a response-offset helper returns. The checks
(`layoutcheck.runtime.checks`) know none of it, and `LayoutChecker` asks an
adapter object, so another trainer family is one more adapter class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.meta import metadata_only, numel, shape_of

__all__ = ["MilesAdapter", "Parallel", "TrainerLayout"]


@dataclass(frozen=True)
class Parallel:
    """This rank's TP and CP coordinates."""

    tp_size: int = 1
    tp_rank: int = 0
    cp_size: int = 1
    cp_rank: int = 0


@dataclass(frozen=True)
class TrainerLayout:
    """The layout a trainer's ``args`` select: format, CP scheme, alignment unit."""

    qkv_format: str
    scheme: str
    unit: geometry.AlignmentUnit
    sequence_parallel: bool = False
    """Sequence parallelism: replay rows are split over TP ranks in the SP region (G5)."""


@dataclass(frozen=True)
class BatchCall:
    """The arguments of one batch-builder call that the checks need."""

    iterator: Any
    qkv_format: str
    scheme: str
    pad_multiplier: int


@dataclass(frozen=True)
class ReplayCall:
    """The arguments of one replay-filler call that the checks need."""

    iterator: Any
    rollout_data: Mapping[str, Any]
    data_key: str
    args: Any
    register_name: str
    sp_region: bool
    """In the sequence-parallel region: rows are split over TP when `TrainerLayout.sequence_parallel`."""


class MilesAdapter:
    """Reads the shapes of a Miles-style trainer (and slime, minitrainer).

    * parallel state: ``get_parallel_state()`` returns ``.tp.size``,
      ``.tp.rank``, ``.cp.size``, ``.cp.rank``;
    * producer: ``get_rollout_data(args, rollout_data_ref, witness_info=None)``
      returns ``(rollout_data, store_result)``;
    * ``args``: ``qkv_format``, ``allgather_cp``, ``data_pad_size_multiplier``,
      ``compress_ratio``, ``sequence_parallel``;
    * ``DataIterator``: ``.offset``, ``.micro_batch_size`` or
      ``.micro_batch_indices``, ``.rollout_data``;
    * batch builder: ``get_batch(data_iterator, keys, pad_multiplier=128,
      qkv_format="thd", get_position_ids=False, allgather_cp=False)``;
    * replay filler: ``fill_replay_data(*, args, data_iterator, rollout_data,
      data_key, register_replay_list_func, if_sp_region=True, ...)``;
    * response offsets: ``get_logits_and_tokens_offset_with_cp(total_length,
      response_length, cp_rank, cp_size, qkv_format="thd", max_seq_len=None)``
      returns ``(c, chunks, logits, tokens)`` (zigzag: two ranges each;
      all-gather variant: one range each).
    """

    register_argument = "register_replay_list_func"

    # --- parallel state and args --------------------------------------

    def parallel(self, parallel_state: Callable[[], Any] | None) -> Parallel:
        """This rank's coordinates from a ``get_parallel_state``-like callable (all 1/0 if ``None``)."""
        if parallel_state is None:
            return Parallel()
        state = parallel_state()
        tp, cp = getattr(state, "tp", None), getattr(state, "cp", None)
        return Parallel(
            tp_size=getattr(tp, "size", 1), tp_rank=getattr(tp, "rank", 0),
            cp_size=getattr(cp, "size", 1), cp_rank=getattr(cp, "rank", 0),
        )

    def layout(self, args: Any, parallel: Parallel) -> TrainerLayout:
        """Format, scheme and alignment unit ``A`` from the trainer's ``args`` (via `geometry`)."""
        if args is None:
            raise LayoutSpecError("the trainer's `args` are needed to know the layout and the alignment unit")
        scheme = "allgather" if getattr(args, "allgather_cp", False) else "zigzag"
        unit = geometry.alignment_unit(
            parallel.tp_size,
            getattr(args, "data_pad_size_multiplier", geometry.DEFAULT_PAD_MULTIPLIER),
            cp_size=parallel.cp_size,
            compression_ratio=getattr(args, "compress_ratio", None),
            scheme=scheme,
        )
        return TrainerLayout(
            qkv_format=getattr(args, "qkv_format", "thd"),
            scheme=scheme,
            unit=unit,
            sequence_parallel=bool(getattr(args, "sequence_parallel", False)),
        )

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
            return data_iterator[0] if data_iterator else None
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
        """The rollout indices of the samples in micro-batch ``k`` (``None``: unknown)."""
        if k is None:
            return None
        indices = getattr(iterator, "micro_batch_indices", None)
        if indices is not None:
            return list(indices[k]) if 0 <= k < len(indices) else None
        size = getattr(iterator, "micro_batch_size", None)
        if not isinstance(size, int) or size < 1:
            return None
        total = len(self.rollout_of(iterator).get("tokens") or ())
        samples = list(range(k * size, min((k + 1) * size, total)))
        return samples or None

    def rollout_of(self, iterator: Any) -> Mapping[str, Any]:
        """The rollout dict an iterator walks (empty when it has none)."""
        data = getattr(iterator, "rollout_data", None)
        return data if isinstance(data, Mapping) else {}

    def per_sample(self, rollout_data: Mapping[str, Any], key: str, samples: Sequence[int]) -> list[Any] | None:
        """``rollout_data[key]`` restricted to ``samples`` (``None`` if the key is absent)."""
        values = rollout_data.get(key)
        if values is None:
            return None
        if max(samples, default=-1) >= len(values):
            raise LayoutSpecError(f"micro-batch samples {list(samples)} run past the {len(values)} entries of `{key}`")
        return [values[i] for i in samples]

    def token_lengths(self, rollout_data: Mapping[str, Any], samples: Sequence[int]) -> list[int] | None:
        """The current token counts of ``samples`` (``tokens[i].numel()``), metadata only."""
        tokens = self.per_sample(rollout_data, "tokens", samples)
        if tokens is None:
            return None
        with metadata_only():
            counts = [numel(t) for t in tokens]
        return None if any(c is None for c in counts) else counts  # type: ignore[return-value]

    # --- batch builder ------------------------------------------------

    def batch_call(self, call: Mapping[str, Any]) -> BatchCall:
        """Read a ``get_batch`` call's bound arguments (defaults applied)."""
        return BatchCall(
            iterator=call.get("data_iterator"),
            qkv_format=call.get("qkv_format", "thd"),
            scheme="allgather" if call.get("allgather_cp") else "zigzag",
            pad_multiplier=call.get("pad_multiplier", geometry.DEFAULT_PAD_MULTIPLIER),
        )

    def batch_padded(self, batch: Mapping[str, Any], rollout_lens: Sequence[int] | None) -> int | None:
        """The ``P`` a BSHD batch builder uses: the first entry of the micro-batch's ``max_seq_lens``.

        Without static buckets; with them, the checker reads ``P`` from the
        batch's shape (`batch_local_length`).
        """
        lens = batch.get("max_seq_lens") if isinstance(batch, Mapping) else None
        lens = lens if lens else rollout_lens
        return lens[0] if lens else None

    def batch_local_length(self, batch: Mapping[str, Any]) -> int | None:
        """The local length ``L`` a BSHD batch was laid out with: the last dim of its ``(B, L)`` tokens."""
        if not isinstance(batch, Mapping):
            return None
        with metadata_only():
            shape = shape_of(batch.get("tokens"))
        return int(shape[-1]) if shape is not None and len(shape) == 2 else None

    def batch_rows(self, batch: Mapping[str, Any]) -> int | None:
        """Token positions the builder laid out on this rank (``B * L``, or ``N`` under THD)."""
        with metadata_only():
            return numel(batch.get("tokens")) if isinstance(batch, Mapping) else None

    # --- replay filler --------------------------------------------------

    def replay_call(self, call: Mapping[str, Any]) -> ReplayCall:
        """Read a ``fill_replay_data`` call's bound arguments (defaults applied)."""
        args = call.get("args")
        return ReplayCall(
            iterator=self.first_iterator(call.get("data_iterator")),
            rollout_data=call.get("rollout_data") or {},
            data_key=call.get("data_key", "replay"),
            args=args,
            register_name=self.register_argument,
            sp_region=bool(call.get("if_sp_region", True)),
        )

    # --- response offsets ---------------------------------------------

    def offset_call(self, call: Mapping[str, Any]) -> dict[str, Any]:
        """``total_length``, ``response_length``, ``cp_rank``, ``cp_size`` and the layout arguments."""
        return {
            "total_length": call.get("total_length"),
            "response_length": call.get("response_length"),
            "cp_rank": call.get("cp_rank", 0),
            "cp_size": call.get("cp_size", 1),
            "called_with": {"qkv_format": call.get("qkv_format"), "max_seq_len": call.get("max_seq_len")},
        }

    def offset_logit_ranges(self, result: Any) -> list[tuple[int, int]]:
        """The response-logit ranges out of an offset helper's result (empty ones dropped)."""
        logits = result[2]
        ranges = [logits] if logits and isinstance(logits[0], int) else list(logits)
        return [(a, b) for a, b in ranges if b > a]
