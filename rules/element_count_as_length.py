from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class ElementCountAsLength(ModelRule):
    """`x.numel()` in the width of a pad joined to `x` along its first axis, where `x.shape[0]` is its length.

    ## What it does
    Flags `x.numel()` in the size of a pad that is joined to `x` along its
    first axis (`torch.cat([x, torch.zeros(k - x.numel())], dim=0)`,
    `F.pad(x, (0, k - x.numel()))`), when the same function also reads
    `x`'s length along that axis (`x.shape[0]`, `x.size(0)`, `len(x)`).
    The pad is followed through a local assigned once.

    ## Why it matters
    `numel()` counts every element: for a row with feature axes (`[tokens,
    layers, k]`) it is tokens times features. A pad to the alignment unit `A` sized by it is too
    short, or skipped (`if x.numel() < unit:` is false for a 1-token row of
    384 elements), and a flat pad of `k - x.numel()` entries cannot be
    joined to `x`'s rows; later slices of `x` along its first axis then come
    back empty or short (docs/design.md#layout-spaces-and-bug-classes,
    class 3; verl-project/verl 1ae945592 padded router-replay rows to the
    CP alignment unit by their element count).

    ## Example
    ```python
    if d.numel() < unit:
        d = torch.cat([d, torch.zeros(unit - d.numel(), dtype=d.dtype)], dim=0)
    end = min(end, d.shape[0])
    ```

    ## How to fix
    Count along the axis you pad: `unit - d.shape[0]`, and give the pad
    the row's trailing shape, `torch.zeros((unit - d.shape[0], *d.shape[1:]))`.

    ## Known problems
    A tensor 1-D by design is flagged too (there `numel()` and `shape[0]`
    agree): the pad is right until the tensor gains an axis.

    ## Fix safety
    No autofix: the pad's trailing shape has to change with its width.
    """

    code = "LC129"
    message = (
        "`unit - d.numel()` sizes a pad joined to `d` along its first axis, whose length the function reads as "
        "`d.shape[0]`: `numel()` counts every element. Use `d.shape[0]`."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "numel" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "numel_as_length":
                x = found.detail
                yield self.report(
                    found.span,
                    f"`{found.text}` counts every element of `{x}`, but sizes a pad joined to `{x}` along its "
                    f"first axis, whose length this function also reads (`{x}.shape[0]`, `len({x})`): for `{x}` "
                    f"with feature axes the pad is too short or skipped. Count along the padded axis "
                    f"(`{x}.shape[0]`) and give the pad `{x}`'s trailing shape (`(k - {x}.shape[0], "
                    f"*{x}.shape[1:])`).",
                )

    valid = [
        Valid(
            """
import torch

def pad_row(d, unit, end):
    if d.shape[0] < unit:
        d = torch.cat([d, torch.zeros((unit - d.shape[0], *d.shape[1:]), dtype=d.dtype)], dim=0)
    return d[: min(end, d.shape[0])]
"""
        ),
        Valid(
            """
import torch

def pad_flat(d, unit):
    if d.numel() < unit:
        d = torch.cat([d, torch.zeros(unit - d.numel(), dtype=d.dtype)])
    return d
"""
        ),
        Valid(
            """
import torch

def pad_row(d, unit):
    if d.numel() < unit:
        d = torch.cat([d, torch.zeros(unit - d.numel())])
    return d[: unit]
"""
        ),
        Valid(
            """
import torch

def pad_row(d, unit):
    if len(d) < unit:
        d = torch.cat([d, d.new_zeros(unit - len(d), *d.shape[1:])], dim=0)
    return d
"""
        ),
        Valid(
            """
import torch

def pad_cols(d, unit):
    if d.shape[0] == 1:
        d = torch.cat([d, torch.zeros(1, unit - d.numel())], dim=1)
    return d
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch

def pad_row(d, unit, end):
    if d.numel() < unit:
        pad = torch.zeros(unit - d.numel(), dtype=d.dtype, device=d.device)
        d = torch.cat([d, pad], dim=0)
    return d[: min(end, d.shape[0])]
""",
            line=6,
            column=34,
            message="counts every element of `d`",
        ),
        Invalid(
            """
import torch.nn.functional as F

def pad_rows(rows, unit):
    out = []
    for d in rows:
        out.append(F.pad(d, (0, unit - d.numel())) if len(d) < unit else d)
    return out
""",
            line=7,
            column=40,
        ),
            Invalid(
            """
import torch

def pad_row(d, unit):
    missing = unit - d.numel()
    if missing > 0:
        d = torch.cat([d, d.new_zeros(missing)])
    return d, d.size(0)
""",
            line=5,
            column=22,
        ),
        Invalid(
            """
import torch

def pad_rows(rows, unit):
    out = []
    for d in rows:
        if d.shape[0] < unit:
            d = torch.cat((d, torch.zeros((unit - d.numel(),), dtype=d.dtype)), dim=0)
        out.append(d)
    return out
""",
            line=8,
            column=51,
        ),
    ]
