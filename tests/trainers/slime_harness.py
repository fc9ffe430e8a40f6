"""slime's data path on CPU from a pinned checkout: run training steps, or any script, in its CP ranks.

    checkout = find_checkout("slime", "buggy")             # from LAYOUTCHECK_SLIME_CHECKOUT (skips if unset)
    runs = run_slime_step(checkout, deps, out=tmp, cp=2, steps=[{"name": "s", "rollout": {"lengths": [37, 90]}}])
    runs[0]["s/replay"], runs[0]["s/batch:0"]

``deps`` is the folder of `trainers.pins.SLIME_DEPS` (`install`). Each rank
is a real process of one gloo group with Megatron's parallel state
(`trainers.megatron_rank`, real megatron-core) and the stubs of
`STUBS`; `run_slime` runs any script there, `run_slime_step` runs
`trainers.slime_step`.

The real functions at both pinned commits (2dffecc08 and a93386e51 differ
only in ``fill_routing_replay``), in layout terms; `SIGNATURES` is checked
against the checkout by the tests:

``slime.utils.data.process_rollout_data(args, rollout_data_ref, dp_rank, dp_size) -> rollout_data``
    Global rank 0 ``ray.get`` s the rollout and broadcasts it; ``total_lengths``
    (``T_i``) are computed from ``tokens``; every per-sample list is cut to
    this DP rank's samples (``[dp_rank::dp_size]``, or balanced partitions
    that keep prompt groups together).

``MegatronTrainRayActor._get_rollout_data(self, rollout_data_ref) -> rollout_data``
    The owner (THD only, no ``max_seq_lens``): ``tokens`` and ``loss_masks``
    become tensors (``T_i`` and ``R_i``), ``rollout_log_probs`` are CP-sliced
    with ``slice_log_prob_with_cp`` (the zigzag chunks of the sample padded to
    a multiple of ``2 cp``), ``rollout_routed_experts`` stay ``[T_i - 1, layers,
    topk]``.

``slime.backends.megatron_utils.data.DataIterator(rollout_data, micro_batch_size=None, micro_batch_indices=None)``
and ``get_data_iterator(args, model, rollout_data) -> (iterators, num_microbatches)``: as Miles's (whose are
derived from these): contiguous micro-batches, or balanced index schedules with the count all-reduced MAX over
Megatron's DP group.

``slime.backends.megatron_utils.data.get_batch(data_iterator, keys, pad_multiplier=128) -> batch``
    Packed THD: each sample zero-padded to a multiple of ``2 cp`` and
    zigzag-sliced by ``slice_with_cp(t, 0)``, concatenated, the stream padded
    to a multiple of ``tp * pad_multiplier`` (called with
    ``args.data_pad_size_multiplier``); ``cu_seqlens`` = local boundaries
    times ``cp`` (a last segment for the stream pad); ``tokens`` ``[1,
    stream]``, ``unconcat_tokens``, ``packed_seq_params`` (megatron-core
    ``PackedSeqParams``, ``qkv_format="thd"``).

``slime.backends.megatron_utils.cp_utils.slice_with_cp(tokens, pad_value) -> tensor``
    The packed rule only: pad (a value, or a callable ``pad(t, n)``) to a
    multiple of ``2 cp``, keep chunks ``r`` and ``2cp-1-r``. Reads CP size and
    rank from megatron-core's parallel state.

``MegatronTrainRayActor.fill_routing_replay(self, data_iterator, num_microbatches, rollout_data)``
    For every micro-batch: the replay arrays (``T_i - 1`` rows) are laid out
    like the tokens and recorded, per MoE layer, on the module-level
    ``RoutingReplay.all_routing_replays`` (sequence-parallel: this TP rank's
    slice). At 2dffecc08 the rows are sliced with the packed rule as they are
    (``T_i - 1`` long, so every later sample's rows start earlier than its
    tokens and the zigzag chunks differ) and the stream is padded to
    ``tp * 128``; a93386e51 first pads each sample by one row (to ``T_i``) and
    pads the stream to ``tp * data_pad_size_multiplier``, like ``get_batch``.
    Pad rows are ``arange(...) % num_experts`` (valid expert ids).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainers.checkouts import Checkout
from trainers.ranks import RankRun, launch

__all__ = ["SIGNATURES", "STUBS", "run_slime", "run_slime_step"]

STUBS = ("sglang", "torch_memory_saver", "megatron.training", "wandb", "slime.utils.fp8_kernel")
"""`trainers.stubs.MODULE_STUBS` that slime's actor module needs to import on CPU."""

SIGNATURES: dict[str, str] = {
    "slime.backends.megatron_utils.data:get_batch": (
        "(data_iterator: 'DataIterator', keys: collections.abc.Sequence[str], pad_multiplier: int = 128) -> "
        'dict[str, torch.Tensor | megatron.core.packed_seq_params.PackedSeqParams | list[torch.Tensor] | '
        'None]'),
    "slime.backends.megatron_utils.data:get_data_iterator": (
        '(args: argparse.Namespace, model: torch.nn.modules.module.Module | '
        'collections.abc.Sequence[torch.nn.modules.module.Module], rollout_data: dict[str, list[torch.Tensor]'
        ' | list[int] | list[float] | list[str]]) -> '
        'tuple[list[slime.backends.megatron_utils.data.DataIterator], list[int]]'),
    "slime.backends.megatron_utils.data:DataIterator": (
        '(rollout_data: dict[str, list[torch.Tensor] | list[int] | list[float] | list[str]], '
        'micro_batch_size: int | None = None, micro_batch_indices: list[list[int]] | None = None) -> None'),
    "slime.backends.megatron_utils.cp_utils:slice_with_cp": (
        '(tokens: torch.Tensor, pad_value: tuple[int, float, collections.abc.Callable]) -> torch.Tensor'),
    "slime.utils.data:process_rollout_data": (
        '(args, rollout_data_ref, dp_rank, dp_size)'),
    "slime.backends.megatron_utils.actor:MegatronTrainRayActor._get_rollout_data": (
        '(self, rollout_data_ref: slime.utils.ray_utils.Box) -> dict[str, list[torch.Tensor] | list[int] | '
        'list[float] | list[str]]'),
    "slime.backends.megatron_utils.actor:MegatronTrainRayActor.fill_routing_replay": (
        '(self, data_iterator, num_microbatches, rollout_data)'),
}
"""``module:function`` -> its signature at both pinned commits, as ``inspect.signature`` prints it."""


def run_slime(checkout: Checkout, deps: Path, target: str | Path, *, out: Path, cp: int = 1, tp: int = 1,
              parameters: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
              timeout: float = 300.0) -> list[RankRun]:
    """Run ``target`` (a ``.py`` path or module name) in the ``cp`` ranks of one slime job; their `RankRun` s."""
    harness = {"cp": cp, "tp": tp, "stubs": list(STUBS), "cuda_on_cpu": True}
    return launch(cp, ["-m", "trainers.megatron_rank", str(target)], out=out, pythonpath=[checkout.path, deps],
                  parameters={**(parameters or {}), "harness": harness}, env=env, timeout=timeout)


def run_slime_step(checkout: Checkout, deps: Path, *, out: Path, steps: Sequence[Mapping[str, Any]], cp: int = 1,
                   tp: int = 1, env: Mapping[str, str] | None = None, timeout: float = 300.0) -> list[RankRun]:
    """Training steps' data paths (`trainers.slime_step`) in every CP rank, one job for all ``steps``."""
    return run_slime(checkout, deps, "trainers.slime_step", out=out, cp=cp, tp=tp, env=env, timeout=timeout,
                     parameters={"steps": [dict(s) for s in steps]})
