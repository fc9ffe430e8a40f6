"""verl's Megatron data path on CPU, from PyPI at pinned versions: install it, run scripts in its ranks.

    folder = install_verl("0.7.0", cache_root)          # once; reused while the pins stay the same
    runs = run_verl(folder, "my_script.py", out=tmp, cp=2, tp=2, parameters={...}, env={"LAYOUTCHECK": "raise"})
    runs[1]["pack:short"]                                  # what rank 1 reported

Each rank is a real process of one gloo group (the CP group) with Megatron's
parallel state set (`trainers.megatron_rank`); the script imports verl itself and reports
with `trainers.ranks.report` / ``attempt``. `trainers.verl_scenarios` is the
script the tests run; a preset's test can run it too, with hooks switched on
through ``env``.

The real functions, at both pinned versions (`SIGNATURES` is checked against
the installed code by the tests), in layout terms (docs/design.md#layout-spaces-and-bug-classes):

``verl.models.mcore.util.preprocess_packed_seqs(input_ids, attention_mask, pre_process=True, use_fp8_padding=False)
-> (input_ids_rmpad, packed_seq_params)``
    * ``input_ids``: ``[B, S, ...]``, per-sample rows padded to the batch width
      ``S`` (on either side); ``attention_mask``: ``[B, S]`` bool, row ``i``
      sums to ``T_i`` and selects sample ``i``'s real tokens in order
      (``input_ids[i, attention_mask[i]]``, a T-space tensor).
    * Alignment unit ``A = tp * cp * 2`` when ``cp > 1``, else ``tp``;
      ``P_i = round_up(T_i, A)``. With ``use_fp8_padding``, ``A`` becomes
      ``lcm(16, A)`` and the last sample is padded further so that
      ``sum(P_i)`` is a multiple of ``tp*cp*2*128``.
    * ``input_ids_rmpad``: ``[1, sum(P_i) / cp, ...]``, this CP rank's part of
      the packed stream: sample ``i`` at local offset
      ``cu_seqlens_padded[i] / cp``, as its zigzag chunks ``r`` and
      ``2cp-1-r`` of size ``c = P_i / (2 cp)`` of the zero-padded sample
      (CP-local, local length ``P_i / cp``). ``pre_process=False`` returns
      ``input_ids`` unchanged (only the parameters are computed).
    * ``packed_seq_params``: megatron-core ``PackedSeqParams`` with
      ``qkv_format="thd"``; ``cu_seqlens_q``, ``cu_seqlens_kv``,
      ``cu_seqlens_q_padded`` and ``cu_seqlens_kv_padded`` are all the same
      GLOBAL padded cumulative lengths ``[0, P_0, P_0+P_1, ...]`` (int32,
      ``B+1`` entries; the unpadded ``cumsum(T_i)`` is computed and dropped);
      ``max_seqlen_q = max_seqlen_kv = max(P_i)``.
    * The bug of 0.7.0 (class 3): the first chunk is ``d[c*r : c*(r+1)]`` of
      the T-long ``d``, assigned to a slot of ``c`` positions: a sample with
      ``T_i <= c*r`` raises (a shape mismatch), one with ``T_i = c*r + 1``
      broadcasts its one token over the whole chunk, silently (with
      ``c > 1``). Fixed in 0.9.1 by clamping to ``T_i`` and skipping empty
      slices.

``verl.models.mcore.util.postprocess_packed_seqs(output, packed_seq_params, attention_mask, batch_size, seq_len,
post_process=True) -> output_new``
    * ``output``: ``[1, sum(P_i) / cp, ...]``, the model's output on this
      rank's part of the stream; all-gathered over Megatron's CP group
      (``torch.distributed.all_gather``, every CP rank must call it).
    * Each sample's ``P_i`` positions are reassembled from the zigzag chunks of
      all ranks (segment bounds read from ``cu_seqlens_q_padded``), and its
      first ``T_i`` positions written at the mask positions of row ``i`` of a
      zero ``[batch_size, seq_len, ...]``: back to per-sample rows.
      ``post_process=False`` returns ``output`` unchanged.

``verl.utils.seqlen_balancing.rearrange_micro_batches(batch, max_token_len, dp_group=None, num_batches_divided_by=None,
same_micro_num_in_dp=True, min_num_micro_batch=None, use_dynamic_bsz_balance=True[, force_group_size=1])
-> (micro_batches, micro_bsz_idx)``
    * ``batch``: a TensorDict whose ``attention_mask`` ``[B, S]`` rows sum to
      ``T_i``; every field is indexed alike. ``max_token_len``: the budget of
      ``sum(T_i)`` a micro-batch (at least the width ``S``).
    * Number of micro-batches ``k = min(B, ceil(sum(T) / max_token_len))``,
      at least ``min_num_micro_batch``, rounded up to a multiple of
      ``num_batches_divided_by`` (the virtual pipeline group). 0.7.0
      all-reduces ``k`` (MAX) over ``dp_group`` whenever torch.distributed is
      initialised (``dp_group=None`` is the whole world) and keeps ``k`` even
      when a balanced partition exceeds ``max_token_len``; 0.9.1 syncs only
      with a ``dp_group`` and raises ``k`` until every micro-batch fits.
      ``force_group_size`` (0.9.1 only) keeps groups of consecutive samples
      together.
    * ``micro_batches``: TensorDicts whose rows are samples in a new order
      (balanced by a workload ~ ``T^2``); ``micro_bsz_idx[k]``: the original
      indices of micro-batch ``k`` (a partition of ``range(B)``); the
      micro-batches themselves are reordered (lighter ones at both ends).

``verl.utils.seqlen_balancing.get_reverse_idx(idx_map) -> list[int]``
    * The inverse permutation (``out[idx_map[i]] = i``): the Megatron actor
      concatenates the micro-batches' outputs in ``micro_bsz_idx`` order and
      indexes them with it to get sample order back.

Where the Megatron path calls them: 0.7.0 ``verl/workers/actor/megatron_actor.py``
``forward_backward_batch`` splits a mini-batch with ``rearrange_micro_batches(batch=mini_batch.batch,
max_token_len=...)`` (dynamic batch size) or ``TensorDict.split(micro_batch_size)``; each micro-batch goes
through ``verl/models/mcore/model_forward.py`` (``model_forward_gen``): ``preprocess_packed_seqs(input_ids,
attention_mask, pre_process=..., use_fp8_padding=...)``, the model on ``input_ids_rmpad`` with
``packed_seq_params``, labels and loss masks packed by the same call, then ``postprocess_packed_seqs(output,
packed_seq_params, attention_mask, batch_size, seq_len, post_process=...)``; outputs are reordered with
``get_reverse_idx``. 0.9.1 keeps ``model_forward_gen``; its Megatron engine splits with ``prepare_micro_batches(data,
dp_group, num_batches_divided_by, same_micro_num_in_dp=True)`` (``verl/workers/engine/utils.py``), which calls
``rearrange_micro_batches``, and packs nested batches with ``preprocess_thd_engine`` (0.7.0:
``preprocess_thd_no_padding``, which has the same short-sample slicing as 0.7.0's ``preprocess_packed_seqs``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainers.install import install
from trainers.pins import VERL
from trainers.ranks import RankRun, launch

__all__ = ["SIGNATURES", "install_verl", "run_verl"]

_UTIL = "verl.models.mcore.util"
_BALANCE = "verl.utils.seqlen_balancing"
_PRE = "(input_ids: torch.Tensor, attention_mask: torch.Tensor, pre_process: bool = True, use_fp8_padding{}) -> " \
       "tuple[torch.Tensor, megatron.core.packed_seq_params.PackedSeqParams]"
_POST = "(output: torch.Tensor, packed_seq_params: megatron.core.packed_seq_params.PackedSeqParams, " \
        "attention_mask: torch.Tensor, batch_size: int, seq_len: int, post_process: bool = True) -> torch.Tensor"
_REARRANGE = "(batch, max_token_len, dp_group=None, num_batches_divided_by=None, same_micro_num_in_dp=True, " \
             "min_num_micro_batch=None, use_dynamic_bsz_balance=True{})"

SIGNATURES: dict[str, dict[str, str]] = {
    version: {
        f"{_UTIL}:preprocess_packed_seqs": _PRE.format("=False" if version == "0.7.0" else ": bool = False"),
        f"{_UTIL}:postprocess_packed_seqs": _POST,
        f"{_BALANCE}:rearrange_micro_batches": _REARRANGE.format("" if version == "0.7.0" else ", force_group_size=1"),
        f"{_BALANCE}:get_reverse_idx": "(idx_map)",
    }
    for version in VERL
}
"""verl version -> ``module:function`` -> its signature as ``inspect.signature`` prints it."""


def install_verl(version: str, root: Path) -> Path:
    """The folder holding verl ``version`` and its pinned imports under ``root`` (installed on first use)."""
    if version not in VERL:
        raise ValueError(f"no pins for verl {version}: pinned versions are {sorted(VERL)}")
    return install(VERL[version], root)


def run_verl(folder: Path, target: str | Path, *, out: Path, cp: int = 2, tp: int = 2,
             parameters: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
             timeout: float = 300.0) -> list[RankRun]:
    """Run ``target`` (a ``.py`` path or module name) as the ``cp`` ranks of one verl job; their `RankRun` s.

    TP is declared with Megatron's setter (`trainers.megatron_rank`). ``parameters`` reach the script
    through `trainers.ranks.params`; ``env`` adds variables (``LAYOUTCHECK=...``) to every rank.
    """
    return launch(cp, ["-m", "trainers.megatron_rank", str(target)], out=out, pythonpath=[folder],
                  parameters={**(parameters or {}), "harness": {"cp": cp, "tp": tp}}, env=env, timeout=timeout)
