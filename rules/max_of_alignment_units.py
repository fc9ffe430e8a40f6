from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


_PRODUCER = '''
def get_rollout_data(args, rollout_data, parallel_state):
    unit = parallel_state.tp.size * args.data_pad_size_multiplier
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
    return rollout_data
'''
"""The owner: it pads to a unit built from `tp.size` and `data_pad_size_multiplier`."""


class MaxOfAlignmentUnits(ModelRule):
    """Alignment units combined with `max()`, which is not a multiple of every unit.

    ## What it does
    Flags `max(...)` that combines alignment units: its result is what a
    round-up rounds to (`pad_size = max(pad_size, k * cp)`), or one of the
    values is built from a factor of the unit an owner pads lengths to (an
    attribute such as `args.data_pad_size_multiplier`, seen in the owner's
    round-up): `max(a, b)` of several values, or `max(units)` over a list of
    them. `max(x, 1)` (a clamp) is not flagged, and neither is a maximum
    of lengths (values rounded up to a unit, sizes: each a multiple of its
    unit, and so is their maximum; `max(longest, multiplier)` bounds a
    length), of powers of two (Triton's `next_power_of_2` tile sizes, `2 **
    k`, `1 << k`: they divide each other, so their maximum is their lcm), or
    of a comprehension's own variables (`max(size for _, size in
    blocks.items())`: elements of what it walks). What a value is is read
    from how it is computed, not from its name.

    ## Why it matters
    The alignment unit `A` must be a multiple of every unit it combines: TP
    size times the pad multiplier, `k` (or `2 k cp`) for compressed attention
    of ratio `k`, `cp` for all-gather CP. `max()` is that only when the units
    divide each other; with a multiplier of 128 and `2 k cp = 12`, `max()`
    gives 128, which is not a multiple of 12, and compressed blocks straddle
    zigzag chunks. It is latent until someone changes one of the units.
    `layoutcheck.geometry.alignment_unit` shows both values
    (`AlignmentUnit.max_is_wrong`).

    ## Example
    ```python
    units = [tp_size * args.data_pad_size_multiplier]
    if args.compress_ratio is not None:
        units.append(args.compress_ratio * 2 * cp_size)
    pad_size = max(units)
    ```

    ## How to fix
    ```python
    pad_size = math.lcm(*units)
    ```

    ## Configuration
    None needed; `pad-multiplier-names` (a hint) names multipliers no owner
    in the tree pads with.

    ## Fix safety
    No autofix: `lcm` changes every padded length whenever the units do not
    divide each other (that is the point), and the change deserves a review.
    """

    code = "LC106"
    message = (
        "`max(units)` combines alignment units with `max()`, which is a multiple of every unit only "
        "when they divide each other. Combine them with `math.lcm(...)` instead."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "max" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        units: frozenset[str] | None = None  # the owners' unit factors, found when a call needs them
        for found in file.facts.max_calls:
            if not found.unit:
                if not found.atoms:
                    continue  # no factor among the values: no unit's either
                if units is None:
                    units = file.project.unit_atoms
                if not set(found.atoms) & units:
                    continue  # no factor of an alignment unit among the values
            yield self.report(
                found.span,
                f"`{found.text}` combines alignment units with `max()`, which is a multiple of every "
                "unit only when they divide each other. Combine them with `math.lcm(...)` instead.",
            )

    valid = [
        Valid(
            """
import math

def alignment(args, tp_size, cp_size):
    units = [tp_size * args.data_pad_size_multiplier]
    if args.compress_ratio is not None:
        units.append(args.compress_ratio * 2 * cp_size)
    return math.lcm(*units)
"""
        ),
        Valid(
            """
def pad_size(tp_size, pad_multiplier):
    return max(tp_size * pad_multiplier, 1)
"""
        ),
        Valid(
            """
def longest(rollout_data, pad_multiplier):
    return max(rollout_data["total_lengths"]), pad_multiplier
"""
        ),
        Valid(
            """
def block(block_sizes, pad_multiplier):
    return max(block_sizes) * pad_multiplier
"""
        ),
        Valid(
            """
from layoutcheck.geometry import alignment_unit

def unit(args, tp_size, cp_size):
    return alignment_unit(tp_size, args.data_pad_size_multiplier, cp_size=cp_size).value
"""
        ),
        Valid(
            """
import math

class VideoPipeline:
    def video_seq_len(self, shapes, patch):
        # each length is rounded up to `sp_size`: the longest is a multiple of it too, not a unit
        seq_lens = []
        for frames, height, width in shapes:
            seq_lens.append(math.ceil(frames * height * width / patch / self.sp_size) * self.sp_size)
        return max(seq_lens)
""",
            files={"data.py": '''
def get_rollout_data(args, rollout_data):
    unit = args.sp_size * args.data_pad_size_multiplier
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
    return rollout_data
'''},
        ),
        Valid(
            """
import triton

def launch(x, n_cols):
    # Triton tile sizes are powers of two, which divide each other: their max is their lcm
    block = max(triton.next_power_of_2(n_cols), 16)
    padded = (n_cols + block - 1) // block * block
    return x.new_zeros(padded)
"""
        ),
        Valid(
            """
class ContiguousAllocator:
    def largest_free_block(self):
        # the largest free block of a memory allocator: a size, not a unit
        return max([size for _, size in self.contiguous_sizes.items()])
""",
            files={"data.py": '''
def get_rollout_data(args, rollout_data):
    unit = args.size * args.data_pad_size_multiplier
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
    return rollout_data
'''},
        ),
        Valid(
            """
def bound(rollout_data, args):
    # the longest sample, or the multiplier when every sample is shorter: a bound on a length
    return max(max(len(t) for t in rollout_data["tokens"]), args.data_pad_size_multiplier)
""",
            files={"data.py": _PRODUCER},
        ),
    ]
    invalid = [
        Invalid(
            """
def alignment_unit(args, ps):
    units = [ps.tp.size * args.data_pad_size_multiplier]
    if args.compress_ratio is not None:
        units.append(args.compress_ratio * (2 * ps.cp.size if ps.cp.size > 1 else 1))
    return max(units)
""",
            line=6,
            column=12,
            message="`max(units)` combines alignment units",
            files={"data.py": _PRODUCER},
        ),
        Invalid(
            """
def padded_lengths(total_lengths, tp_size, pad_multiplier, compress_ratio, cp_size):
    unit = max(tp_size * pad_multiplier, compress_ratio * 2 * cp_size)
    return [(t + unit - 1) // unit * unit for t in total_lengths]
""",
            line=3,
            column=12,
        ),
        Invalid(
            """
def get_rollout_data(args, rollout_data, parallel_state):
    pad_size = parallel_state.tp.size * args.data_pad_size_multiplier
    if args.allgather_cp:
        pad_size = max(pad_size, parallel_state.cp.size)
    rollout_data["max_seq_lens"] = [-(-t // pad_size) * pad_size for t in rollout_data["total_lengths"]]
""",
            line=5,
            column=20,
        ),
        Invalid(
            """
PAD_MULTIPLIER = 128

def padded(n, tp, cp):
    unit = max([tp * PAD_MULTIPLIER, 2 * cp])
    return (n + unit - 1) // unit * unit
""",
            line=5,
            column=12,
        ),
    ]
