from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class EmptyPadSegment(ModelRule):
    """A boundary appended to cumulative offsets for a pad that can be 0: an empty sequence.

    ## What it does
    Flags `F.pad(offsets, (0, 1), value=end)`, which appends one boundary
    `end` to cumulative offsets (a packed batch's `cu_seqlens`), when the
    segment it closes has a length computed here as `n = end - ...` and
    nothing shows `n` is not 0 where the boundary is appended: no
    `if n == 0: return` before it (an `elif` of a chain included), no
    `if n:` or `if n > 0:` around it, no `assert n > 0`.

    ## Why it matters
    Padding a packed stream up to a target length appends the pad as one
    more segment. When the stream already has the target length `n` is 0
    and the new boundary repeats the last one: an empty sequence joins the
    batch, one more entry in every per-sample list the offsets describe,
    and attention kernels that take `cu_seqlens` see a zero-length sequence
    (the sample count is off by one, and a sample's `T` is 0). DESIGN.md
    section 10, class 7; inclusionAI/AReaL be621da55 returned the batch
    unchanged for a zero pad.

    ## Example
    ```python
    extra = target - int(cu_seqlens[-1])
    cu_seqlens = F.pad(cu_seqlens, (0, 1), value=target)
    ```

    ## How to fix
    ```python
    extra = target - int(cu_seqlens[-1])
    if extra == 0:
        return batch
    cu_seqlens = F.pad(cu_seqlens, (0, 1), value=target)
    ```

    ## Fix safety
    No autofix: what to return for an unpadded batch is the caller's contract.
    """

    code = "LC118"
    message = (
        "`F.pad(cu_seqlens, (0, 1), value=target)` appends a boundary while `extra`, the segment it closes, can "
        "be 0: an empty sequence joins the batch. Return the batch unchanged when `extra` is 0."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "(0, 1)" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "empty_segment":
                yield self.report(
                    found.span,
                    f"`{found.text}` appends a boundary to cumulative offsets while `{found.detail}`, the length "
                    "of the segment it closes, can be 0: an empty sequence joins the batch. Skip the boundary "
                    f"when `{found.detail}` is 0.",
                )

    valid = [
        Valid(
            """
import torch.nn.functional as F

def pad_stream(cu_seqlens, target):
    extra = target - int(cu_seqlens[-1])
    if extra < 0:
        raise ValueError(target)
    elif extra == 0:
        return cu_seqlens, 0
    return F.pad(cu_seqlens, (0, 1), value=target), extra
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_stream(cu_seqlens, target):
    extra = target - int(cu_seqlens[-1])
    if extra > 0:
        cu_seqlens = F.pad(cu_seqlens, (0, 1), value=target)
    return cu_seqlens, extra
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def with_leading_zero(lengths):
    return F.pad(lengths.cumsum(0), (1, 0))
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_stream(cu_seqlens, target):
    extra = target - int(cu_seqlens[-1])
    assert extra > 0, "a packed batch is never exactly the target length here"
    return F.pad(cu_seqlens, (0, 1), value=target)
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_stream(cu_seqlens, target):
    extra = target - int(cu_seqlens[-1])
    if extra:
        cu_seqlens = F.pad(cu_seqlens, (0, 1), value=target)
    return cu_seqlens
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch.nn.functional as F

def pad_stream(cu_seqlens, target):
    extra = target - int(cu_seqlens[-1])
    if extra < 0:
        raise ValueError(target)
    return F.pad(cu_seqlens, (0, 1), value=target), extra
""",
            line=8,
            column=12,
            message="`extra`, the length of the segment it closes, can be 0",
        ),
        Invalid(
            """
import torch.nn.functional as F

def pad_stream(batch, target):
    used = int(batch["starts"][-1])
    extra = target - used
    batch["starts"] = F.pad(batch["starts"], (0, 1), value=target)
    return batch, extra
""",
            line=7,
            column=23,
        ),
        Invalid(
            """
import torch

class Packer:
    def pad_to(self, offsets, length):
        fill = length - int(offsets[-1])
        offsets = torch.nn.functional.pad(offsets, (0, 1), value=length)
        return offsets, fill
""",
            line=7,
            column=19,
            message="while `fill`",
        ),
        Invalid(
            """
import torch.nn.functional as F

def pad_all(batches, target):
    out = []
    for cu in batches:
        missing = target - int(cu[-1])
        out.append((F.pad(cu, (0, 1), value=target), missing))
    return out
""",
            line=8,
            column=21,
        ),
    ]
