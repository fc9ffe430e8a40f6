from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class RowIndicesAsStreamOffsets(ModelRule):
    """`torch.where(x == 0)[0]` joined with `x.numel()`: first-axis indices closed by an element count.

    ## What it does
    Flags the indices along the first axis of a condition on a tensor `x`
    (`torch.where(cond)[0]`, `cond.nonzero(as_tuple=True)[0]`), with `x`
    not flattened, joined into one list of offsets with `x.numel()`
    (`torch.cat([starts, torch.tensor([x.numel()])])`,
    `F.pad(starts, (0, 1), value=x.numel())`). Values are followed through
    locals assigned once.

    ## Why it matters
    `torch.where(cond)[0]` is the row index of each match; `x.numel()`
    counts every element. They are offsets into the same stream of the
    samples' `T` tokens only when `x` is 1-D. A packed batch's positions are often `[1, T]` or `[rows,
    width]`: the starts of its documents (`positions == 0`) then come back
    as rows 0, 0, 1, ..., and the cumulative offsets handed to a varlen
    kernel name rows instead of token offsets; attention runs across every
    document boundary with no error (docs/design.md#layout-spaces-and-bug-classes,
    class 3; huggingface/nanotron 7d8bc89b built `cu_seqlens` so from 2-D
    `position_ids`).

    ## Example
    ```python
    starts = torch.where(position_ids == 0)[0]
    cu_seqlens = torch.cat([starts, torch.tensor([position_ids.numel()])])
    ```

    ## How to fix
    Flatten first, so both count in the flat stream:
    `torch.where(position_ids.view(-1) == 0)[0]`; or, for a tensor that is
    1-D by design, close the offsets with `x.shape[0]`.

    ## Known problems
    A tensor 1-D by construction is flagged too: the offsets are right
    until it gains an axis.

    ## Fix safety
    No autofix: flattening changes the indices of a 2-D tensor, which is the point, but the
    author has to confirm the layout.
    """

    code = "LC128"
    message = (
        "`torch.where(x == 0)[0]` gives indices along `x`'s first axis, joined with `x.numel()` (every element): "
        "they agree only for a 1-D `x`. Flatten `x` first (`x.view(-1) == 0`)."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "numel" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "row_index_offsets":
                x = found.detail
                yield self.report(
                    found.span,
                    f"`{found.text}` gives indices along the first axis of `{x}`, and is joined into one list of "
                    f"offsets with `{x}.numel()`, which counts every element: for a `{x}` of more than one axis "
                    f"the starts are row numbers, not offsets in the flattened stream. Flatten first "
                    f"(`{x}.view(-1)`), or close with `{x}.shape[0]` if `{x}` is 1-D by design.",
                )

    valid = [
        Valid(
            """
import torch

def doc_offsets(positions):
    starts = torch.where(positions.view(-1) == 0)[0]
    return torch.cat([starts, torch.tensor([positions.numel()], device=starts.device)]).to(torch.int32)
"""
        ),
        Valid(
            """
import torch

def doc_offsets(positions):
    starts = torch.where(positions == 0)[0]
    return torch.cat([starts, torch.tensor([positions.shape[0]], device=starts.device)])
"""
        ),
        Valid(
            """
import torch

def doc_offsets(position_ids):
    pos = position_ids.reshape(-1)
    starts = (pos == 0).nonzero(as_tuple=True)[0]
    total = torch.tensor([pos.numel()], device=pos.device, dtype=starts.dtype)
    return torch.cat([starts, total]).to(torch.int32)
"""
        ),
        Valid(
            """
import torch

def doc_offsets(positions):
    starts = torch.where(positions.flatten() == 0)[0]
    return torch.cat([starts, torch.tensor([positions.numel()])])
"""
        ),
        Valid(
            """
import torch

def doc_rows(mask):
    rows = torch.where(mask.any(dim=1))[0]
    return torch.cat([rows, torch.tensor([mask.shape[0]])])
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch

def doc_offsets(positions):
    starts = torch.where(positions == 0)[0]
    return torch.cat([starts, torch.tensor([positions.numel()], device=starts.device)]).to(torch.int32)
""",
            line=5,
            column=14,
            message="indices along the first axis of `positions`",
        ),
        Invalid(
            """
import torch.nn.functional as F

def doc_offsets(position_ids):
    starts = (position_ids == 0).nonzero(as_tuple=True)[0]
    return F.pad(starts, (0, 1), value=position_ids.numel())
""",
            line=5,
            column=14,
        ),
            Invalid(
            """
import torch

def doc_offsets(positions):
    is_start = positions == 0
    starts = torch.where(is_start)[0]
    end = torch.tensor([positions.numel()], dtype=starts.dtype)
    return torch.cat([starts, end])
""",
            line=6,
            column=14,
        ),
        Invalid(
            """
import torch

def doc_offsets(positions):
    starts = torch.nonzero(positions == 0, as_tuple=True)[0].int()
    return torch.cat((starts, torch.tensor([positions.numel()]).int()))
""",
            line=5,
            column=14,
        ),
    ]
