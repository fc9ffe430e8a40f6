"""CP helpers with the real trainer's signatures (docs/design.md#a-real-data-path-miles), for the tracer tests.

``slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None,
parallel_state=None)`` (``pad_value`` may be a pad function) and
``slice_log_prob_with_cp(log_prob, total_length, response_length,
qkv_format="thd", max_token_len=None)``, written from their documented
behaviour: pad to ``2 cp c`` and keep zigzag chunks ``r`` and ``2cp-1-r``;
keep the response entries whose logits fall in the rank's chunks. Lengths
come from `layoutcheck.geometry` (the test's oracle), the layout is done with
plain torch ops, as a trainer does.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from layoutcheck import geometry

_STATE = SimpleNamespace(cp=SimpleNamespace(rank=0, size=1), tp=SimpleNamespace(rank=0, size=1))


def set_parallel_state(cp_size: int, cp_rank: int) -> None:
    _STATE.cp.size, _STATE.cp.rank = cp_size, cp_rank


def get_parallel_state() -> SimpleNamespace:
    return _STATE


def _pad(tokens: torch.Tensor, pad: int, pad_value: float | Callable[[torch.Tensor, int], torch.Tensor]) -> torch.Tensor:
    if callable(pad_value):
        return pad_value(tokens, pad)
    return F.pad(tokens, (0, 0) * (tokens.dim() - 1) + (0, pad), value=pad_value)


def slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None, parallel_state=None):  # noqa: ANN001, ANN201
    state = parallel_state if parallel_state is not None else get_parallel_state()
    cp, r = state.cp.size, state.cp.rank
    if cp == 1:
        return _pad(tokens, max_seq_len - tokens.size(0), pad_value) if qkv_format == "bshd" else tokens
    length = max_seq_len if qkv_format == "bshd" else geometry.packed_sample_length(tokens.size(0), cp)
    c = geometry.zigzag_chunk_size(length, cp)
    full = _pad(tokens, 2 * cp * c - tokens.size(0), pad_value)
    return torch.cat([full[c * r: c * (r + 1)], full[c * (2 * cp - r - 1): c * (2 * cp - r)]])


def slice_log_prob_with_cp(log_prob, total_length, response_length, qkv_format="thd", max_token_len=None):  # noqa: ANN001, ANN201
    cp, r = _STATE.cp.size, _STATE.cp.rank
    if cp == 1:
        return log_prob
    layout = {"layout": qkv_format, "padded": max_token_len if qkv_format == "bshd" else None}
    ranges = geometry.response_logit_ranges(total_length, response_length, cp, r, **layout)
    start = total_length - response_length - 1  # logit position of response entry 0
    pieces = [log_prob[a - start: b - start] for a, b in ranges]
    if isinstance(log_prob, list):  # the producer slices lists of floats
        return [x for piece in pieces for x in piece]
    return torch.cat(pieces) if pieces else log_prob[:0]
