"""Rollouts whose every value says where it came from, in the shape the trainers' rollout side hands to training.

Token ``j`` of sample ``i`` is `token_value` ``(i, j)``, never 0 (the pad
value of every trainer here), so any position of a packed, padded or
CP-sliced tensor names its sample and token. Per-sample fields follow the
same rule: a response field's entry ``k`` is the value of the token it
belongs to (position ``p + k``, ``p = T - R``), and routing-replay row ``j``
(``T - 1`` rows a sample) holds ``token_value(i, j)`` in every layer and
top-k slot. What this module builds is the dict that Miles's and slime's
rollout side put into the object store (``convert_samples_to_train_data``'s
output): plain lists and numpy arrays, before the training side makes
tensors of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["token_value", "train_data"]


def token_value(sample: int, position: int) -> int:
    """The id of token ``position`` of sample ``sample`` (never 0)."""
    return 1000 * (sample + 1) + position + 1


def train_data(lengths: Sequence[int], response_lengths: Sequence[int] | None = None, *, layers: int = 2,
               topk: int = 2, replay: bool = True) -> dict[str, Any]:
    """The rollout of samples with total lengths ``lengths`` (``T_i``) and response lengths (default ``T_i // 2``).

    Fields: ``tokens`` (``T_i`` ints), ``response_lengths``, ``loss_masks`` (``R_i`` ones), ``rewards``,
    ``rollout_log_probs`` (``R_i`` floats, see the module doc), ``sample_indices`` and, with ``replay``,
    ``rollout_routed_experts`` (int32 arrays ``[T_i - 1, layers, topk]``).
    """
    import numpy as np

    responses = list(response_lengths) if response_lengths is not None else [max(1, t // 2) for t in lengths]
    if len(responses) != len(lengths) or any(not 0 < r < t for r, t in zip(responses, lengths)):
        raise ValueError(f"each response length must be in [1, T): lengths {list(lengths)}, responses {responses}")
    data: dict[str, Any] = {
        "tokens": [[token_value(i, j) for j in range(t)] for i, t in enumerate(lengths)],
        "response_lengths": responses,
        "loss_masks": [[1] * r for r in responses],
        "rewards": [0.0] * len(lengths),
        "rollout_log_probs": [[float(token_value(i, t - r + k)) for k in range(r)]
                              for i, (t, r) in enumerate(zip(lengths, responses))],
        "sample_indices": list(range(len(lengths))),
    }
    if replay:
        data["rollout_routed_experts"] = [
            np.repeat(np.array([token_value(i, j) for j in range(t - 1)], dtype=np.int32)[:, None, None],
                      layers * topk, axis=1).reshape(t - 1, layers, topk)
            for i, t in enumerate(lengths)]
    return data
