from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class PackedCutOffTpUnit(ModelRule):
    """A packed stream cut to its real length for a forward that needs the TP unit.

    ## What it does
    Flags a packed (THD) input cut to its last cumulative boundary,
    `tokens[:, :n]` with `n = packed.cu_seqlens_q[-1].item()`, and then
    given to a Megatron-core packed forward (`model(...,
    packed_seq_params=...)`) without rounding `n` up to a multiple of the
    tensor-parallel world size (`get_tensor_model_parallel_world_size()`)
    first. What is read is what the code does with Megatron-core's own API:
    its `packed_seq_params` keyword, its `cu_seqlens_q` / `cu_seqlens_kv`
    boundary fields (or a `cumsum`, or what the function hands to
    `PackedSeqParams`), its parallel-state call.

    ## Why it matters
    With sequence parallelism Megatron-core scatters the sequence dimension
    over the tensor-parallel ranks: the stream's length must be a multiple
    of the TP size, the stream's alignment unit. The last boundary is the
    real token count `T`, which no unit divides in general, so the
    reduce-scatter fails (or the attention kernels see a length their
    boundaries do not end at) on exactly the batches whose token count is
    not a multiple of TP (docs/design.md#layout-spaces-and-bug-classes,
    class 8; NVIDIA/Megatron-LM 416687f437 rounded the trimmed length to
    the TP size).

    ## Example
    ```python
    from megatron.core.packed_seq_params import PackedSeqParams

    def packed_logits(model, tokens, positions, packed):
        n = packed.cu_seqlens_q[-1].item()
        tokens = tokens[:, :n]
        positions = positions[:, :n]
        return model(tokens, positions, None, packed_seq_params=packed)
    ```

    ## How to fix
    Under sequence parallelism round the length up to a multiple of the TP
    size before the cut, and end a copy of the boundaries there:
    ```python
    tp = get_tensor_model_parallel_world_size()
    n = (n + tp - 1) // tp * tp
    ```
    or cut to the padded boundary (`cu_seqlens_q_padded[-1]`), which the
    packer already aligned.

    ## Known problems
    Only Megatron-core's packed forward is recognised (its keyword, in a
    module that imports `megatron.core`), and only a rounding that uses its
    parallel-state call in the same function: a unit handed in as a
    parameter is not followed. Code that runs without sequence parallelism
    is flagged too; the rounding is what makes it safe either way.

    ## Fix safety
    No autofix: the boundaries must be extended with the stream.
    """

    code = "LC125"
    message = (
        "`tokens[:, :n]` cuts a packed stream to its last cumulative boundary (`n`, line 5) and hands it to a "
        "packed forward; with sequence parallelism its length must be a multiple of the TP size. Round `n` up "
        "to a multiple of `get_tensor_model_parallel_world_size()` first."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "packed_seq_params" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for clash in file.facts.clashes:
            if clash.kind == "cut_off_tp_unit":
                length, line = clash.detail.split("|", 1)
                yield self.report(
                    clash.span,
                    f"`{clash.text}` cuts a packed stream to its last cumulative boundary (`{length}`, line "
                    f"{line}) and hands it to a Megatron-core packed forward; with sequence parallelism its "
                    "length must be a multiple of the TP size. Round it up to a multiple of "
                    "`get_tensor_model_parallel_world_size()` first.",
                )

    valid = [
        Valid(
            """
from megatron.core.parallel_state import get_tensor_model_parallel_world_size

def packed_logits(model, tokens, positions, packed):
    n = packed.cu_seqlens_q[-1].item()
    if model.config.sequence_parallel:
        tp = get_tensor_model_parallel_world_size()
        n = (n + tp - 1) // tp * tp
    tokens = tokens[:, :n]
    positions = positions[:, :n]
    return model(tokens, positions, None, packed_seq_params=packed)
"""
        ),
        Valid(
            """
from megatron.core import parallel_state

def packed_logits(model, tokens, positions, packed):
    n = packed.cu_seqlens_q[-1].item()
    unit = parallel_state.get_tensor_model_parallel_world_size()
    step = unit * 2
    n = -(-n // step) * step
    tokens = tokens[:, :n]
    return model(tokens, positions, None, packed_seq_params=packed)
"""
        ),
        Valid(
            """
from megatron.core.packed_seq_params import PackedSeqParams

def packed_logits(model, tokens, positions, packed):
    # the padded boundary: the packer already aligned it
    n = packed.cu_seqlens_q_padded[-1].item()
    tokens = tokens[:, :n]
    return model(tokens, positions, None, packed_seq_params=packed)
"""
        ),
        Valid(
            """
from megatron.core.packed_seq_params import PackedSeqParams

def packed_logits(model, tokens, positions, packed):
    # cut, but not what the forward gets
    n = packed.cu_seqlens_q[-1].item()
    real = tokens[:, :n]
    model(tokens, positions, None, packed_seq_params=packed)
    return real
"""
        ),
        Valid(
            """
import torch

def packed_logits(model, tokens, positions, packed):
    # no Megatron-core here: another library's keyword
    n = packed.cu_seqlens_q[-1].item()
    tokens = tokens[:, :n]
    return model(tokens, positions, None, packed_seq_params=packed)
"""
        ),
    ]
    invalid = [
        Invalid(
            """
from megatron.core.packed_seq_params import PackedSeqParams

def packed_logits(model, tokens, positions, packed, n=None):
    if n is None:
        n = packed.cu_seqlens_q[-1].item()
    tokens = tokens[:, :n]
    positions = positions[:, :n]
    return model(tokens, positions, None, packed_seq_params=packed)
""",
            line=7,
            column=14,
            message="cuts a packed stream to its last cumulative boundary (`n`, line 6)",
        ),
        Invalid(
            """
import torch
from megatron.core.packed_seq_params import PackedSeqParams

def forward_packed(model, rows):
    lengths = torch.tensor([len(r) for r in rows])
    bounds = torch.zeros(len(rows) + 1, dtype=torch.int32)
    bounds[1:] = torch.cumsum(lengths, 0)
    stream = torch.cat(rows)[None]
    params = PackedSeqParams(qkv_format="thd", cu_seqlens_q=bounds, cu_seqlens_kv=bounds)
    total = int(bounds[-1])
    stream = stream[:, :total]
    return model(stream, None, None, packed_seq_params=params)
""",
            line=12,
            column=14,
        ),
        Invalid(
            """
from megatron.core.packed_seq_params import PackedSeqParams

def packed_logits(model, tokens, positions, packed):
    n = packed.cu_seqlens_q[-1].item()
    # a unit of its own, not the TP size the scatter needs
    n = (n + 7) // 8 * 8
    tokens = tokens[:, :n]
    return model(tokens, positions, None, packed_seq_params=packed)
""",
            line=8,
            column=14,
        ),
        Invalid(
            """
import megatron.core

class Scorer:
    def score(self, stream, params):
        total = int(params.cu_seqlens_kv[-1])
        stream = stream[:total]
        return self.model(input_ids=stream, packed_seq_params=params)
""",
            line=7,
            column=18,
        ),
    ]
