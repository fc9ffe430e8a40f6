from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.facts import Pad
from layoutcheck.model.queries import FileQueries


class StreamUnitsDisagree(ModelRule):
    """Two builds of one packed layout aligned to different units.

    ## What it does
    Flags two ways a packed stream gets another alignment unit than its
    partners, read from what the code does:

    * a call that leaves a builder's unit switch at its default while
      another call of the same builder, in the same module, sets it: the
      builder tests the parameter to change the unit its stream is padded
      to (`if fp8: unit = math.lcm(16, unit)`), so the two calls lay out
      their streams with different units. In another module, the two
      calls are compared where they meet: one function hands the same
      value it computed (the step's `attention_mask`) to a function that
      passes it to the builder without the switch and to one that passes
      it, in the same place, with the switch (also through a local that
      holds a function a getter or factory returned: `forward_fn =
      get_forward(cfg)`);
    * a stream padded to a unit with a literal factor (`tp * 128`) where a
      sibling stream pad of the project, sharing its other factors, uses a
      parameter of its function in that place (`tp * pad_factor`): the
      function that hard-codes the factor takes, and never reads, that
      factor; or the two functions read a field of one record (the stream
      of a routing replay that mirrors the tokens, in any module), so the
      hard-coded factor stands where the sibling's callers configure it.

    ## Why it matters
    Partner streams (tokens and the routing replay that mirrors them, inputs
    and their log-probs) must have the same padded length `P`: every factor
    of the unit `A` must divide it. A replay stream padded to another unit
    than the tokens has more or fewer rows than the token positions, and
    the model path that needs fp8's multiple of 16 fails or silently reads
    padding (docs/design.md#layout-spaces-and-bug-classes, class 8; THUDM/slime a93386e51 padded the
    replay stream to `tp * 128` while the tokens used the configured
    multiplier; volcengine/verl 9bda8b9ac packed the replay without the fp8
    unit the model inputs used).

    ## Example
    ```python
    def model_inputs(ids, keep, cfg, tp, cp):
        return pack_rows(ids, keep, tp, cp, fp8_units=fp8_enabled(cfg))

    def replay_inputs(choices, keep, cfg, tp, cp):
        return pack_rows(choices, keep, tp, cp)  # the default unit
    ```

    ## How to fix
    Build every partner with the same unit: pass the same switch
    (`fp8_units=fp8_enabled(cfg)`), use the factor you were given
    (`tp * pad_factor`), or decide the unit once (one helper,
    `layoutcheck.geometry.alignment_unit`).

    ## Known problems
    Calls of the builder in other modules are compared only where one
    caller hands both the same value: another module is often another path
    (a backend, a fused kernel) that never takes the switch. Builds that
    meet only deeper (a caller's caller), or through a value rebuilt on the
    way, are not compared; a caller that refuses the switch set under some
    condition (`if fp8 is not None and replay: raise`) decides the
    combination itself and is left alone.

    ## Fix safety
    No autofix: which unit is right is the trainer's decision.
    """

    code = "LC122"
    message = (
        "`pack_rows(choices, keep, tp, cp)` leaves `fp8_units`, which changes the unit `pack_rows` pads to, at its "
        "default, while `model_inputs` sets it. Build partner streams with the same unit."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "(" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        project = file.project
        for found in file.unit_disagreements():
            if isinstance(found.node, Pad):
                pad = found.node
                if found.hard_coded:
                    yield self.report(
                        pad.unit_span or pad.span,
                        f"`{pad.text}` pads a stream to a unit with a literal factor (`{pad.unit}`), while "
                        f"{file.label(found.other)} pads its stream with `{found.detail}` in that place, a "
                        "factor its callers give it: the two streams are padded to different units when the "
                        f"configured `{found.detail}` is not the literal. Use the configured factor here too.",
                    )
                    continue
                yield self.report(
                    pad.unit_span or pad.span,
                    f"`{pad.text}` pads a stream to a unit with a literal factor (`{pad.unit}`), while "
                    f"{file.label(found.other)} pads its stream with `{found.detail}` in that place, which "
                    f"{file.label(found.builder)} takes and never reads. Use the factor you were given.",
                )
            else:
                call = found.node
                name = project.function(found.builder).qualname.rsplit(".", 1)[-1]
                met = "" if found.via is None else (
                    f" (both are handed the same value by {file.label(found.via)}, so the two streams are "
                    "built from one batch)")
                yield self.report(
                    call.span,
                    f"`{call.text or name}` leaves `{found.detail}`, which changes the unit `{name}` pads to, at "
                    f"its default, while {file.label(found.other)} sets it{met}: the two streams are laid out "
                    f"with different units. Pass `{found.detail}` here too.",
                )

    valid = [
        Valid(
            """
import math

def pack_rows(rows, keep, tp, fp8_units=False):
    unit = tp
    if fp8_units:
        unit = math.lcm(16, unit)
    sizes = keep.sum(-1)
    return sizes + (unit - sizes % unit) % unit


def model_inputs(ids, keep, cfg, tp):
    return pack_rows(ids, keep, tp, fp8_units=cfg.fp8)


def replay_inputs(choices, keep, cfg, tp):
    return pack_rows(choices, keep, tp, fp8_units=cfg.fp8)
"""
        ),
        Valid(
            """
import torch
import torch.nn.functional as F

def stream_tokens(rows, tp, pad_factor, pad_id):
    stream = torch.cat(rows)
    unit = tp * pad_factor
    return F.pad(stream, (0, (unit - stream.size(0) % unit) % unit), value=pad_id)


def stream_replay(routes, tp, pad_factor):
    stream = torch.cat(routes)
    unit = tp * pad_factor
    return F.pad(stream, (0, 0, 0, (unit - stream.size(0) % unit) % unit))
"""
        ),
        Valid(
            """
import math

def pack_rows(rows, keep, tp, fp8_units=False):
    unit = tp
    if fp8_units:
        unit = math.lcm(16, unit)
    sizes = keep.sum(-1)
    return sizes + (unit - sizes % unit) % unit


def model_inputs(ids, keep, tp):
    return pack_rows(ids, keep, tp)


def replay_inputs(choices, keep, tp):
    # neither sets the switch: both streams use the default unit
    return pack_rows(choices, keep, tp)
"""
        ),
        Valid(
            """
def pack_rows(rows, keep, tp, verbose=False):
    # the switch only logs: the unit is the same either way
    if verbose:
        print(len(rows))
    sizes = keep.sum(-1)
    return sizes + (tp - sizes % tp) % tp


def model_inputs(ids, keep, tp):
    return pack_rows(ids, keep, tp, verbose=True)


def replay_inputs(choices, keep, tp):
    return pack_rows(choices, keep, tp)
"""
        ),
        Valid(
            """
import torch
import torch.nn.functional as F

def stream_tokens(rows, tp, pad_factor, pad_id):
    stream = torch.cat(rows)
    unit = tp * pad_factor
    return F.pad(stream, (0, (unit - stream.size(0) % unit) % unit), value=pad_id)


def stream_scores(scores, tp):
    # takes no factor to ignore: a layout of its own
    stream = torch.cat(scores)
    unit = tp * 128
    return F.pad(stream, (0, (unit - stream.size(0) % unit) % unit))
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import math

def pack_rows(rows, keep, tp, fp8_units=False):
    unit = tp
    if fp8_units:
        unit = math.lcm(16, unit)
    sizes = keep.sum(-1)
    return sizes + (unit - sizes % unit) % unit


def model_inputs(ids, keep, cfg, tp):
    return pack_rows(ids, keep, tp, fp8_units=cfg.fp8)


def replay_inputs(choices, keep, cfg, tp):
    return pack_rows(choices, keep, tp)
""",
            line=17,
            column=12,
            message="leaves `fp8_units`, which changes the unit `pack_rows` pads to, at its default",
        ),
        Invalid(
            """
import torch
import torch.nn.functional as F

def stream_tokens(rows, tp, pad_factor, pad_id):
    stream = torch.cat(rows)
    unit = tp * pad_factor
    return F.pad(stream, (0, (unit - stream.size(0) % unit) % unit), value=pad_id)


def stream_replay(routes, tp, pad_factor):
    stream = torch.cat(routes)
    unit = tp * 128
    return F.pad(stream, (0, 0, 0, (unit - stream.size(0) % unit) % unit))
""",
            line=13,
            column=12,
            message="pads its stream with `pad_factor` in that place",
        ),
        Invalid(
            """
import torch
import torch.nn.functional as F

def stream_tokens(batch, tp, pad_factor, pad_id):
    stream = torch.cat(batch["tokens"])
    unit = tp * pad_factor
    return F.pad(stream, (0, (unit - stream.size(0) % unit) % unit), value=pad_id)


def stream_replay(batch, tp):
    routes = batch["routes"]
    assert len(routes) == len(batch["tokens"])
    stream = torch.cat(routes)
    unit = tp * 128
    return F.pad(stream, (0, 0, 0, (unit - stream.size(0) % unit) % unit))
""",
            line=15,
            column=12,
            message="a factor its callers give it",
        ),
        Invalid(
            """
import math

def pack_rows(rows, keep, tp, fp8_units=False):
    unit = tp
    if fp8_units:
        unit = math.lcm(16, unit)
    sizes = keep.sum(-1)
    return sizes + (unit - sizes % unit) % unit


def model_inputs(ids, keep, tp):
    return pack_rows(ids, keep, tp, True)


def replay_inputs(choices, keep, tp):
    return pack_rows(choices, keep, tp)
""",
            line=17,
            column=12,
            message="leaves `fp8_units`",
        ),
        Invalid(
            """
import torch
import torch.nn.functional as F

def stream_tokens(rows, tp, align, pad_id):
    stream = torch.cat(rows)
    unit = tp * align
    return F.pad(stream, (0, (unit - stream.size(0) % unit) % unit), value=pad_id)


def stream_replay(routes, tp, align, experts):
    stream = torch.cat(routes)
    unit = 64 * tp
    return F.pad(stream, (0, 0, 0, (unit - stream.size(0) % unit) % unit))
""",
            line=13,
            column=12,
            message="pads its stream with `align` in that place",
        ),
        Invalid(
            """
import math

class Packer:
    def pack_rows(self, rows, keep, tp, fp8_units=False):
        unit = tp
        if fp8_units:
            unit = math.lcm(16, unit)
        sizes = keep.sum(-1)
        return sizes + (unit - sizes % unit) % unit

    def model_inputs(self, ids, keep, tp):
        return self.pack_rows(ids, keep, tp, fp8_units=True)

    def replay_inputs(self, choices, keep, tp):
        return self.pack_rows(choices, keep, tp)
""",
            line=16,
            column=16,
        ),
    ]
