from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class AlignmentUnitPickedByBranch(ModelRule):
    """A round-up's alignment unit picked by an `if`/`elif` chain of independent conditions.

    ## What it does
    Flags the `if` of a chain whose arms test different things (CP enabled,
    sequence parallelism on) and bind a round-up's unit to different factors
    (`unit = 2 * cp_size` in one arm, `unit = tp_size` in the next), when a
    round-up in the function pads to that unit. Arms that test one thing
    (`layout == "thd"` / `layout == "bshd"`) are exclusive cases and are not
    flagged, nor are arms that bind a literal (`unit = 1`, `32 if mx else
    16`), nor arms an earlier arm already takes together
    (`if sp and cp > 1: unit = tp * 2 * cp` first), nor units whose factors
    include the other's (`m` and `m * cp`).

    It also flags a round-up's unit `math.lcm(t, 2 * c)` (through locals
    and the arms of `a if cond else b`) where `c` and `t` are both sizes
    read at run time (a call's or an attribute's value, such as a process
    group's size; not literals or parameters) and `t` is no product with
    `c`: the factor of a zigzag split joined by `lcm` with another split's
    size, as if both cut the whole length.

    ## Why it matters
    The alignment unit `A` must be a multiple of every factor that applies
    (`2 cp` for zigzag CP, `tp` for sequence parallelism's reduce-scatter);
    an `elif` picks one. When both conditions hold, padded lengths are a
    multiple of the first factor only, and the other layer fails on a
    length it cannot divide or splits tokens across ranks unevenly. docs/design.md#layout-spaces-and-bug-classes, class 8 (one factor picked where every factor must divide).
    Where one split cuts the parts of another, the factors multiply:
    sequence parallelism divides each CP rank's part (`P / cp` tokens) by
    `tp`, so the CP and SP unit is a multiple of `2 cp` and of `cp * tp`
    (`math.lcm(2 * cp, cp * tp)`, or `2 * cp * tp`), not of `math.lcm(2 * cp,
    tp)`: with `cp = 2, tp = 4` that is 4, and each rank's 2 tokens do not
    split over 4 (verl fixed exactly this in c20d5049a; Megatron-Bridge
    combines `2 * cp` with `cp * tp`). Factors of requirements on the same
    length (a kernel's block and the TP multiple) combine with `lcm`, as
    `layoutcheck.geometry.alignment_unit` does.

    ## Example
    ```python
    if cp_size > 1:
        unit = 2 * cp_size
    elif sequence_parallel:
        unit = tp_size
    padded = (n + unit - 1) // unit * unit
    ```

    ## How to fix
    Combine every factor that applies; sequence parallelism divides each CP
    rank's part, so its factor is `cp_size * tp_size`:
    ```python
    unit = 1
    if cp_size > 1:
        unit = math.lcm(unit, 2 * cp_size)
    if sequence_parallel:
        unit = math.lcm(unit, cp_size * tp_size)
    ```

    ## Known problems
    Only a unit bound in the round-up's own function, and used by a
    round-up idiom there, is judged: a unit passed to a helper that rounds
    up is not followed. `lcm(t, 2 * c)` of two sizes that both cut the whole
    length (no split inside the other's parts) is right and is flagged all
    the same; sizes given as parameters are not judged.

    ## Fix safety
    No autofix: the combined unit changes every padded length.
    """

    code = "LC114"
    message = (
        "`cp_size > 1` picks one alignment unit of several: `unit` is `2 * cp_size` when `cp_size > 1` and "
        "`tp_size` when `sequence_parallel`, never a multiple of both. Use a unit every factor divides, each "
        "split's factor applied to the parts it cuts (`math.lcm(2 * cp, cp * tp)` for CP then sequence parallelism)."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "elif" in source or "lcm(" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "unit_lcm_nested":
                size, other = found.detail.split("|", 1)
                yield self.report(
                    found.span,
                    f"`{found.text}` joins the factor of a zigzag split into `2 * {size}` chunks with "
                    f"`{other}`, another split's size, by `lcm`: when that split divides each of the "
                    f"`{size}` parts (sequence parallelism inside context parallelism), a part is `P / {size}` "
                    f"long and must be a multiple of `{other}`, so the unit is a multiple of `{size} * {other}`; "
                    f"the lcm is smaller whenever `{other}` and `2 * {size}` share a factor. Use "
                    f"`math.lcm(2 * {size}, {size} * {other})` (or `2 * {size} * {other}`).",
                )
                continue
            if found.kind != "unit_picked":
                continue
            yield self.report(
                found.span,
                f"`{found.text}` picks one alignment unit of several: {found.detail}, never a multiple of "
                "both. Use a unit every factor divides, each split's factor applied to the parts it cuts "
                "(`math.lcm(2 * cp, cp * tp)` for CP then sequence parallelism).",
            )

    valid = [
        Valid(
            """
import math

import torch.distributed as dist


def aligned(n, cp_group, tp_group):
    c, t = dist.get_world_size(cp_group), dist.get_world_size(tp_group)
    # the SP factor applied to each CP part; a kernel's block joined by lcm
    unit = math.lcm(math.lcm(2 * c, c * t), 16) if c > 1 else t
    return (n + unit - 1) // unit * unit
"""
        ),
        Valid(
            """
import math


def pad_stream(tokens, cp_size, tp_size, sequence_parallel):
    unit = 1
    if cp_size > 1:
        unit = math.lcm(unit, 2 * cp_size)
    if sequence_parallel:
        unit = math.lcm(unit, cp_size * tp_size)
    n = tokens.size(0)
    return (n + unit - 1) // unit * unit
"""
        ),
        Valid(
            """
def pad_layout(tokens, layout, cp_size):
    # one thing tested: exclusive cases
    if layout == "thd":
        unit = 2 * cp_size
    elif layout == "bshd":
        unit = cp_size
    else:
        unit = 1
    return -(-tokens.size(0) // unit) * unit
"""
        ),
        Valid(
            """
def pad_stream(tokens, cp_size):
    if cp_size > 1:
        unit = 2 * cp_size
    elif tokens.is_cuda:
        unit = 1
    else:
        unit = 8
    return (tokens.size(0) + unit - 1) // unit * unit
"""
        ),
        Valid(
            """
def describe(cp_size, sequence_parallel, tp_size):
    # the unit is reported, not padded to
    if cp_size > 1:
        unit = 2 * cp_size
    elif sequence_parallel:
        unit = tp_size
    return f"unit {unit}"
"""
        ),
        Valid(
            """
def pad_stream(tokens, cp_size, sequence_parallel, tp_size):
    n = tokens.size(0)
    padded = (n + cp_size - 1) // cp_size * cp_size
    if cp_size > 1:
        unit = 2 * cp_size
    elif sequence_parallel:
        unit = tp_size
    return padded, unit
"""
        ),
        Valid(
            """
def padding_for(seq_len, cp_size, tp_size, has_sp):
    # the first arm takes both conditions: the later arms are exclusive
    if has_sp and cp_size > 1:
        factor = tp_size * cp_size * 2
    elif cp_size > 1:
        factor = cp_size * 2
    elif has_sp:
        factor = tp_size
    else:
        factor = 1
    return (seq_len + factor - 1) // factor * factor - seq_len
"""
        ),
        Valid(
            """
def stream_length(size, multiple, cp_size, sliced, scheme):
    # nested units: one is a multiple of the other
    if sliced or cp_size == 1:
        unit = multiple
    elif scheme == "allgather":
        unit = multiple * cp_size
    else:
        return size
    return -(-size // unit) * unit
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import math

import torch.distributed as dist


def aligned(n, cp_group, tp_group):
    c = dist.get_world_size(cp_group)
    t = dist.get_world_size(tp_group)
    step = math.lcm(t, c * 2) if c > 1 else t
    return (n + step - 1) // step * step
""",
            line=10,
            column=12,
            message="joins the factor of a zigzag split into `2 * c` chunks with `t`",
        ),
        Invalid(
            """
def pad_stream(tokens, cp_size, tp_size, sequence_parallel):
    n = tokens.size(0)
    if cp_size > 1:
        unit = 2 * cp_size
    elif sequence_parallel:
        unit = tp_size
    else:
        unit = 1
    return (n + unit - 1) // unit * unit
""",
            line=4,
            message="`unit` is `2 * cp_size` when `cp_size > 1` and `tp_size` when `sequence_parallel`",
        ),
        Invalid(
            """
import math


def padded_lengths(lengths, args):
    if args.context_parallel_size > 1:
        multiple = args.context_parallel_size * 2
    elif args.sequence_parallel:
        multiple = args.tensor_model_parallel_size
    return [math.ceil(n / multiple) * multiple for n in lengths]
""",
            line=6,
        ),
        Invalid(
            """
def pad_amount(n, cp_size, tp_size, compress_ratio, sequence_parallel):
    if compress_ratio is not None:
        unit = compress_ratio * 2 * cp_size
    elif sequence_parallel:
        unit = tp_size
    else:
        unit = 2 * cp_size
    return (unit - n % unit) % unit
""",
            line=3,
        ),
        Invalid(
            """
def pack(samples, cp_size, tp_size, sequence_parallel):
    if cp_size > 1:
        unit = 2 * cp_size
    elif sequence_parallel:
        unit = tp_size
    else:
        unit = 1
    out = []
    for s in samples:
        out.append(-(-len(s) // unit) * unit)
    return out
""",
            line=3,
        ),
    ]
