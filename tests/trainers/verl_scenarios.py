"""Runs in every rank of a verl job (after `trainers.megatron_rank` set Megatron's parallel state).

Calls verl's real Megatron-path functions on the cases in the launch
parameters and reports what they returned or raised, as plain lists: no
judgement here (the tests judge, with layoutcheck's geometry).

Parameters:

* ``packing``: ``[{"name", "lengths", "left_pad"}]``: a ``[B, S]`` batch
  (``S = max(lengths)``) whose sample ``i`` holds ``lengths[i]`` real tokens,
  right-padded (or left-padded) with mask 0. Token ``j`` of sample ``i`` is
  `trainers.rollouts.token_value` ``(i, j)``, never 0 (verl's pad value), so every position of a
  pack says which sample and token it came from. Reported per case:
  ``preprocess_packed_seqs`` (the rank's packed stream, the pack
  parameters, and the packed mask: the same call on the 0/1 mask, as the
  model path packs its labels and loss masks) and, when every rank packed without error, the
  ``postprocess_packed_seqs`` round trip of that stream (a real
  ``all_gather`` over the CP group).
* ``microbatching``: ``[{"name", "lengths", "max_token_len"}]``:
  ``rearrange_micro_batches`` on a TensorDict of the same kind of batch, as
  verl's Megatron actor calls it, then ``get_reverse_idx``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from trainers import ranks
from trainers.rollouts import token_value

SIGNED = ("verl.models.mcore.util:preprocess_packed_seqs", "verl.models.mcore.util:postprocess_packed_seqs",
          "verl.utils.seqlen_balancing:rearrange_micro_batches", "verl.utils.seqlen_balancing:get_reverse_idx")
"""Functions whose real signatures every job reports (compared with `trainers.verl_harness.SIGNATURES`)."""


def batch(lengths: list[int], *, left_pad: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask)`` of shape ``[B, max(lengths)]``, mask row ``i`` summing to ``lengths[i]``."""
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros(len(lengths), width, dtype=torch.bool)
    for i, length in enumerate(lengths):
        where = slice(width - length, width) if left_pad else slice(0, length)
        ids[i, where] = torch.tensor([token_value(i, j) for j in range(length)])
        mask[i, where] = True
    return ids, mask


def _pack(ids: torch.Tensor, mask: torch.Tensor):
    from verl.models.mcore.util import preprocess_packed_seqs

    return preprocess_packed_seqs(ids, mask, pre_process=True)


def _pack_report(packed: torch.Tensor, params, packed_mask: torch.Tensor) -> dict:
    return {"packed": packed[0].tolist(), "shape": list(packed.shape), "packed_mask": packed_mask[0].tolist(),
            "cu_seqlens_q": params.cu_seqlens_q.tolist(), "cu_seqlens_q_padded": params.cu_seqlens_q_padded.tolist(),
            "cu_seqlens_kv_padded": params.cu_seqlens_kv_padded.tolist(), "max_seqlen_q": int(params.max_seqlen_q),
            "qkv_format": params.qkv_format}


def _all_ranks_ok(ok: bool) -> bool:
    flag = torch.tensor([1 if ok else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def packing(case: dict) -> None:
    from verl.models.mcore.util import postprocess_packed_seqs

    ids, mask = batch(case["lengths"], left_pad=case.get("left_pad", False))
    name = case["name"]
    try:
        packed, params = _pack(ids, mask)
        # the model path packs labels and loss masks with the same call (logits_processor_args): a 0/1 tensor
        # shows which positions of the stream a loss would count
        packed_mask = _pack(mask.long(), mask)[0]
        ranks.report(f"pack:{name}", {"value": _pack_report(packed, params, packed_mask)})
    except Exception as exc:  # the short-sample bug raises here on some ranks
        ranks.report(f"pack:{name}", {"error": ranks.error_of(exc)})
        packed = None
    # postprocess all-gathers over the CP group: run it only if every rank has a pack, or a rank would wait forever
    if not _all_ranks_ok(packed is not None):
        ranks.report(f"unpack:{name}", {"skipped": "a rank could not pack"})
        return
    output = packed.unsqueeze(-1).float()  # the model's output [1, local stream, hidden=1]: here the tokens
    ranks.attempt(f"unpack:{name}", lambda: postprocess_packed_seqs(
        output, params, mask, ids.shape[0], ids.shape[1], post_process=True).squeeze(-1).long().tolist())


def microbatching(case: dict) -> None:
    from tensordict import TensorDict
    from verl.utils.seqlen_balancing import get_reverse_idx, rearrange_micro_batches

    ids, mask = batch(case["lengths"])
    data = TensorDict({"input_ids": ids, "attention_mask": mask,
                       "position_ids": torch.arange(ids.shape[1]).expand_as(ids).clone()}, batch_size=[ids.shape[0]])

    def split() -> dict:
        micro, indices = rearrange_micro_batches(batch=data, max_token_len=case["max_token_len"])
        flat = [i for part in indices for i in part]
        return {"indices": [list(p) for p in indices],
                "tokens": [int(m["attention_mask"].sum()) for m in micro],
                "input_ids": [m["input_ids"].tolist() for m in micro],
                "reverse": list(get_reverse_idx(flat))}

    ranks.attempt(f"microbatch:{case['name']}", split)


def main() -> None:
    import verl

    ranks.report("verl_version", verl.__version__)
    ranks.report("signatures", ranks.signatures(SIGNED))
    parameters = ranks.params()
    for case in parameters.get("packing", []):
        packing(case)
    for case in parameters.get("microbatching", []):
        microbatching(case)


if __name__ == "__main__":
    main()
