from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries
from layoutcheck.model.vocabulary import Tag

_MAX = int(Tag.MAX)
_HINTS = ("//", "%", "ceil", "cdiv", "div_up", "round", "align", "pad", "max")

_CP_UTILS = '''
import torch
import torch.nn.functional as F


def slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None, cp_size=1, cp_rank=0):
    length = tokens.numel() if qkv_format == "thd" else max_seq_len
    chunk = (length + 2 * cp_size - 1) // (2 * cp_size)
    tokens = F.pad(tokens, (0, 2 * cp_size * chunk - tokens.numel()), value=pad_value)
    return torch.cat([tokens[chunk * cp_rank : chunk * (cp_rank + 1)],
                      tokens[chunk * (2 * cp_size - cp_rank - 1) : chunk * (2 * cp_size - cp_rank)]])
'''
"""A layout helper: it takes the layout kind and, under BSHD, the padded length it cuts CP chunks from."""
_BUILDER = '''
import torch


def get_batch(data_iterator, keys, args, parallel_state):
    batch = data_iterator.get_next(keys)
    tokens = torch.cat(batch["tokens"])
    pad_size = parallel_state.tp.size * args.data_pad_size_multiplier
    pad = (pad_size - tokens.size(0) % pad_size) % pad_size
    batch["cu_seqlens"] = torch.tensor([0, tokens.size(0) + pad])
    return batch
'''
"""A packed batch builder: it stores the batch's cumulative lengths (`[0, n + pad]`), so it owns THD padding."""
_PRODUCER = '''
def get_rollout_data(args, rollout_data):
    rollout_data["total_lengths"] = [len(t) for t in rollout_data["tokens"]]
    unit = args.data_pad_size_multiplier
    rollout_data["max_seq_lens"] = [-(-t // unit) * unit for t in rollout_data["total_lengths"]]
    return rollout_data
'''
"""A producer: it stores each sample's rounded-up length, so it owns the per-sample padded lengths."""
_CONVERTED = '''
import torch
import torch.nn.functional as F


def pack(tokens, args):
    unit = args.tp_size * args.data_pad_size_multiplier
    stream = torch.cat(tokens)
    pad = (unit - stream.size(0) % unit) % unit
    bounds = [0]
    for t in tokens:
        bounds.append(bounds[-1] + t.size(0))
    bounds.append(bounds[-1] + pad)
    return F.pad(stream, (0, pad)), bounds


def to_batch(batch, args):
    stream, bounds = pack(batch["tokens"], args)
    return {"tokens": stream, "cu_seqlens": torch.tensor(bounds, dtype=torch.int32)}
'''
"""A packer whose cumulative lengths another function converts and stores: the packer owns them."""


class PaddingOutsideOwner(ModelRule):
    """A padded sequence length decided outside its owner: a second owner.

    ## What it does
    Flags padding that re-derives what an owner elsewhere in the project
    decides: a round-up of a sequence length to a multiple
    (`(n + m - 1) // m * m`, `-(-n // m) * m`, `math.ceil(n / m) * m`,
    `round_up(n, m)`, `triton.cdiv(n, m) * m`...), a pad amount
    (`(m - n % m) % m`, `(-n) % m`, `m - n % m`, the zigzag
    `c = ceil(T / 2cp); pad = 2 * cp * c - T`), a maximum over sequence
    lengths used as a pad target (in `F.pad`, `torch.full`, `torch.zeros`),
    `pad_sequence` over token tensors; and a true length passed where a
    function takes one sample's padded length `P` (a CP helper's
    `max_seq_len`, any `def` of the tree with such a parameter).

    *Who owns what* is read from the project, not from one file:
    * the alignment unit `A` (a unit built from a pad multiplier,
      `tp_size * data_pad_size_multiplier`) belongs to the owners of the
      layout: the function that writes a source (`max_seq_lens`) and the
      batch builder that builds a packed batch's `cu_seqlens`, wherever they
      are, plus the functions `owners` lists. The owner is the function
      that first computes the layout from data: one that only converts and
      stores another's result (`torch.tensor(bounds)` of what `pack`
      returned) is not, the function that computed it is; cumulative sums
      of lengths measured from data (tensor sizes, a mask's row sums) build
      a packed batch, a running sum of other counts (environments, memory
      blocks, made-up lengths) does not, and an optimizer's element count
      rounded up (`state["size"] += pad`) is no sample's padded length;
    * padding to the longest sample belongs to the owner of `max_seq_lens`;
    * CP padding (`2 * cp`) belongs to the CP helpers (`slice_with_cp`).
    A pad is reported when the project has an owner for what it pads and
    the pad is not in it. Where the project has none, the padding function
    *is* the owner (the only padding decision on its path, such as a
    sequence-parallel pad helper whose result its callers read, or a BSHD
    batch builder in a trainer without `max_seq_lens`) and nothing is
    reported; `layoutcheck model` lists such inferred owners. Pads by other
    units (the sequence-parallel size, a kernel's block) are not the token
    layout's.

    Never reported: pads inside an owner, inside a CP helper (a function
    taking `P`: its other branch is the packed rule it defines), inside model
    code (`model-bases`), in the free functions of kernel modules
    (`kernel-modules`), values read from the source (consumers deriving
    local geometry from `P`), and values that only reach metrics, logs or
    comparisons. A parameter fed from the source at every call site (a
    `max_seq_len` taken from `rollout_data["max_seq_lens"]`) is the owner's
    value, whatever the callee names it. A value passed as a padded length
    is a true length only when it is measured from a sample: a batch's width
    (`x.shape[1]`, `x.size(1)`: every row shares it, as in
    `max(chosen.shape[1], rejected.shape[1])`) is not, and neither is a
    configured length (`cfg.model.seq_length`, an attribute of an object that
    holds none of the batch's data: the fixed width pipeline parallelism
    pads every micro-batch to, or a field the project stores a setting into,
    `meta_info["prompt_length"] = config.prompt_length`). A maximum passed
    as a padded length is judged like a pad to the longest written inline:
    only when its lengths are those an owner pads (buffers evened out for a
    collective, `max(x.shape[0] for x in shares)`, are not).

    ## Why it matters
    `P` is layout metadata, not a memory hint: tokens, log-probs, MoE routing
    replay and response offsets of one sample must all use the same `P`,
    because CP slicing depends on it. A second place that re-derives `P`
    (from `args`, from the sample's own `T`, from the batch's longest sample)
    agrees with the owner only by luck; when the owner changes (per-sample
    padding, a new alignment unit `A`, buckets), it silently disagrees.

    ## Example
    ```python
    def prepare_routed_experts(rollout_routed_experts, *, data_pad_size_multiplier):
        pad_size = tp_size * data_pad_size_multiplier
        pad = (pad_size - routed_experts.size(0) % pad_size) % pad_size  # get_batch decides this
    ```

    ## How to fix
    Read the owner's value: `P = batch["max_seq_lens"][i]` (BSHD), or take the
    stream padding from the batch the builder returned (`cu_seqlens`) under
    THD. The message names the owner this project has. If this function
    really decides the layout, list it in `owners`.

    ## Configuration
    `owners` (per layout), `sources`, `packed-sources`, `length-names`,
    `token-names`, `pad-multiplier-names`, `foreign-unit-names`,
    `config-roots`, `kernel-modules` and `cp-helpers`.

    ## Fix safety
    No autofix: the right value lives in another function.
    """

    code = "LC102"
    message = (
        "`(n + m - 1) // m * m` re-derives the padding that `get_batch` owns: it builds `cu_seqlens`. Read the "
        "padding from the batch it builds (its `cu_seqlens`) instead, or list this function in `owners`."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # A round-up or a pad (`//`, `%`, `ceil`, `max`, `pad`), or a call that may pass a padded length.
        return any(h in source for h in _HINTS) or "(" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        project = file.project
        for pad, owners in file.second_owner_pads():
            owner = owners[0]
            what = project.owner_of(owner)
            why = f": it {what.why}" if what is not None else ""
            if pad.kind in ("pad_target", "pad_sequence"):
                verb = (f"`pad_sequence` pads `{pad.text}` to the longest sample" if pad.kind == "pad_sequence"
                        else f"`{pad.text}`, a maximum over sequence lengths, is a pad target")
                yield self.report(
                    pad.span,
                    f"{verb} outside {file.label(owner)}, the owner of the padded layout{why}. "
                    f"{file.source_hint('bshd')}, and pad each sample to it.",
                )
                continue
            if what is None and owner in project.layout_helpers:
                yield self.report(
                    pad.span,
                    f"`{pad.text}` re-derives the CP padding that {file.label(owner)} defines. "
                    "Call the helper, or read the padded length it works from.",
                )
                continue
            yield self.report(
                pad.span,
                f"`{pad.text}` re-derives the padding that {file.label(owner)} owns{why}. "
                f"{file.owner_hint(owner)}, or list this function in `owners`.",
            )
        for found in file.padded_arguments():
            if not file.true_length_as_padded(found):
                continue
            arg = found.arg
            kind = "a maximum over sequence lengths" if arg.tags & _MAX else "a true length"
            span = arg.span or found.call.span
            yield self.report(
                span,
                f"`{found.callee}` gets `{arg.text}`, {kind}, as its padded length `{found.param}`. "
                f"{file.source_hint('bshd')}.",
            )

    valid = [
        Valid(
            """
def get_rollout_data(args, rollout_data, tp_size):
    pad_size = tp_size * args.data_pad_size_multiplier
    rollout_data["max_seq_lens"] = [
        (t + pad_size - 1) // pad_size * pad_size for t in rollout_data["total_lengths"]
    ]
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_sample(tokens, batch, i, pad_token_id):
    max_seq_len = batch["max_seq_lens"][i]
    return F.pad(tokens, (0, max_seq_len - tokens.size(0)), value=pad_token_id)
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def zigzag_chunk(max_seq_len, cp_size):
    chunk_size = (max_seq_len + 2 * cp_size - 1) // (2 * cp_size)
    return chunk_size, 2 * cp_size * chunk_size
""",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
import triton

def launch(kernel, x, num_tokens, BLOCK_M=128):
    grid = (triton.cdiv(num_tokens, BLOCK_M),)
    padded = triton.cdiv(x.size(0), BLOCK_M) * BLOCK_M
    kernel[grid](x, padded, BLOCK_M=BLOCK_M)
""",
            files={"data.py": _BUILDER},
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_weight(weight, group_size=128):
    pad = (group_size - weight.size(1) % group_size) % group_size
    return F.pad(weight, (0, pad))
""",
            files={"data.py": _BUILDER},
        ),
        Valid(
            """
import torch

def scratch(log_probs, response_lengths):
    longest = max(response_lengths)
    out = torch.zeros(len(log_probs), longest)
    for i, lp in enumerate(log_probs):
        out[i, : lp.numel()] = lp
    return out
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def ulysses_pad(input_ids, sp_size):
    # the sequence-parallel pad: its callers read the pad it returns, and no owner decides it
    total = input_ids.size(-1)
    pad_size = (sp_size - total % sp_size) % sp_size
    return input_ids, pad_size
""",
            files={"data.py": _BUILDER},
        ),
        Valid(
            """
import torch
from torch.nn.utils.rnn import pad_sequence

def collate(batch, pad_token_id):
    # a trainer with no `max_seq_lens`: this builder is the only padding decision on its path
    return pad_sequence(batch["tokens"], batch_first=True, padding_value=pad_token_id)
"""
        ),
        Valid(
            """
def pack(tokens, tp_size, pad_multiplier):
    unit = tp_size * pad_multiplier
    lengths = [len(t) for t in tokens]
    return [(n + unit - 1) // unit * unit for n in lengths]
""",
            settings={"owners": {"thd": ("example.py:pack",)}},
            files={"data.py": _BUILDER},
        ),
        Valid(
            """
def layout_length(total_length, cp_size, qkv_format, max_seq_len=None):
    # A CP helper: BSHD takes the owner's P, THD defines the packed rule.
    if qkv_format == "bshd":
        return max_seq_len
    return -(-total_length // (2 * cp_size)) * (2 * cp_size)
""",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
import torch

def log_length_grid(rollout_data, writer, step):
    # a dashboard image: it never holds a token
    total_lengths = rollout_data["total_lengths"]
    grid = torch.zeros(len(total_lengths), max(total_lengths))
    for i, t in enumerate(total_lengths):
        grid[i, :t] = 1
    writer.add_image("rollout/lengths", grid.unsqueeze(0), step)
""",
            files={"data.py": _PRODUCER},
        ),
        Valid(
            """
def log_throughput(total_lengths, elapsed, log, pad_multiplier):
    padded_tokens = sum(-(-t // pad_multiplier) * pad_multiplier for t in total_lengths)
    log({"perf/padded_tokens_per_s": padded_tokens / elapsed})
""",
            files={"data.py": _BUILDER},
        ),
        Valid(
            """
from cp_utils import slice_log_prob_with_cp

def advantages(values, total_lengths, response_lengths, max_seq_lens, cp_size, qkv_format):
    if cp_size > 1 and qkv_format == "bshd":
        per_sample = max_seq_lens
    else:
        per_sample = [None] * len(values)
    out = []
    for i, value in enumerate(values):
        max_seq_len = per_sample[i]
        out.append(slice_log_prob_with_cp(value, total_lengths[i], response_lengths[i], qkv_format, max_seq_len))
    return out
""",
            files={"cp_utils.py": '''
def slice_log_prob_with_cp(log_prob, total_length, response_length, qkv_format="thd", max_token_len=None):
    length = total_length if qkv_format == "thd" else max_token_len
    return log_prob[: length - (total_length - response_length)]
'''},
        ),
        Valid(
            """
from padding_utils import pad_or_truncate_to_len

def get_batch(batch, cfg):
    # pipeline parallelism needs every micro-batch `cfg.model.seq_length` wide: a configured width
    seq_len = cfg.model.seq_length
    batch["tokens"] = pad_or_truncate_to_len(batch["tokens"], seq_len, seq_len, pad_value=0)
    return batch
""",
            files={
                "padding_utils.py": '''
import torch.nn.functional as F

def pad_or_truncate_to_len(x, target_len, max_cap, pad_value):
    if x.size(1) < target_len:
        return F.pad(x, (0, target_len - x.size(1)), value=pad_value)
    return x[:, :max_cap]
''',
                "record.py": '''
class Batch:
    def __init__(self, input_ids):
        self.seq_length = input_ids.size(1)
''',
            },
        ),
    ]
    invalid = [
        Invalid(
            """
def replay_pad(replay, args):
    # the stream pad `pack` computes (and `to_batch` only converts and stores): decided twice
    unit = args.tp_size * args.data_pad_size_multiplier
    return (unit - replay.size(0) % unit) % unit
""",
            line=5,
            column=12,
            message="re-derives the padding that `pack` (data.py:6) owns: it computes the cumulative lengths "
                    "that `to_batch` stores in `cu_seqlens`. Read the padding from the batch it builds (its "
                    "`cu_seqlens`)",
            files={"data.py": _CONVERTED},
        ),
        Invalid(
            """
def fill_replay_data(*, args, replay_data, parallel_state):
    pad_size = parallel_state.tp.size * args.data_pad_size_multiplier
    pad = (pad_size - replay_data.size(0) % pad_size) % pad_size
    return pad
""",
            line=4,
            column=11,
            message="re-derives the padding that `get_batch` (data.py:5) owns: it builds `cu_seqlens`",
            files={"data.py": _BUILDER},
        ),
        Invalid(
            """
import math

def padded_total_lengths(rollout_data, tp_size, pad_multiplier):
    align = tp_size * pad_multiplier
    return [math.ceil(t / align) * align for t in rollout_data["total_lengths"]]
""",
            line=6,
            column=13,
            message="owns: it writes each sample's padded length to `max_seq_lens`. Read the sample's `max_seq_lens` entry",
            files={"data.py": _PRODUCER},
        ),
        Invalid(
            """
from torch.nn import functional as Fn

def collate(batch, pad_token_id):
    tokens = batch["tokens"]
    longest = max(t.size(0) for t in tokens)
    return [Fn.pad(t, (0, longest - t.size(0)), value=pad_token_id) for t in tokens]
""",
            line=6,
            column=15,
            message="a maximum over sequence lengths, is a pad target outside `get_rollout_data`",
            files={"data.py": _PRODUCER},
        ),
        Invalid(
            """
from torch.nn.utils.rnn import pad_sequence

def collate(batch, pad_token_id):
    return pad_sequence(batch["tokens"], batch_first=True, padding_value=pad_token_id)
""",
            line=5,
            column=12,
            message="`pad_sequence` pads",
            files={"data.py": _PRODUCER},
        ),
        Invalid(
            """
from cp_utils import slice_with_cp

def dump_local_tokens(tokens):
    return slice_with_cp(tokens, 0, "bshd", tokens.numel())
""",
            line=5,
            column=45,
            message="`slice_with_cp` gets `tokens.numel()`, a true length, as its padded length `max_seq_len`",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
from cp_utils import slice_with_cp

def replay_layout(rows):
    seq_length = len(rows)
    layout = dict(qkv_format="bshd", max_seq_len=seq_length)
    return slice_with_cp(rows, 0, **layout)
""",
            line=6,
            column=50,
            message="gets `seq_length`, a true length",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
def packed_lengths(batch, cp_size):
    return [((t - 1) // (2 * cp_size) + 1) * (2 * cp_size) for t in batch["total_lengths"]]
""",
            line=3,
            column=13,
            message="re-derives the CP padding that `slice_with_cp` (cp_utils.py:6) defines",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
import torch

def stream_pad(batch, args, parallel_state):
    cu_seqlens = torch.tensor([0] + [len(t) for t in batch["tokens"]]).cumsum(0)
    return (-int(cu_seqlens[-1])) % (parallel_state.tp.size * args.data_pad_size_multiplier)
""",
            line=6,
            column=12,
            files={"data.py": _BUILDER},
        ),
        Invalid(
            """
def cp_pad(tokens, cp_size):
    token_len = tokens.numel()
    chunk = (token_len + 2 * cp_size - 1) // (2 * cp_size)
    return 2 * cp_size * chunk - token_len
""",
            line=5,
            column=12,
            message="re-derives the CP padding",
            files={"cp_utils.py": _CP_UTILS},
        ),
    ]
