"""Runs in every rank of a Miles job: training steps' data paths, real functions, in the trainer's order.

The launch parameters hold ``steps``: ``[{"name", "rollout", "args"}]``, where
``rollout`` holds `trainers.rollouts.train_data` keyword arguments
(``lengths``, ``response_lengths``, ...) and ``args`` the
``argparse.Namespace`` fields the data path reads (`ARGS` are the defaults).
Each step runs on its own rollout, as Miles's Megatron actor and forward
steps run it:

1. ``split_train_data_by_dp(args, data, {"dp_size": 1})`` (the rollout side)
   puts the DP shard into the object store;
2. ``get_rollout_data(args, refs)`` (the owner: tensors, ``max_seq_lens``
   under BSHD, CP-sliced response fields);
3. ``get_data_iterator(args, None, rollout_data)``;
4. ``fill_replay_data(...)`` for ``rollout_routed_experts`` when the rollout
   has them, with a register function that records what it is given;
5. ``get_batch(data_iterator[0], KEYS, args.data_pad_size_multiplier,
   args.qkv_format, allgather_cp=args.allgather_cp)`` once per micro-batch.

Each stage's outcome is reported under ``<name>/rollout``, ``<name>/schedule``,
``<name>/replay`` and ``<name>/batch:<k>`` as plain lists, or as the error it
raised: Miles's fail-closed asserts are results too.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from trainers import ranks
from trainers.rollouts import train_data

ARGS: dict[str, Any] = {
    "qkv_format": "bshd", "allgather_cp": False, "data_pad_size_multiplier": 128, "compress_ratios": None,
    "sequence_parallel": False, "micro_batch_size": 1, "use_dynamic_batch_size": False, "max_tokens_per_gpu": None,
    "use_dynamic_global_batch_size": False, "balance_data": False, "enable_witness": False,
    "delay_split_train_data_by_dp": False, "true_on_policy_mode": False, "n_samples_per_prompt": 1,
}
"""The fields of Miles's ``args`` that its data path reads, with harness defaults (``global_batch_size``: the
rollout's sample count unless given)."""

KEYS = ["tokens", "loss_masks", "multimodal_train_inputs", "total_lengths", "response_lengths", "max_seq_lens",
        "rollout_log_probs"]
"""What the forward step asks ``get_batch`` for (``miles/backends/megatron_utils/model.py``)."""


SIGNED = ("miles.backends.training_utils.data:get_rollout_data", "miles.backends.training_utils.data:get_batch",
          "miles.backends.training_utils.data:DataIterator", "miles.backends.training_utils.data:get_data_iterator",
          "miles.backends.training_utils.replay_data:fill_replay_data",
          "miles.backends.training_utils.cp_utils:slice_with_cp")
"""Functions whose real signatures every job reports (compared with `trainers.miles_harness.SIGNATURES`)."""


def _lengths(values: list | None) -> list[int] | None:
    return None if values is None else [len(v) for v in values]


def rollout_summary(rollout: dict) -> dict:
    return {"total_lengths": list(rollout["total_lengths"]), "response_lengths": list(rollout["response_lengths"]),
            "max_seq_lens": rollout.get("max_seq_lens"), "tokens": _lengths(rollout["tokens"]),
            "loss_masks": _lengths(rollout["loss_masks"]),
            "rollout_log_probs": [v.tolist() for v in rollout["rollout_log_probs"]],
            "rollout_routed_experts": [list(v.shape) for v in rollout.get("rollout_routed_experts", [])]}


def batch_summary(batch: dict, qkv_format: str) -> dict:
    tokens = batch["tokens"]
    summary = {"tokens": tokens.tolist(), "shape": list(tokens.shape), "max_seq_lens": batch.get("max_seq_lens"),
               "total_lengths": list(batch["total_lengths"]), "loss_mask_shape": list(batch["full_loss_masks"].shape),
               "loss_mask_sum": int(batch["full_loss_masks"].sum()),
               "unconcat_tokens": _lengths(batch["unconcat_tokens"]),
               "rollout_log_probs": [v.tolist() for v in batch["rollout_log_probs"]]}
    if qkv_format == "thd":
        summary.update(cu_seqlens=batch["cu_seqlens"].tolist(), max_seqlen=int(batch["max_seqlen"]))
    return summary


def step(name: str, rollout_kwargs: dict, arg_values: dict) -> None:
    """One step's data path on a rollout of its own; reports under ``name/``."""
    from miles.backends.training_utils.data import get_batch, get_data_iterator, get_rollout_data
    from miles.backends.training_utils.replay_data import fill_replay_data
    from miles.ray.rollout.train_data_conversion import split_train_data_by_dp

    data = train_data(**rollout_kwargs)
    args = Namespace(**{**ARGS, "global_batch_size": len(data["tokens"]), **arg_values})
    refs = split_train_data_by_dp(args, data, {"dp_size": 1})
    rollout, _ = get_rollout_data(args, refs)
    ranks.report(f"{name}/rollout", rollout_summary(rollout))
    iterators, num_microbatches = get_data_iterator(args, None, rollout)
    ranks.report(f"{name}/schedule", {"num_microbatches": list(num_microbatches), "iterators": len(iterators),
                                      "micro_batch_indices": iterators[0].micro_batch_indices})
    if "rollout_routed_experts" in rollout:
        calls: list[dict] = []

        def register(replay_list: list, replay_data: Any, **kwargs: Any) -> None:
            calls.append({"shape": list(replay_data.shape), "rows": replay_data[:, 0, 0].tolist()})

        ranks.attempt(f"{name}/replay", lambda: fill_replay_data(
            args=args, models=None, data_iterator=iterators, num_microbatches=num_microbatches, rollout_data=rollout,
            data_key="rollout_routed_experts", replay_list=[], register_replay_list_func=register) or calls)
        for iterator in iterators:  # fill_replay_data resets them when it finishes; after an error too
            iterator.reset()
    for k in range(sum(num_microbatches)):
        ranks.attempt(f"{name}/batch:{k}", lambda: batch_summary(get_batch(
            iterators[0], KEYS, args.data_pad_size_multiplier, args.qkv_format, allgather_cp=args.allgather_cp),
            args.qkv_format))


def main() -> None:
    ranks.report("signatures", ranks.signatures(SIGNED))
    for spec in ranks.params()["steps"]:
        step(spec["name"], spec["rollout"], spec.get("args", {}))


if __name__ == "__main__":
    main()
