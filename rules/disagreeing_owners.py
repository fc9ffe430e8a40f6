from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries

_ACTOR = '''
import torch


def get_batch(data_iterator, keys, tp_size, pad_multiplier=128):
    batch = data_iterator.get_next(keys)
    tokens = torch.cat(batch["tokens"])
    pad_size = tp_size * pad_multiplier
    pad = (pad_size - tokens.size(0) % pad_size) % pad_size
    batch["cu_seqlens"] = torch.tensor([0, tokens.size(0) + pad])
    return batch
'''


def _unit(text: str) -> str:
    return text.replace("*", " * ").replace(",", ", ")


class DisagreeingOwners(ModelRule):
    """Two owners of one layout that pad differently.

    ## What it does
    Compares the owners of each layout with each other: the functions that
    store a packed batch's cumulative lengths (THD, `cu_seqlens` whatever
    its name) or each sample's padded length (BSHD), and those listed in
    `owners`. It flags an owner's padding when another owner of the same
    layout rounds to a unit of another shape or rounds differently: one
    packed builder pads the stream to `lcm(16, tp_size * pad_multiplier)`
    (the fp8 rule) and another to `tp_size * pad_multiplier`, or one rounds
    `(m - n % m) % m` and another `m - n % m` (a whole extra unit when `n` is
    already a multiple). Units are compared by shape
    (`layoutcheck.model.units`): the factors are names whose values the
    callers decide, so `get_tensor_model_parallel_world_size() *
    args.data_pad_size_multiplier` and `tp_size * pad_multiplier` may be the
    same unit (`?*?`), while `lcm(16, ?*?)` is not.

    Only the pad that decides the layout is compared: the stream's tail for
    THD, each sample's round-up for BSHD; per-sample CP padding inside a
    builder is the CP rule's, and a unit that is one parameter says nothing.

    It also compares the implementations of one method in a module (each
    overriding the same base method): when they build the same record (a
    call given the same keyword arguments) and shift its fields by one
    position alike, save one field that some shift (through a shifter of
    any module, `shift(mask, left=False)`) and others pass as it is, the
    shifts of the implementations in the minority for that field (on a tie,
    those that shift it) are flagged.

    It also compares a method with the one it overrides (a base class the
    project defines, in any module): an override that rounds only to a
    literal unit (`16`), where the base method rounds to a unit that is not
    a literal (the instance's `self.unit`, a parameter; a call of the
    class's own round-up helper counts as the round-up it makes), builds
    the same batches ignoring the unit the instance was given.

    ## Why it matters
    Every tensor of one micro-batch must be laid out with the same padded
    length. Two builders of the same layout that disagree on the unit make
    batches whose shapes depend on which path built them: a model compiled
    for one unit recompiles or fails for the other, fp8 GEMMs get lengths
    that are not multiples of 16, and replay or log-prob tensors laid out by
    one builder no longer match the tokens laid out by the other. A subclass
    whose collate function rounds to a literal 16 where its base rounds to
    the configured multiple gives widths the parallel split cannot divide
    once that multiple is 32 or 48 (NVIDIA-NeMo/Megatron-Bridge 210e45bbc,
    the chat SFT dataset; docs/design.md#layout-spaces-and-bug-classes,
    class 8). A loss mask shifted with the targets by one backend of three
    that build the same training record weights each target by the next
    position's mask, only through that backend (sgl-project/SpecForge
    c62999a5; class 5).

    ## Example
    ```python
    def get_batch(...):        # actor
        pad_size = tp_size * pad_multiplier
    def get_critic_batch(...): # critic
        pad_size = math.lcm(16, tp_size * pad_multiplier)
    ```

    ## How to fix
    Decide the unit once (one helper, `layoutcheck.geometry.alignment_unit`)
    and call it from every owner; or build every batch of the layout in one
    function.

    ## Known problems
    Implementations are compared within one module. A field counts as
    shifted when the name it is passed under goes to a shifter in the
    same implementation (`x = shift(x)`); a shifted copy bound to another
    name and never passed is counted all the same.

    ## Configuration
    None needed; `owners`, `sources` and `packed-sources` (hints) add owners
    the tree does not show.

    ## Fix safety
    No autofix: which unit is right is the trainer's decision.
    """

    code = "LC107"
    message = (
        "`get_critic_batch` pads the packed layout to a multiple of `lcm(16, pad_multiplier * tp)`, but "
        "`get_batch`, another owner of it, pads to `pad_multiplier * tp`. Decide the unit once and use it in both."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # the last: two classes, where one method can override another's or two implement one base's
        return "%" in source or "//" in source or source.count("\nclass ") >= 2

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.sibling_shifts():
            shifted = "drops its first position" if found.kind == "first" else "drops its last position"
            agreed = ", ".join(f"`{f}`" for f in found.agreed)
            record = found.record.rsplit(".", 1)[-1]
            yield self.report(
                found.call.span,
                f"`{found.call.text}` shifts the `{found.field}` field of `{record}` by one position (it "
                f"{shifted}), but {file.label(found.other)}, another implementation of the same method that "
                f"builds `{record}` and shifts {agreed} the same way, leaves `{found.field}` as it is: "
                "the field's positions depend on which implementation ran. Shift it in every implementation "
                "or in none.",
            )
        for pad, base, theirs in file.overriding_literal_units():
            yield self.report(
                pad.span,
                f"`{pad.text}` rounds to the literal unit `{pad.unit}`, but {file.label(base)}, which this "
                f"method overrides, rounds to `{_unit(theirs.unit)}`, the unit the instance is given: the "
                "two build one layout to different units. Round to the given unit (at least the literal, "
                f"`max({pad.unit}, ...)`, if it is a floor).",
            )
        layouts = {"thd": "packed (THD) layout", "bshd": "rectangular (BSHD) layout"}
        for found in file.disagreeing_owners():
            mine, theirs = found.pad, found.other_pad
            if mine.unit != theirs.unit:
                how = f"to a multiple of `{_unit(mine.unit)}`"
                other = f"to `{_unit(theirs.unit)}`"
            elif mine.rounding == "next":
                how = "with `m - n % m` (a whole extra unit when the length is already a multiple)"
                other = "only up to the next multiple"
            else:
                how = "only up to the next multiple"
                other = "with `m - n % m` (a whole extra unit when the length is already a multiple)"
            yield self.report(
                mine.span,
                f"{file.label(found.owner)} pads the {layouts[found.layout]} {how}, but "
                f"{file.label(found.other)}, another owner of it, pads {other}. "
                "Decide the unit once and use it in both.",
            )

    valid = [
        Valid(
            """
import torch
from records import Sample


def nudge(x, back=True):
    z = torch.zeros_like(x[:, :1])
    if back:
        return torch.cat((z, x[:, :-1]), dim=1)
    return torch.cat((x[:, 1:], z), dim=1)


class Source:
    def record(self, ids, weights):
        raise NotImplementedError


class Offline(Source):
    def record(self, ids, weights):
        # every implementation shifts the same fields
        ids = nudge(ids, back=False)
        return Sample(ids=ids, weights=weights)


class Online(Source):
    def record(self, ids, weights):
        ids = nudge(ids, back=False)
        return Sample(ids=ids, weights=weights[..., None])
"""
        ),
        Valid(
            """
import torch


class Rows:
    def __init__(self, step: int = 8):
        self.step = step

    def _up(self, n, m):
        return (n + m - 1) // m * m

    def gather(self, seqs):
        w = self._up(max(len(s) for s in seqs), self.step)
        return torch.tensor([list(s) + [0] * (w - len(s)) for s in seqs])


class LabelledRows(Rows):
    def gather(self, seqs):
        # the given unit, with a floor
        w = self._up(max(len(s) for s in seqs), max(32, self.step))
        return torch.tensor([list(s) + [0] * (w - len(s)) for s in seqs])
"""
        ),
        Valid(
            """
import torch

def get_critic_batch(data_iterator, keys, parallel_state, args):
    batch = data_iterator.get_next(keys)
    tokens = torch.cat(batch["tokens"])
    # the same unit, spelt another way
    unit = parallel_state.tp.size * args.pad_multiplier
    pad = (unit - tokens.size(0) % unit) % unit
    batch["cu_seqlens"] = torch.tensor([0, tokens.size(0) + pad])
    return batch
""",
            files={"actor.py": _ACTOR},
        ),
        Valid(
            """
import math
import torch

def get_rollout_data(rollout_data, tp_size, pad_multiplier):
    # a BSHD owner: another layout, another decision
    unit = math.lcm(16, tp_size * pad_multiplier)
    rollout_data["max_seq_lens"] = [(t + unit - 1) // unit * unit for t in rollout_data["total_lengths"]]
    return rollout_data
""",
            files={"actor.py": _ACTOR},
        ),
        Valid(
            """
import math
import torch

def get_critic_batch(data_iterator, keys, tp_size, pad_multiplier=128):
    # the only packed builder of this project: nothing to disagree with
    batch = data_iterator.get_next(keys)
    tokens = torch.cat(batch["tokens"])
    unit = math.lcm(16, tp_size * pad_multiplier)
    pad = (unit - tokens.size(0) % unit) % unit
    batch["cu_seqlens"] = torch.tensor([0, tokens.size(0) + pad])
    return batch
"""
        ),
        Valid(
            """
import torch

def get_critic_batch(data_iterator, keys, tp_size, pad_multiplier=128):
    # no pad to the alignment unit here: the critic packs per sample with the CP helper's rule
    batch = data_iterator.get_next(keys)
    batch["cu_seqlens"] = torch.tensor([0] + [t.numel() for t in batch["tokens"]]).cumsum(0)
    return batch
""",
            files={"actor.py": _ACTOR},
        ),
        Valid(
            """
import math
import torch

def log_padding(tokens, tp_size, pad_multiplier, metrics):
    # not an owner: it only measures what another unit would cost
    unit = math.lcm(16, tp_size * pad_multiplier)
    metrics["pad/fp8_unit_waste"] = (unit - tokens.numel() % unit) % unit
""",
            files={"actor.py": _ACTOR},
        ),
    ]
    invalid = [
        Invalid(
            """
import torch
from records import Sample


def nudge(x, back=True):
    z = torch.zeros_like(x[:, :1])
    if back:
        return torch.cat((z, x[:, :-1]), dim=1)
    return torch.cat((x[:, 1:], z), dim=1)


class Source:
    def record(self, ids, weights):
        raise NotImplementedError


class Offline(Source):
    def record(self, ids, weights):
        ids = nudge(ids, back=False)
        return Sample(ids=ids, weights=weights)


class Online(Source):
    def record(self, ids, weights):
        ids = nudge(ids, back=False)
        weights = nudge(weights, back=False)
        return Sample(ids=ids, weights=weights)
""",
            line=27,
            column=19,
            message="shifts the `weights` field of `Sample` by one position",
        ),
        Invalid(
            """
import torch


class Rows:
    def __init__(self, step: int = 8):
        self.step = step

    def _up(self, n, m):
        return (n + m - 1) // m * m

    def gather(self, seqs):
        w = self._up(max(len(s) for s in seqs), self.step)
        return torch.tensor([list(s) + [0] * (w - len(s)) for s in seqs])


class LabelledRows(Rows):
    def gather(self, seqs):
        w = self._up(max(len(s) for s in seqs), 32)
        return torch.tensor([list(s) + [0] * (w - len(s)) for s in seqs])
""",
            line=19,
            column=13,
            message="rounds to the literal unit `32`, but `Rows.gather`",
        ),
        Invalid(
            """
import math
import torch

def get_critic_batch(data_iterator, keys, tp_size, pad_multiplier=128):
    batch = data_iterator.get_next(keys)
    tokens = torch.cat(batch["tokens"])
    unit = math.lcm(16, tp_size * pad_multiplier)
    pad = (unit - tokens.size(0) % unit) % unit
    batch["cu_seqlens"] = torch.tensor([0, tokens.size(0) + pad])
    return batch
""",
            line=9,
            column=11,
            message="pads the packed (THD) layout to a multiple of `lcm(16, pad_multiplier * tp_size)`, but "
                    "`get_batch` (actor.py:5), another owner of it, pads to `pad_multiplier * tp_size`",
            files={"actor.py": _ACTOR},
        ),
        Invalid(
            """
import torch

def get_critic_batch(data_iterator, keys, tp_size, pad_multiplier=128):
    batch = data_iterator.get_next(keys)
    tokens = torch.cat(batch["tokens"])
    pad_size = tp_size * pad_multiplier
    pad = pad_size - tokens.size(0) % pad_size
    batch["cu_seqlens"] = torch.tensor([0, tokens.size(0) + pad])
    return batch
""",
            line=8,
            column=11,
            message="with `m - n % m`",
            files={"actor.py": _ACTOR},
        ),
        Invalid(
            """
def get_rollout_data(args, rollout_data, tp_size):
    unit = tp_size * args.data_pad_size_multiplier
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
    return rollout_data
""",
            line=4,
            column=37,
            message="pads the rectangular (BSHD) layout to a multiple of `data_pad_size_multiplier * tp_size`, but "
                    "`recompute_max_seq_lens` (producer.py:3), another owner of it, pads to "
                    "`cp_size * pad_multiplier * tp_size`",
            files={"producer.py": """
# after multimodal expansion: the lengths changed, so the padded lengths are written again
def recompute_max_seq_lens(rollout_data, tp_size, cp_size, pad_multiplier):
    unit = cp_size * tp_size * pad_multiplier
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
"""},
        ),
        Invalid(
            """
import math
import torch

class CriticBatcher:
    def pack(self, batch, tp_size, pad_multiplier):
        tokens = torch.cat(batch["tokens"])
        unit = math.lcm(16, tp_size * pad_multiplier)
        pad = (unit - tokens.size(0) % unit) % unit
        batch["cu_seqlens"] = torch.tensor([0, tokens.size(0) + pad])
        return batch
""",
            line=9,
            column=15,
            message="`CriticBatcher.pack` (example.py:6) pads the packed (THD) layout",
            files={"actor.py": _ACTOR},
        ),
    ]
