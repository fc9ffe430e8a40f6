from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class GatheredPaddingKept(ModelRule):
    """`all_gather` into buffers sized by the longest rank, then `cat` of the buffers as they are.

    ## What it does
    Follows a length reduced to its maximum across ranks
    (`dist.all_reduce(t, op=ReduceOp.MAX)`, or `max()` of lengths every
    rank gathered) into the size of buffers
    (`[torch.zeros(b, longest, d) for _ in range(world)]`), those buffers
    into `dist.all_gather(buffers, ...)`, and flags a `torch.cat` of the
    buffers themselves, each still at the longest rank's size.

    ## Why it matters
    `all_gather` needs tensors of one size, so shards of different lengths
    `T` are padded to the longest first. Concatenated as they are, the buffers
    put each shorter rank's padding between real entries: the joined
    sequence is `world * longest` long, not the sum of the ranks' lengths,
    attention and softmax run over the dummy entries, and offsets computed
    as `rank * longest` point into the padding
    (docs/design.md#layout-spaces-and-bug-classes, class 1: one length for
    many; deepspeedai/DeepSpeed b6bb8b3c6 fed the padded gather of a ViT's
    patch shards to attention).

    ## Example
    ```python
    dist.all_reduce(longest_t, op=dist.ReduceOp.MAX)
    longest = int(longest_t.item())
    gathered = [torch.zeros(bs, longest, dim) for _ in range(world)]
    dist.all_gather(gathered, F.pad(local, (0, 0, 0, longest - n_local)))
    full = torch.cat(gathered, dim=1)
    ```

    ## How to fix
    Gather every rank's length too, and cut each buffer to its rank's
    length before joining: `torch.cat([g[:, :lengths[r]] for r, g in
    enumerate(gathered)], dim=1)`; a rank's offset is then
    `sum(lengths[:rank])`.

    ## Known problems
    Only buffers built in the same function, by a sized constructor
    (`zeros`, `empty`, `new_zeros`, ...) given the maximum, are read; a
    concatenation whose padding is cut out afterwards (`full.view(world,
    longest, ...)` then per-rank slices) is still flagged.

    ## Fix safety
    No autofix: the per-rank lengths have to be gathered first.
    """

    code = "LC127"
    message = (
        "`torch.cat(gathered)` joins buffers `all_gather` filled at the longest rank's size: shorter ranks' "
        "padding lands between real entries. Cut each buffer to its rank's length first."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "all_gather" in source and "cat" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "padded_gather_cat":
                yield self.report(
                    found.span,
                    f"`{found.text}` joins the buffers `{found.detail}` that `all_gather` filled, each sized to "
                    "the longest rank's length (a maximum across ranks): every shorter rank's padding lands between "
                    "real entries, and the result is `world * longest` long. Gather the ranks' lengths and cut "
                    f"each buffer to its rank's length before joining (`[g[:, :lengths[r]] for r, g in "
                    f"enumerate({found.detail})]`).",
                )

    valid = [
        Valid(
            """
import torch
import torch.distributed as dist

def gather_shards(local, world):
    n = torch.tensor([local.shape[1]])
    sizes = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
    dist.all_gather(sizes, n)
    lengths = [int(s.item()) for s in sizes]
    longest = max(lengths)
    padded = torch.nn.functional.pad(local, (0, 0, 0, longest - local.shape[1]))
    gathered = [torch.zeros(local.shape[0], longest, local.shape[2]) for _ in range(world)]
    dist.all_gather(gathered, padded)
    return torch.cat([g[:, : lengths[r]] for r, g in enumerate(gathered)], dim=1)
"""
        ),
        Valid(
            """
import torch
import torch.distributed as dist

def gather_equal(local, world):
    gathered = [torch.zeros_like(local) for _ in range(world)]
    dist.all_gather(gathered, local)
    return torch.cat(gathered, dim=0)
"""
        ),
        Valid(
            """
import torch
import torch.distributed as dist

def gather_padded(local, world, longest):
    gathered = [torch.zeros(longest, local.shape[1]) for _ in range(world)]
    dist.all_gather(gathered, local)
    return torch.cat(gathered)
"""
        ),
        Valid(
            """
import torch
import torch.distributed as dist

def gather_trimmed(local, world, lengths_t):
    dist.all_reduce(lengths_t, op=dist.ReduceOp.MAX)
    longest = int(lengths_t.item())
    gathered = [torch.zeros(longest, local.shape[1]) for _ in range(world)]
    dist.all_gather(gathered, local)
    return torch.stack(gathered)
"""
        ),
        Valid(
            """
import torch
import torch.distributed as dist

def sum_counts(count, world):
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    parts = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(parts, count)
    return torch.cat(parts)
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch
import torch.distributed as dist
import torch.nn.functional as F

def gather_shards(local, world, group):
    n_local = local.shape[1]
    longest_t = torch.tensor(n_local)
    dist.all_reduce(longest_t, op=dist.ReduceOp.MAX, group=group)
    longest = int(longest_t.item())
    padded = F.pad(local, (0, 0, 0, longest - n_local))
    gathered = [torch.zeros(local.shape[0], longest, local.shape[2]) for _ in range(world)]
    dist.all_gather(gathered, padded, group=group)
    return torch.cat(gathered, dim=1)
""",
            line=14,
            column=12,
            message="each sized to the longest rank's length",
        ),
        Invalid(
            """
import torch
import torch.distributed as dist

def gather_rows(local, world):
    sizes = [torch.zeros(1, dtype=torch.long) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([local.shape[0]]))
    longest = max(int(s.item()) for s in sizes)
    buffers = []
    for _ in range(world):
        buffers.append(local.new_zeros(longest, local.shape[1]))
    dist.all_gather(buffers, torch.cat([local, local.new_zeros(longest - local.shape[0], local.shape[1])]))
    return torch.cat(buffers)
""",
            line=13,
            column=12,
        ),
            Invalid(
            """
import torch
import torch.distributed as dist

def gather_rows(local, world):
    n = torch.tensor(local.shape[0])
    dist.all_reduce(n, op=dist.ReduceOp.MAX)
    gathered = [local.new_zeros(n, local.shape[1])] * world
    dist.all_gather(gathered, local)
    return torch.cat(gathered, dim=0)
""",
            line=10,
            column=12,
        ),
        Invalid(
            """
import torch
import torch.distributed as dist

def gather_rows(local, world, group):
    n = torch.tensor(local.shape[0])
    dist.all_reduce(n, dist.ReduceOp.MAX, group=group)
    longest = n.item()
    gathered = []
    for _ in range(world):
        gathered.append(torch.empty(longest, local.shape[1]))
    dist.all_gather(gathered, local, group=group)
    full = torch.cat(gathered)
    return full
""",
            line=13,
            column=12,
        ),
    ]
