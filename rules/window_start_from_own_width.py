from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class WindowStartFromOwnWidth(ModelRule):
    """`start = i * chunk.shape[d]` for the window `chunk` is stored in: one piece's width for all of them.

    ## What it does
    Flags the start of a window (`buf[start : start + w]`, `slice(start,
    end)`) that is `k * w`, where `w` is the width of the very value the
    function stores into a buffer (`w = chunk.shape[d]`, `chunk.size(d)`;
    `buf[...] = chunk`, `buf[...].copy_(chunk)`), and `k` is not a literal
    and not read from that value. Locals assigned once are followed.

    ## Why it matters
    `k * w` is where the piece goes only if every piece before it is as
    wide as this one. Pieces cut by `torch.chunk` or `split` from a sequence of `T`
    positions that does not divide evenly are not: the last, narrower piece is placed
    at `k * (its own width)`, inside the piece before it, overwriting its
    rows and leaving the buffer's tail untouched
    (docs/design.md#layout-spaces-and-bug-classes, class 1: one length for
    many; pytorch/torchtitan 669068c0d placed each gradient chunk of the
    chunked loss at its index times its own width).

    ## Example
    ```python
    width = chunk.shape[self.seq_dim]
    start = self._next * width
    buffer[:, start : start + width] = chunk
    ```

    ## How to fix
    Keep a running offset, the sum of the widths placed so far, and start
    each piece there (`start = self._offset; self._offset += width`); or
    compute the starts from every piece's width (`cumsum`).

    ## Known problems
    Pieces equal by construction (each rank's buffer of an `all_gather`)
    are flagged too: the start is right until a piece's width changes.

    ## Fix safety
    No autofix: the running offset is state the author has to keep.
    """

    code = "LC132"
    message = (
        "`start = i * chunk.shape[d]` places `chunk` as if every piece before it were as wide as it: uneven "
        "pieces overlap. Keep a running offset (the sum of the widths placed so far)."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "*" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "start_from_own_width":
                yield self.report(
                    found.span,
                    f"`{found.text}` starts a window at an index times `{found.detail}`, the width of the piece "
                    "stored there: right only if every piece before it is as wide. When the pieces are uneven "
                    "(`torch.chunk` of a length that does not divide), a narrower piece lands inside the one "
                    "before it. Start each piece at a running offset (the sum of the widths placed so far).",
                )

    valid = [
        Valid(
            """
class Accumulator:
    def __init__(self, buffer):
        self.buffer = buffer
        self.offset = 0

    def add(self, chunk):
        width = chunk.shape[1]
        start = self.offset
        self.buffer[:, start : start + width] = chunk
        self.offset += width
"""
        ),
        Valid(
            """
def place(buffer, chunk, i, unit):
    start = i * unit
    buffer[start : start + chunk.shape[0]] = chunk
"""
        ),
        Valid(
            """
import torch

def place_all(buffer, pieces):
    offsets = torch.cumsum(torch.tensor([p.shape[0] for p in pieces]), 0)
    start = 0
    for piece in pieces:
        buffer[start : start + piece.shape[0]] = piece
        start += piece.shape[0]
"""
        ),
        Valid(
            """
def place(buffer, piece, i, width):
    start = i * width
    buffer[start : start + piece.shape[0]] = piece
"""
        ),
        Valid(
            """
def read(buffer, piece, i):
    w = piece.shape[0]
    return buffer[i * w : (i + 1) * w] + piece
"""
        ),
    ]
    invalid = [
        Invalid(
            """
class Accumulator:
    def __init__(self, buffer, dim):
        self.buffer, self.dim, self.next = buffer, dim, 0

    def add(self, chunk):
        width = chunk.shape[self.dim]
        start = self.next * width
        end = start + width
        index = [slice(None)] * self.buffer.ndim
        index[self.dim] = slice(start, end)
        self.buffer[tuple(index)] = chunk
        self.next += 1
""",
            line=8,
            column=17,
            message="the width of the piece stored there",
        ),
        Invalid(
            """
def place_all(buffer, pieces):
    for i, piece in enumerate(pieces):
        w = piece.size(0)
        buffer[i * w : (i + 1) * w] = piece
""",
            line=5,
            column=16,
        ),
            Invalid(
            """
def place(buffer, chunk, index):
    width = chunk.size(1)
    buffer[:, index * width : (index + 1) * width].copy_(chunk)
""",
            line=4,
            column=15,
        ),
        Invalid(
            """
class Grads:
    def __init__(self, buffer):
        self.buffer, self.count = buffer, 0

    def add(self, piece):
        n = piece.shape[0]
        lo = self.count * n
        self.buffer[lo : lo + n] = piece
        self.count += 1
""",
            line=8,
            column=14,
        ),
    ]
