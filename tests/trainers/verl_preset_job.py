"""Runs in every rank of a verl job (after `trainers.megatron_rank`): verl's Megatron data path as its actor drives it.

For the ``verl`` preset's tests (`trainers.test_presets`): one step of
verl's real functions, every rank making every call so that the ranks stay
in step whatever one of them raised (the debug mode's cross-rank check
exchanges at each hooked call):

1. ``rearrange_micro_batches`` splits the batch by token count (a TensorDict,
   as verl's Megatron actor passes it);
2. for each micro-batch, ``preprocess_packed_seqs`` packs it into this rank's
   zigzag chunks (a LayoutError, or verl's own error, is recorded and the
   loop goes on); the "model" is the identity (the stream as floats);
3. when every rank packed every micro-batch, ``postprocess_packed_seqs``
   all-gathers the streams and unpacks them into rows.

Parameters: ``lengths`` (true lengths, right-padded to ``width``),
``max_token_len``, ``balance`` (default true; false: the batch is one
micro-batch and ``verl.utils.seqlen_balancing`` is never imported, as in a
process that runs another of verl's paths). Reported: ``step`` (``type``/``message``/``invariants`` of
the first error, the micro-batch schedule, the packed streams, whether the
round trip gave the ids back) and ``session`` (the debug mode's hooks,
violations and notes). It never mentions layoutcheck's hooks: the
environment decides.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist

from trainers import ranks
from trainers.rollouts import token_value


def batch(lengths: list[int], width: int) -> dict[str, torch.Tensor]:
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros(len(lengths), width, dtype=torch.bool)
    for i, n in enumerate(lengths):
        start = (width - n) // 3  # a left pad before the prompt, a right pad after the response
        ids[i, start:start + n] = torch.tensor([token_value(i, j) for j in range(n)])
        mask[i, start:start + n] = True
    return {"input_ids": ids, "attention_mask": mask}


def step(lengths: list[int], width: int, max_token_len: int, balance: bool = True) -> dict:
    from tensordict import TensorDict
    from verl.models.mcore.util import postprocess_packed_seqs, preprocess_packed_seqs

    data = TensorDict(batch(lengths, width), batch_size=[len(lengths)])
    error: Exception | None = None
    packed = []
    if balance:
        from verl.utils.seqlen_balancing import rearrange_micro_batches

        micro_batches, indices = rearrange_micro_batches(data, max_token_len=max_token_len)
    else:
        micro_batches, indices = [data], [list(range(len(lengths)))]
    for mb in micro_batches:
        try:
            stream, params = preprocess_packed_seqs(mb["input_ids"], mb["attention_mask"], pre_process=True)
            packed.append((mb, stream, params))
        except Exception as err:  # noqa: BLE001 - what the step raised is the result
            error = error or err
    failed = torch.tensor([0 if error is None else 1])
    dist.all_reduce(failed)  # a rank that raised must not leave the others in their all-gather
    out = {"micro_batches": [list(i) for i in indices], "streams": [s[0].tolist() for _, s, _ in packed]}
    if error is not None or int(failed) > 0:
        return {**out, "type": type(error).__name__ if error else "peer failed", "message": str(error or ""),
                "invariants": sorted({v.invariant for v in getattr(error, "violations", ())})}
    roundtrip = True
    for mb, stream, params in packed:
        rows = postprocess_packed_seqs(stream.unsqueeze(-1).float(), params, mb["attention_mask"],
                                       mb["input_ids"].shape[0], width, post_process=True)
        roundtrip &= bool(torch.equal(rows[..., 0].long() * mb["attention_mask"], mb["input_ids"]))
    return {**out, "type": None, "invariants": [], "roundtrip": roundtrip}


if __name__ == "__main__":
    parameters = ranks.params()
    ranks.report("step", step(parameters["lengths"], parameters["width"], parameters["max_token_len"],
                              parameters.get("balance", True)))
    session = sys.modules.get("layoutcheck.runtime.activation.session")
    active = session.active_session() if session else None
    ranks.report("session", None if active is None else {
        "hooks": sorted(str(h) for h in active.hooks), "violations": len(active.violations),
        "notes": active.notes, "checked": dict(active.checker.checked)})
