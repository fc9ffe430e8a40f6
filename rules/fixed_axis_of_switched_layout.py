from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class FixedAxisOfSwitchedLayout(ModelRule):
    """`pad_sequence(..., batch_first=flag).flip(dims=[1])`: a literal axis of a layout the caller picks.

    ## What it does
    Flags an operation along a literal axis 0 or 1 (`flip`, `roll`,
    `narrow`, `select`, `index_select`, `cumsum`) of a batch built by
    `pad_sequence` with a `batch_first` that is not a literal (a parameter,
    a setting), directly or through a local assigned once.

    ## Why it matters
    `pad_sequence` returns `[batch, time]` when `batch_first` is true and
    `[time, batch]` when it is false. Axis 1 is the time axis in one layout
    and the batch axis in the other: a left-padding helper that reverses
    the samples, pads each sample's `T` tokens on the right to `P` and reverses the batch
    back along axis 1 pads on the left for one value of the flag, and for the other
    reverses the order of the rows and leaves each sample reversed in time,
    its padding on the right (docs/design.md#layout-spaces-and-bug-classes,
    class 7; pytorch/torchtune 68d4f3ee1 flipped `dims=[1]` whatever
    `batch_first` was).

    ## Example
    ```python
    def left_pad(samples, batch_first=False):
        reversed_rows = [s.flip(0) for s in samples]
        return pad_sequence(reversed_rows, batch_first=batch_first).flip(dims=[1])
    ```

    ## How to fix
    Take the axis from the flag, `flip(dims=[int(batch_first)])`, or build
    one layout and transpose at the end.

    ## Known problems
    Only `pad_sequence`'s own `batch_first` is read; a layout switched by
    another flag is not.

    ## Fix safety
    No autofix: which layout the axis was written for is the author's.
    """

    code = "LC130"
    message = (
        "`pad_sequence(..., batch_first=flag).flip(dims=[1])`: axis 1 is time when `flag` is true and the batch "
        "when it is false. Take the axis from the flag (`int(batch_first)`)."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "batch_first" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "fixed_axis_of_switched_layout":
                axis, flag = found.detail.split("|", 1)
                other = {"0": "the time axis", "1": "the batch axis"}[axis]
                mine = {"0": "the batch axis", "1": "the time axis"}[axis]
                yield self.report(
                    found.span,
                    f"`{found.text}` works along axis {axis} of a `pad_sequence` batch whose layout is "
                    f"`batch_first={flag}`: axis {axis} is {mine} when `{flag}` is true and {other} when it is "
                    f"false, so one of the two layouts is read along the wrong axis. Take the axis from the flag "
                    f"(`{'int' if axis == '1' else '1 - int'}({flag})`), or fix the layout and transpose after.",
                )

    valid = [
        Valid(
            """
import torch
from torch.nn.utils.rnn import pad_sequence

def left_pad(samples, batch_first=False, fill=0):
    return pad_sequence(
        [torch.flip(s, dims=[0]) for s in samples], batch_first=batch_first, padding_value=fill
    ).flip(dims=[int(batch_first)])
"""
        ),
        Valid(
            """
from torch.nn.utils.rnn import pad_sequence

def left_pad(samples, fill=0):
    return pad_sequence([s.flip(0) for s in samples], batch_first=True, padding_value=fill).flip(dims=[1])
"""
        ),
        Valid(
            """
from torch.nn.utils.rnn import pad_sequence

def right_pad(samples, batch_first=False):
    return pad_sequence(samples, batch_first=batch_first)
"""
        ),
        Valid(
            """
from torch.nn.utils.rnn import pad_sequence

def left_pad(samples, batch_first=False):
    padded = pad_sequence([s.flip(0) for s in samples], batch_first=batch_first)
    return padded.flip(dims=[1 if batch_first else 0])
"""
        ),
        Valid(
            """
from torch.nn.utils.rnn import pad_sequence

def last_axis(samples, batch_first):
    return pad_sequence(samples, batch_first=batch_first).flip(dims=[-1])
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch
from torch.nn.utils.rnn import pad_sequence

def left_pad(samples, batch_first=False, fill=0):
    return pad_sequence(
        map(lambda s: torch.flip(s, dims=[0]), samples), batch_first=batch_first, padding_value=fill
    ).flip(dims=[1])
""",
            line=6,
            column=12,
            message="axis 1 is the time axis when `batch_first` is true",
        ),
        Invalid(
            """
import torch
from torch.nn.utils.rnn import pad_sequence

def left_pad(samples, layout_batch_first):
    padded = pad_sequence([s.flip(0) for s in samples], batch_first=layout_batch_first)
    return torch.flip(padded, [1])
""",
            line=7,
            column=12,
        ),
            Invalid(
            """
from torch.nn.utils.rnn import pad_sequence

def shifted(samples, batch_first):
    padded = pad_sequence(samples, batch_first=batch_first, padding_value=0)
    return padded.roll(-1, dims=1)
""",
            line=6,
            column=12,
        ),
        Invalid(
            """
from torch.nn.utils.rnn import pad_sequence

def first_positions(samples, cfg):
    return pad_sequence(samples, cfg.batch_first).narrow(1, 0, 4)
""",
            line=5,
            column=12,
        ),
    ]
