"""Known trainers' hook targets and boundary contracts, as data: ``preset = "verl"`` is one line for a user.

Each preset is written in the configuration's own vocabulary (hooks by
role, ``[runtime.boundaries]`` tables, coordinate sources), against the
real signatures at the versions named:

* ``miles``: radixark/miles at 31f1ca961 (docs/design.md#a-real-data-path-miles,
  ``miles/backends/training_utils``): the roles, read by
  `layoutcheck.runtime.contract.adapters`;
* ``slime``: THUDM/slime at a93386e51 and its parent 2dffecc08
  (``slime/backends/megatron_utils``, packed THD only): the producer, the
  batch builder and the routing-replay filler as roles with ``inputs``
  (``args`` on ``self``, the layout ``thd``: slime's ``get_batch`` takes
  neither ``qkv_format`` nor ``allgather_cp``; the filler registers through
  ``RoutingReplay.record``), the CP helpers as contracts, coordinates from
  Megatron's parallel state. Later slime (``get_batch(..., allgather_cp)``,
  ``prepare_routed_experts_for_routing_replay``) needs its own ``inputs``;
* ``verl``: volcengine/verl 0.7.0 to 0.9.1, its Megatron path:
  ``preprocess_packed_seqs`` / ``postprocess_packed_seqs``
  (``verl/models/mcore/util.py``) and its micro-batching
  (``rearrange_micro_batches``, ``verl/utils/seqlen_balancing.py``),
  coordinates from ``megatron.core.parallel_state``.

The wrappers read each function's own signature when they are installed,
and refuse one that does not fit (`LayoutSpecError` at install time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PRESETS", "Preset"]


@dataclass(frozen=True)
class Preset:
    """Hook targets by role, boundary contracts by function, and where the parallel coordinates come from."""

    hooks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    parallel_state: str | None = None
    boundaries: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """``[runtime.boundaries]`` tables, as a user would write them."""
    coordinates: Mapping[str, str] = field(default_factory=dict)
    """``tp-size``, ``cp-size``, ``cp-rank``, ``cp-group`` sources."""
    layout: str | None = None
    """The layout, for a trainer that has one only (and so no ``qkv_format`` to read it from)."""


_MILES = "miles.backends.training_utils"
_MPU = "megatron.core.parallel_state"
_MCORE = "verl.models.mcore.util"
_SLIME = "slime.backends.megatron_utils"
_MEGATRON_COORDINATES = {
    "tp-size": f"{_MPU}:get_tensor_model_parallel_world_size",
    "cp-size": f"{_MPU}:get_context_parallel_world_size",
    "cp-rank": f"{_MPU}:get_context_parallel_rank",
    "cp-group": f"{_MPU}:get_context_parallel_group",
}

PRESETS: Mapping[str, Preset] = {
    "miles": Preset(
        hooks={
            "producer": (f"{_MILES}.data:get_rollout_data",),
            "batch-builder": (f"{_MILES}.data:get_batch",),
            "replay-filler": (f"{_MILES}.replay_data:fill_replay_data",),
            "offset-helper": (f"{_MILES}.cp_utils:get_logits_and_tokens_offset_with_cp",),
            # hooked only while the tracer is on
            "cp-slicer": (f"{_MILES}.cp_utils:slice_with_cp",),
            "response-slicer": (f"{_MILES}.cp_utils:slice_log_prob_with_cp",),
            "loss-function": (f"{_MILES}.loss:loss_function",),
        },
        parallel_state=f"{_MILES}.parallel:get_parallel_state",
    ),
    "verl": Preset(
        boundaries={
            # verl computes T on the device (attention_mask.sum(-1)): values read at once on the CPU, from a
            # snapshot on a GPU. The stream is each sample padded to a multiple of tp * cp * 2 (tp without CP),
            # then cut into this rank's zigzag chunks (class-3 bug of 0.7.0: T data cut at P offsets).
            f"{_MCORE}:preprocess_packed_seqs": {
                "samples": "args.attention_mask",
                "args": {"input_ids": {"space": "T", "mask": "args.attention_mask"}, "attention_mask": "mask T"},
                "returns": {
                    "0": {"space": "P packed cp", "from": "args.input_ids", "pad-value": 0, "when": "pre_process"},
                    "1.cu_seqlens_q_padded": "cu P packed",
                },
                "unit": ["tp * cp * 2 if cp > 1 else tp", "16 if use_fp8_padding else 1"],
                # with fp8 padding the last sample also takes the stream's tail to a multiple of 128 units
                "tight": "not use_fp8_padding",
            },
            f"{_MCORE}:postprocess_packed_seqs": {
                "samples": "args.attention_mask",
                "args": {
                    "output": {"space": "P packed cp", "when": "post_process"},
                    "packed_seq_params.cu_seqlens_q_padded": "cu P packed",
                    "attention_mask": "mask T",
                },
                "returns": {"space": "T", "mask": "args.attention_mask", "when": "post_process"},
                "unit": ["tp * cp * 2 if cp > 1 else tp"],
                "tight": False,
            },
            # dynamic micro-batches: every sample in exactly one, the same schedule on every CP rank (X1)
            "verl.utils.seqlen_balancing:rearrange_micro_batches": {
                "samples": "args.batch.attention_mask",
                "args": {"batch.attention_mask": "mask T"},
                "returns": {"1": "schedule"},
            },
        },
        coordinates=_MEGATRON_COORDINATES,
    ),
    "slime": Preset(
        boundaries={
            # Miles's producer, batch builder and replay filler are slime's (Miles forked it): the roles, with
            # what slime takes under other names. slime lays micro-batches out packed (THD) only: no `qkv_format`.
            f"{_SLIME}.actor:MegatronTrainRayActor._get_rollout_data": {
                "role": "producer", "inputs": {"args": "args.self.args"},
            },
            f"{_SLIME}.data:get_batch": {"role": "batch-builder", "inputs": {"qkv_format": "thd", "allgather_cp": False}},
            # routing replay (R3): laid out like the tokens of each micro-batch, registered once per MoE layer
            f"{_SLIME}.actor:MegatronTrainRayActor.fill_routing_replay": {
                "role": "replay-filler",
                "inputs": {"args": "args.self.args", "data_key": "rollout_routed_experts",
                           "register_replay_list_func": "slime.utils.routing_replay:RoutingReplay.record"},
            },
            # The CP helpers, which take no layout arguments: one sample each, padded to a multiple of 2 cp.
            f"{_SLIME}.cp_utils:slice_with_cp": {
                "samples": 1,
                "args": {"tokens": "T"},
                "returns": {"space": "P cp", "from": "args.tokens", "pad-value": "pad_value"},
                "unit": ["2 * cp"],
            },
            f"{_SLIME}.cp_utils:slice_log_prob_with_cp": {
                "samples": 1,
                "args": {"log_prob": "R", "total_length": "len T", "response_length": "len R"},
                "returns": "R cp",
                "unit": ["2 * cp"],
            },
        },
        coordinates=_MEGATRON_COORDINATES,
        layout="thd",
    ),
}
