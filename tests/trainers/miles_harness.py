"""Miles's data path on CPU from a pinned checkout: run training steps, or any script, in its CP ranks.

    checkout = find_checkout("miles", "buggy")              # from LAYOUTCHECK_MILES_CHECKOUT (skips if unset)
    step = {"name": "s", "rollout": {"lengths": [100, 700, 300]}, "args": {"qkv_format": "bshd"}}
    runs = run_miles_step(checkout, deps, out=tmp, cp=2, steps=[step], env={"LAYOUTCHECK": "raise"})
    runs[0]["s/rollout"]["max_seq_lens"], runs[0]["s/batch:0"]

``deps`` is the folder of `trainers.pins.MILES_DEPS` (`install`). Each rank
is a real process of one gloo group with Miles's parallel state and an
in-process object store (`trainers.miles_rank`); `run_miles` runs any script
there, `run_miles_step` runs `trainers.miles_step` (one step's data path).

The real functions (``miles/backends/training_utils``, identical at
31f1ca961 and e78cfb3 but for the fix), in layout terms (docs/design.md#a-real-data-path-miles
and section 10; `SIGNATURES` is checked against the checkout by the tests):

``data.get_rollout_data(args, rollout_data_ref, witness_info=None) -> (rollout_data, store_get_result)``
    The owner. ``rollout_data_ref``: the list of object-store refs, one per DP
    rank (from ``split_train_data_by_dp``). Returns per-sample lists:
    ``tokens`` (1-D long tensors, ``T_i``), ``total_lengths`` (``T_i``),
    ``response_lengths`` (``R_i``), ``loss_masks`` (``R_i`` ints),
    ``rollout_log_probs`` (``R_i`` floats, already CP-sliced when ``cp > 1``:
    zigzag by ``slice_log_prob_with_cp`` with the sample's ``P_i`` under BSHD),
    ``rollout_routed_experts`` (``[T_i - 1, layers, topk]``) and, under BSHD
    only, ``max_seq_lens`` (``P_i``; unit ``A = tp * data_pad_size_multiplier``,
    raised for compressed attention). At 31f1ca961 every ``P_i`` is the
    rollout's ``round_up(max T, A)`` (rollout-global padding); at e78cfb3
    ``round_up(T_i, A)``.

``data.DataIterator(rollout_data, micro_batch_size=None, micro_batch_indices=None)``
    ``get_next(keys)`` gives a dict of per-sample lists (``None`` for an
    absent key) for the next micro-batch, contiguous or by the index schedule;
    ``reset()``; ``.offset``. ``data.get_data_iterator(args, model, rollout_data)
    -> (iterators, num_microbatches)``: one iterator per virtual pipeline stage,
    micro-batch counts per step (dynamic batch size: first-fit over
    ``max_tokens_per_gpu * cp``, all-reduced MAX over DP, balanced partitions).

``data.get_batch(data_iterator, keys, pad_multiplier=128, qkv_format="thd", get_position_ids=False,
allgather_cp=False) -> batch``
    Called as ``get_batch(it, keys, args.data_pad_size_multiplier,
    args.qkv_format, allgather_cp=args.allgather_cp)``. BSHD: ``P =
    max_seq_lens[0]`` (e78cfb3 asserts all ``max_seq_lens`` of the batch agree),
    every sample padded to ``P`` and CP-sliced (zigzag ``slice_with_cp``, local
    ``2c``; all-gather: window ``P/cp``), ``tokens`` ``[B, L]``. THD: each sample
    padded to a multiple of ``2 cp`` and zigzag-sliced, concatenated, the stream
    padded to a multiple of ``tp * pad_multiplier``; ``cu_seqlens`` (global:
    local boundaries times ``cp``, a last segment for the stream pad),
    ``max_seqlen``, ``tokens`` ``[1, stream]``. Always ``unconcat_tokens``
    (the ``T_i`` tensors) and ``full_loss_masks`` (the token layout of the
    loss masks, placed at ``p_i - 1`` and CP-sliced alike).

``replay_data.fill_replay_data(*, args, models, data_iterator, num_microbatches, rollout_data, data_key, replay_list,
register_replay_list_func, if_sp_region=True, indices_are_token_positions=False)``
    ``data_iterator``: the list of iterators. Resets them, then for every
    micro-batch pads each sample's ``T_i - 1`` replay rows by one (to ``T_i``)
    and lays them out like the tokens (BSHD: the batch's ``P``; THD: the
    packed rule, stream padded to ``tp * data_pad_size_multiplier``), flattens
    to rows (divided by TP under sequence parallelism) and calls
    ``register_replay_list_func(replay_list, replay_data, models=models)``: no
    micro-batch index is passed. Deletes ``rollout_data[data_key]``.

``cp_utils.slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None, parallel_state=None)``,
``cp_utils.slice_log_prob_with_cp(log_prob, total_length, response_length, qkv_format="thd", max_token_len=None)``,
``cp_utils.get_logits_and_tokens_offset_with_cp(total_length, response_length, qkv_format="thd", max_seq_len=None,
cp_rank=None, cp_size=None)``: the CP helpers; without the layout arguments they use the packed (THD) rule.

``parallel.set_parallel_state(state)`` / ``get_parallel_state()``: a ``ParallelState`` of ``GroupInfo`` (``rank``,
``size``, ``group``) fields ``intra_dp``, ``intra_dp_cp``, ``cp``, ``tp``, ``pp``, ``ep``, ``etp``, ``indep_dp``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainers.checkouts import Checkout
from trainers.ranks import RankRun, launch

__all__ = ["SIGNATURES", "run_miles", "run_miles_step"]

_T = "miles.backends.training_utils"
SIGNATURES: dict[str, str] = {
    f"{_T}.data:get_rollout_data": (
        '(args: argparse.Namespace, rollout_data_ref: miles.utils.ray_utils.Box, witness_info: '
        'miles.utils.audit_utils.witness.allocator.WitnessInfo | None = None) -> tuple[dict[str, '
        'list[torch.Tensor] | list[int] | list[float] | list[str]], '
        'miles.utils.object_store.ObjectStoreGetResult]'),
    f"{_T}.data:get_batch": (
        "(data_iterator: 'DataIterator', keys: collections.abc.Sequence[str], pad_multiplier: int = 128, "
        "qkv_format: str = 'thd', get_position_ids: bool = False, allgather_cp: bool = False) -> dict[str, "
        'torch.Tensor | list[torch.Tensor] | None]'),
    f"{_T}.data:DataIterator": (
        '(rollout_data: dict[str, list[torch.Tensor] | list[int] | list[float] | list[str]], '
        'micro_batch_size: int | None = None, micro_batch_indices: list[list[int]] | None = None) -> None'),
    f"{_T}.data:get_data_iterator": (
        '(args: argparse.Namespace, model: torch.nn.modules.module.Module | '
        'collections.abc.Sequence[torch.nn.modules.module.Module], rollout_data: dict[str, list[torch.Tensor]'
        ' | list[int] | list[float] | list[str]]) -> '
        'tuple[list[miles.backends.training_utils.data.DataIterator], list[int]]'),
    f"{_T}.replay_data:fill_replay_data": (
        '(*, args, models, data_iterator, num_microbatches, rollout_data, data_key: str, replay_list: list, '
        'register_replay_list_func: miles.backends.training_utils.replay_data.RegisterReplayListFunc, '
        'if_sp_region=True, indices_are_token_positions=False)'),
    f"{_T}.cp_utils:slice_with_cp": (
        '(tokens: torch.Tensor, pad_value: tuple[int, float, collections.abc.Callable], qkv_format: str = '
        "'thd', max_seq_len: int | None = None, parallel_state: object | None = None) -> torch.Tensor"),
}
"""``module:function`` -> its signature at both pinned commits, as ``inspect.signature`` prints it."""


def run_miles(checkout: Checkout, deps: Path, target: str | Path, *, out: Path, cp: int = 1, tp: int = 1,
              parameters: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
              timeout: float = 300.0) -> list[RankRun]:
    """Run ``target`` (a ``.py`` path or module name) in the ``cp`` ranks of one Miles job; their `RankRun` s."""
    return launch(cp, ["-m", "trainers.miles_rank", str(target)], out=out, pythonpath=[checkout.path, deps],
                  parameters={**(parameters or {}), "harness": {"cp": cp, "tp": tp}}, env=env, timeout=timeout)


def run_miles_step(checkout: Checkout, deps: Path, *, out: Path, steps: Sequence[Mapping[str, Any]], cp: int = 1,
                   tp: int = 1, env: Mapping[str, str] | None = None, timeout: float = 300.0) -> list[RankRun]:
    """Training steps' data paths (`trainers.miles_step`) in every CP rank, one job for all ``steps``.

    ``steps``: ``[{"name", "rollout": {"lengths": [...], ...}, "args": {"qkv_format": "bshd", ...}}]``.
    """
    return run_miles(checkout, deps, "trainers.miles_step", out=out, cp=cp, tp=tp, env=env, timeout=timeout,
                     parameters={"steps": [dict(s) for s in steps]})
