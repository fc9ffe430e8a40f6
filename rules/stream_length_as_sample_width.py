from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class StreamLengthAsSampleWidth(ModelRule):
    """A packed stream's length taken as one sample's width.

    ## What it does
    Flags a pad amount `w - n` (`F.pad(x, (0, w - n))`) where `n` is one
    sample's length and `w` is a cumulative offset of a packed batch: the
    largest entry of `cu_seqlens` (`cu.max()`) or of a nested tensor's
    `offsets()`, whatever the names. Cumulative offsets are read from what
    the code does: a cumulative sum of lengths, `.offsets()` of a jagged
    tensor; their differences (`offsets().diff()`) are lengths. The width
    may be computed into a local first (`pad_size = w - n` on the line
    before `F.pad(x, (0, pad_size))`). The finding points where the offset
    was taken for the width.

    ## Why it matters
    The largest cumulative offset is the whole stream's length `sum(T)`,
    not the longest sample's `T`: each row padded to it is as wide as the
    batch, memory grows with the batch size squared, and the padded rows no
    longer line up with a rectangular partner padded to its longest sample
    (docs/design.md#layout-spaces-and-bug-classes, class 3; volcengine/verl 40a2ee785 took the
    largest offset of the packed responses as the widest response).

    ## Example
    ```python
    widest = responses.offsets().max().item()
    rows = [F.pad(stream[end - size : end], (0, widest - size)) for size, end in zip(sizes, ends)]
    ```

    ## How to fix
    Take the widest sample from the lengths: `widest = responses.offsets().diff().max().item()`.

    ## Fix safety
    No autofix: the width a consumer expects may be a padded length `P`.
    """

    code = "LC121"
    message = (
        "`offsets.max()` is the packed stream's length, yet `widest - size` pads one sample to it. Take the "
        "widest sample from the lengths (`offsets.diff().max()`)."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "pad(" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "stream_width":
                # Pointed at the offset when the model knows where it was taken, else at the pad amount.
                offset = "its width" if found.text == found.detail else f"`{found.text}`"
                yield self.report(
                    found.span,
                    f"{offset} is a cumulative offset, the packed stream's length `sum(T)`, but "
                    f"`{found.detail}` pads one sample to it. Take the width from the samples' lengths (the "
                    "offsets' differences).",
                )

    valid = [
        Valid(
            """
import torch
import torch.nn.functional as F

def to_rows(stream, responses, sizes):
    widest = responses.offsets().diff().max().item()
    ends = torch.cumsum(sizes, dim=0)
    return torch.stack([F.pad(stream[e - n : e], (0, widest - n)) for n, e in zip(sizes, ends)])
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_stream(stream, cu_seqlens, unit):
    # the whole stream padded to its own length's round-up: a stream, not a sample
    total = int(cu_seqlens.max())
    return F.pad(stream, (0, -total % unit))
"""
        ),
        Valid(
            """
import torch
import torch.nn.functional as F

def to_rows(stream, lengths):
    cu = torch.cumsum(lengths, dim=0)
    widest = int(lengths.max())
    return torch.stack([F.pad(stream[e - n : e], (0, widest - n)) for n, e in zip(lengths, cu)])
"""
        ),
        Valid(
            """
import torch
import torch.nn.functional as F

def to_rows(stream, lengths):
    cu = torch.cumsum(lengths, dim=0)
    widest = int(torch.diff(cu).max())
    return [F.pad(stream[e - n : e], (0, widest - n)) for n, e in zip(lengths, cu)]
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_rows(rows, width):
    # a width given by the caller: nothing cumulative about it
    return [F.pad(r, (0, width - r.shape[0])) for r in rows]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch
import torch.nn.functional as F

def to_rows(stream, responses, sizes):
    widest = responses.offsets().max().item()
    ends = torch.cumsum(sizes, dim=0)
    rows = []
    for n, e in zip(sizes, ends):
        width = widest - n  # the pad width computed on the line before the pad
        rows.append(F.pad(stream[e - n : e], (0, width)))
    return torch.stack(rows)
""",
            line=6,
            column=14,
            message="is a cumulative offset, the packed stream's length",
        ),
        Invalid(
            """
import torch
import torch.nn.functional as F

def to_rows(stream, responses, sizes):
    widest = responses.offsets().max().item()
    ends = torch.cumsum(sizes, dim=0)
    return torch.stack([F.pad(stream[e - n : e], (0, widest - n)) for n, e in zip(sizes, ends)])
""",
            line=6,
            column=14,
            message="is a cumulative offset, the packed stream's length",
        ),
        Invalid(
            """
import torch
import torch.nn.functional as F

def to_rows(stream, lengths):
    cu = torch.cumsum(lengths, dim=0)
    rows = []
    for n, end in zip(lengths, cu):
        rows.append(F.pad(stream[end - n : end], (0, cu.max() - n)))
    return torch.stack(rows)
""",
            line=9,
            column=54,
        ),
        Invalid(
            """
import torch
import torch.nn.functional as F

def to_rows(stream, lengths):
    cu = torch.cumsum(lengths, dim=0)
    widest = int(cu[-1])
    return [F.pad(stream[e - n : e], (0, widest - n)) for n, e in zip(lengths, cu)]
""",
            line=8,
            column=42,
            message="its width is a cumulative offset",
        ),
        Invalid(
            """
import torch.nn.functional as F

def unpack(nested):
    offsets = nested.offsets()
    lengths = offsets.diff()
    width = int(offsets.max())
    return [F.pad(row, (0, width - n)) for row, n in zip(nested.unbind(), lengths)]
""",
            line=7,
            column=17,
        ),
        Invalid(
            """
import torch
import torch.nn.functional as F

def to_rows(stream, lengths):
    cu = lengths.cumsum(0)
    top = cu.max()
    out = []
    for n, end in zip(lengths, cu):
        out.append(F.pad(stream[end - n : end], (0, top - n), value=0))
    return out
""",
            line=7,
            column=11,
        ),
    ]
