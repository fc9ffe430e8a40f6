"""verl's Megatron data path on CPU, under torchrun: micro-batching, packing, the model's stand-in, unpacking.

Run by `tests/test_verl_preset.py` with ``torchrun --nproc-per-node 2`` on a
``PYTHONPATH`` that holds verl's real ``verl.models.mcore.util`` and
``verl.utils.seqlen_balancing`` of a pinned version (`realcode.verl_tree`).
The two processes are one context-parallel group (cp = 2; the tensor
parallel size is 2, which verl's alignment reads). Each step:

1. ``rearrange_micro_batches`` splits the batch by token count;
2. for each micro-batch, ``preprocess_packed_seqs`` packs it into this rank's
   zigzag chunks (every micro-batch on every rank, whatever one of them
   raised, so that the ranks stay in step); the "model" is the identity;
3. ``postprocess_packed_seqs`` all-gathers the ranks' streams and unpacks
   them into rows.

The job compares what comes back with the input ids (``roundtrip``): verl
0.7.0 corrupts short samples on cp rank 1 without an error (DESIGN.md
section 10, class 3); 0.9.1 does not. Before unpacking, the ranks agree on
whether any of them raised (a rank that stopped would leave the other in
its all-gather). It never mentions layoutcheck: the environment decides.
"""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist

LENGTHS = [3, 21, 11, 29, 5, 17]
"""True lengths: 3 and 5 are the short samples verl 0.7.0 cuts wrong on cp rank 1 (P = 8, chunk = 2)."""
WIDTH = 32


def batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(1, 1000, (len(LENGTHS), WIDTH), generator=g)
    mask = torch.zeros(len(LENGTHS), WIDTH, dtype=torch.bool)
    for i, n in enumerate(LENGTHS):
        start = (WIDTH - n) // 3  # left padding before the prompt, right padding after the response
        mask[i, start:start + n] = True
    return {"input_ids": ids * mask, "attention_mask": mask}


def step(rank: int) -> dict[str, object]:
    from megatron.core import parallel_state as mpu
    from verl.models.mcore.util import postprocess_packed_seqs, preprocess_packed_seqs
    from verl.utils.seqlen_balancing import rearrange_micro_batches

    mpu.set_state(tp=2, cp=2, cp_rank=rank, group=dist.group.WORLD)
    data = batch()
    error: Exception | None = None
    packed = []
    micro_batches, indices = rearrange_micro_batches(data, max_token_len=48)
    for mb in micro_batches:  # every rank packs every micro-batch, so that the ranks stay in step
        try:
            stream, params = preprocess_packed_seqs(mb["input_ids"], mb["attention_mask"], pre_process=True)
            packed.append((mb, stream, params))
        except Exception as err:  # noqa: BLE001 - what the step raised is the result
            error = error or err
    failed = torch.tensor([1 if error is not None else 0])
    dist.all_reduce(failed)  # a rank that raised must not leave the other waiting in its all-gather
    if error is not None or int(failed) > 0:
        return {"type": type(error).__name__ if error else "peer failed", "message": str(error or ""),
                "invariants": sorted({v.invariant for v in getattr(error, "violations", ())})}
    roundtrip = True
    for mb, stream, params in packed:
        rows = postprocess_packed_seqs(stream.unsqueeze(-1).float(), params, mb["attention_mask"],
                                       mb["input_ids"].shape[0], WIDTH, post_process=True)
        roundtrip &= bool(torch.equal(rows[..., 0].long() * mb["attention_mask"], mb["input_ids"]))
    return {"type": None, "invariants": [], "roundtrip": roundtrip, "micro_batches": [list(i) for i in indices],
            "streams": [stream.tolist() for _, stream, _ in packed]}


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = {"step": step(rank)}
    session = sys.modules.get("layoutcheck.runtime.activation.session")
    active = session.active_session() if session else None
    out["session"] = None if active is None else {
        "hooks": sorted(str(h) for h in active.hooks), "violations": len(active.violations), "notes": active.notes}
    with open(f"{sys.argv[1]}.{rank}.json", "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
