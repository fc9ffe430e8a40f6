"""Hooks belong at eager boundaries: inside a ``torch.compile`` trace a hooked function is only called.

``fullgraph=True`` turns any graph break into an error, so a wrapper that
Dynamo cannot trace (or that runs its checks inside the trace) fails here.
The eager backend keeps the test fast: Dynamo traces, nothing is compiled.
"""

from __future__ import annotations

import torch
from minitrainer import cp_utils
from minitrainer.parallel import get_parallel_state, parallel_state

from layoutcheck import LayoutChecker


def test_a_hooked_helper_inside_a_fullgraph_compile_is_traced_through():
    checker = LayoutChecker("record", parallel_state=get_parallel_state)  # record: the eager call's note stays quiet
    offsets = checker.wrap("offset_helper", cp_utils.get_logits_and_tokens_offset_with_cp)

    def response_logits(x: torch.Tensor) -> torch.Tensor:
        _, _, logits, _ = offsets(300, 200, "bshd", 384, 0, 2)
        (a, b), (c, d) = logits
        return torch.cat([x[a:b], x[c:d]]).sum()

    checks: list[str] = []
    real = checker._checking
    checker._checking = lambda where, check: checks.append(where) or real(where, check)  # type: ignore[method-assign]
    torch._dynamo.reset()
    compiled = torch.compile(response_logits, fullgraph=True, backend="eager")
    x = torch.arange(400.0)
    with parallel_state(cp_size=2, cp_rank=0):
        traced = compiled(x)
        assert checks == []  # inside the trace the wrapper only called the helper
        assert torch.equal(traced, response_logits(x))
    assert checks == ["get_logits_and_tokens_offset_with_cp"]  # the eager call is checked
