from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class NeighbourDifferenceMisaligned(ModelRule):
    """`x[1:] - x[:1]`: a difference of two slices of one array whose entries do not line up.

    ## What it does
    Flags a subtraction of two slices of the same array along the same axis
    (every other index the same), with literal bounds, one of them running
    to the array's end, whose lengths differ: `x[1:]` is `n - 1` long,
    `x[:1]` is 1 long. An operand bound to a local first (assigned once) is
    read through it. `x[1:] - x[:-1]` (both `n - 1`) is the difference of
    neighbours and is not flagged.

    ## Why it matters
    The true lengths `T` of a packed stream's samples are the differences of
    neighbouring cumulative offsets, `offsets[1:] - offsets[:-1]`. With
    the second slice cut at the wrong end (`offsets[:1]`, the first offset
    alone) the subtraction still runs: the one entry broadcasts, and every
    "length" is the distance from the stream's start. The longest sample
    becomes the whole stream, and a kernel bound or a per-sample split
    built from it is wrong with no error (docs/design.md#layout-spaces-and-bug-classes, class 5;
    zhuzilin/ring-flash-attention 8996282 took `max_seqlen` from
    `cu_seqlens[1:] - cu_seqlens[:1]`).

    ## Example
    ```python
    longest = (offsets[1:] - offsets[:1]).max().item()
    ```

    ## How to fix
    Pair each entry with its neighbour, `offsets[1:] - offsets[:-1]` (or
    `torch.diff(offsets)`); to measure from the first entry on purpose,
    say so: `offsets[1:] - offsets[0]`.

    ## Known problems
    Only literal bounds are compared; `x[k:] - x[:m]` with names is not read.

    ## Fix safety
    No autofix: which slice is cut at the wrong end is the author's to say.
    """

    code = "LC126"
    message = (
        "`x[1:] - x[:1]` pairs slices of different lengths (`n - 1` against `1`): each entry is paired with "
        "another than its neighbour. Write `x[1:] - x[:-1]` (or `torch.diff(x)`)."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return ":" in source and "-" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "misaligned_difference":
                yield self.report(
                    found.span,
                    f"`{found.text}` subtracts slices of one array whose lengths differ ({found.detail}, for an "
                    "array of n entries): each entry is paired with another than its neighbour, and a one-entry "
                    "slice broadcasts. Pair neighbours (`x[1:] - x[:-1]`, `torch.diff(x)`), or subtract the entry "
                    "meant by its index (`x[1:] - x[0]`).",
                )

    valid = [
        Valid(
            """
def sample_lengths(offsets):
    return offsets[1:] - offsets[:-1]
"""
        ),
        Valid(
            """
def longest(offsets_list):
    out = []
    for offsets in offsets_list:
        later, earlier = offsets[1:], offsets[:-1]
        out.append((later - earlier).max().item())
    return out
"""
        ),
        Valid(
            """
def from_start(offsets):
    return offsets[1:] - offsets[0]
"""
        ),
        Valid(
            """
def window_gaps(starts, k):
    return starts[k:] - starts[:k]
"""
        ),
        Valid(
            """
import torch

def lengths(offsets):
    return torch.diff(offsets)
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def longest(offsets_list):
    return [(offsets[1:] - offsets[:1]).max().item() for offsets in offsets_list]
""",
            line=3,
            column=14,
            message="lengths differ (n - 1 against 1",
        ),
        Invalid(
            """
def lengths(offsets):
    tail = offsets[:, 1:]
    head = offsets[:, :1]
    return tail - head
""",
            line=5,
            column=12,
        ),
            Invalid(
            """
def lengths(offsets):
    return offsets[2:] - offsets[:-1]
""",
            line=3,
            column=12,
        ),
        Invalid(
            """
def longest(offsets):
    gaps = offsets[1:] - offsets[:1]
    return int(gaps.max())
""",
            line=3,
            column=12,
        ),
    ]
