"""Runs in every rank of a slime job (after `trainers.megatron_rank`): training steps' data paths, real functions.

The launch parameters hold ``steps``: ``[{"name", "rollout", "args"}]`` as
for `trainers.miles_step` (`ARGS` are the defaults). Each step runs as
slime's ``MegatronTrainRayActor.train`` / ``train_actor`` and its forward
steps run it, calling the actor's own methods on a stand-in ``self`` that has
only what they read (``args``, ``model``):

1. ``MegatronTrainRayActor._get_rollout_data(self, Box(ref))``: slime's
   ``process_rollout_data`` gets the rollout on global rank 0 and broadcasts
   it over torch.distributed (real), partitions it by DP rank, and the method
   makes tensors and CP-slices the rollout log-probs;
2. ``get_data_iterator(args, model, rollout_data)``;
3. ``MegatronTrainRayActor.fill_routing_replay(self, data_iterator, num_microbatches, rollout_data)``
   with one ``RoutingReplay`` per MoE layer and a real megatron-core
   ``TransformerConfig`` on ``self.model[0].module.config``;
4. ``get_batch(data_iterator[0], ["tokens", "total_lengths", "response_lengths"], args.data_pad_size_multiplier)``
   once per micro-batch (``forward_only``'s call).

The rollout reaches ``process_rollout_data`` through `LocalRay`: slime's
rollout side puts it into Ray's object store and rank 0 calls ``ray.get`` on
the reference; here ``ray`` as seen by ``slime.utils.data`` is a stand-in
whose ``get`` hands back the rollout the harness put (Ray moves the object
between processes and does not shape it; any other use of it raises).
Reports go under ``<name>/rollout``, ``<name>/schedule``, ``<name>/replay``
(per micro-batch: the rows every MoE layer's replay recorded) and
``<name>/batch:<k>``.
"""

from __future__ import annotations

from argparse import Namespace
from types import SimpleNamespace
from typing import Any

from trainers import ranks
from trainers.rollouts import train_data
from trainers.stubs import StubUsed

ARGS: dict[str, Any] = {
    "data_pad_size_multiplier": 128, "micro_batch_size": 1, "use_dynamic_batch_size": False,
    "max_tokens_per_gpu": None, "balance_data": False, "n_samples_per_prompt": 1, "sequence_parallel": False,
    "num_experts": 4,
}
"""The fields of slime's ``args`` that its data path reads, with harness defaults (``global_batch_size``: the
rollout's sample count unless given)."""

LAYERS, TOPK = 2, 2
"""MoE layers and experts a token of the harness model: the routing-replay arrays are ``[T - 1, LAYERS, TOPK]``."""

SIGNED = ("slime.backends.megatron_utils.data:get_batch", "slime.backends.megatron_utils.data:get_data_iterator",
          "slime.backends.megatron_utils.data:DataIterator", "slime.backends.megatron_utils.cp_utils:slice_with_cp",
          "slime.utils.data:process_rollout_data",
          "slime.backends.megatron_utils.actor:MegatronTrainRayActor._get_rollout_data",
          "slime.backends.megatron_utils.actor:MegatronTrainRayActor.fill_routing_replay")
"""Functions whose real signatures every job reports (compared with `trainers.slime_harness.SIGNATURES`)."""


class LocalRay:
    """``ray`` as ``slime.utils.data`` sees it: ``get`` returns what the harness put, nothing else exists."""

    def get(self, ref: Any) -> Any:
        return ref

    def __getattr__(self, attr: str) -> Any:
        raise StubUsed(f"ray.{attr}: the harness hands the rollout over in process (trainers/slime_step.py)")


def model_config() -> Any:
    """A real megatron-core ``TransformerConfig`` of ``LAYERS`` MoE layers (what ``fill_routing_replay`` reads)."""
    from megatron.core.transformer import TransformerConfig

    return TransformerConfig(num_layers=LAYERS, hidden_size=8, num_attention_heads=2, num_moe_experts=4,
                             moe_router_topk=TOPK, moe_layer_freq=1, moe_ffn_hidden_size=8,
                             use_cpu_initialization=True)


def step(name: str, rollout_kwargs: dict, arg_values: dict) -> None:
    """One step's data path on a rollout of its own; reports under ``name/``."""
    import torch.distributed as dist
    from slime.backends.megatron_utils.actor import MegatronTrainRayActor
    from slime.backends.megatron_utils.data import get_batch, get_data_iterator
    from slime.utils.ray_utils import Box
    from slime.utils.routing_replay import RoutingReplay

    data = train_data(**rollout_kwargs, layers=LAYERS, topk=TOPK)
    args = Namespace(**{**ARGS, "global_batch_size": len(data["tokens"]), **arg_values})
    model = [SimpleNamespace(module=SimpleNamespace(config=model_config()))]
    actor = SimpleNamespace(args=args, model=model)
    rollout = MegatronTrainRayActor._get_rollout_data(actor, Box(data if dist.get_rank() == 0 else None))
    ranks.report(f"{name}/rollout", {
        "total_lengths": list(rollout["total_lengths"]), "response_lengths": list(rollout["response_lengths"]),
        "rollout_log_probs": [v.tolist() for v in rollout["rollout_log_probs"]],
        "rollout_routed_experts": [list(v.shape) for v in rollout["rollout_routed_experts"]]})
    iterators, num_microbatches = get_data_iterator(args, model, rollout)
    ranks.report(f"{name}/schedule", {"num_microbatches": list(num_microbatches),
                                      "micro_batch_indices": iterators[0].micro_batch_indices})
    RoutingReplay.all_routing_replays.clear()
    replays = [RoutingReplay() for _ in range(LAYERS)]
    done = ranks.attempt(f"{name}/replay:done", lambda: MegatronTrainRayActor.fill_routing_replay(
        actor, iterators, num_microbatches, rollout) or True)
    if done:
        ranks.report(f"{name}/replay", [
            {"shape": list(replays[0].top_indices_list[k].shape),
             "rows": [r.top_indices_list[k][:, 0].tolist() for r in replays]}
            for k in range(len(replays[0].top_indices_list))])
    for iterator in iterators:
        iterator.reset()
    for k in range(sum(num_microbatches)):
        ranks.attempt(f"{name}/batch:{k}", lambda: batch_summary(get_batch(
            iterators[0], ["tokens", "total_lengths", "response_lengths"], args.data_pad_size_multiplier)))


def batch_summary(batch: dict) -> dict:
    params = batch["packed_seq_params"]
    return {"tokens": batch["tokens"].tolist(), "shape": list(batch["tokens"].shape),
            "total_lengths": list(batch["total_lengths"]), "cu_seqlens": params.cu_seqlens_q.tolist(),
            "max_seqlen": int(params.max_seqlen_q)}


def main() -> None:
    import slime.utils.data

    slime.utils.data.ray = LocalRay()  # see the module doc: the object store is a transport
    ranks.report("signatures", ranks.signatures(SIGNED))
    for spec in ranks.params()["steps"]:
        step(spec["name"], spec["rollout"], spec.get("args", {}))


if __name__ == "__main__":
    main()
