from __future__ import annotations

import libcst as cst

from layoutcheck.lint.flow import Frame
from layoutcheck.lint.flowrule import FlowRule
from layoutcheck.lint.idioms import Idiom, match_pad_amount, match_round_up
from layoutcheck.lint.names import Tag, text_mentions, vocabulary
from layoutcheck.lint.nodes import argument, last_name, positional, snippet
from layoutcheck.lint.rule import Invalid, LintContext, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.lint.sinks import Sinks

_PAD = frozenset({"torch.nn.functional.pad", "numpy.pad"})
_FILLED = frozenset({"torch.full", "numpy.full"})
_SIZED = frozenset({"torch.zeros", "torch.ones", "torch.empty", "numpy.zeros", "numpy.ones", "numpy.empty"})
_NEW = frozenset({"new_zeros", "new_ones", "new_empty"})
_CARRIERS = ("max_", "padded", "pad_")
"""Parameters named like this carry a padded length from the caller (`max_token_len`)."""
_HINTS = ("//", "%", "ceil", "cdiv", "div_up", "round", "align", "pad", "max")


class PaddingOutsideOwner(FlowRule):
    """A padded sequence length decided outside its owner: a second owner.

    ## What it does
    Flags a padded sequence length decided outside its owner: a round-up of a
    sequence length to a multiple (`(n + m - 1) // m * m`, `-(-n // m) * m`,
    `math.ceil(n / m) * m`, `((n - 1) // m + 1) * m`, `round_up(n, m)`,
    `ceil_div(n, m) * m`, `triton.cdiv(n, m) * m`, `align(n, m)`...), a pad
    amount (`(m - n % m) % m`, `(-n) % m`, `m - n % m`), a maximum over
    sequence lengths used as a pad target (in `F.pad`, `torch.full`,
    `torch.zeros`, `x.new_full`...), `pad_sequence` over token tensors, and a
    true length passed where a CP helper takes the padded length `P`.

    It reasons about *what* is padded: a sequence length or token tensor
    (`length-names`, `token-names`), or any value rounded by a unit built from
    the pad multiplier (`pad-multiplier-names`), never kernel, quantisation,
    I/O or vision multiples (`foreign-unit-names`). And about *where*:
    nothing is reported inside an owner (listed in `owners`, or writing a
    source such as `max_seq_lens`, or building a packed batch's `cu_seqlens`),
    inside a CP helper (configured in `cp-helpers`, or
    taking a padded length such as `max_seq_len` as a parameter: its other
    branch is the packed rule it defines), inside model code (methods of
    classes deriving from `model-bases`, e.g. `nn.Module`), or for values
    read from the source (consumers deriving local geometry from `P`, such
    as the zigzag chunk size `c`, are fine).

    Nor for metrics and scratch buffers: a round-up whose value, followed
    through the function's locals, only reaches reductions (`sum`, `len`,
    `mean`: a token count, unless it sizes a tensor), logging and print
    calls, f-strings, metrics records (`metrics[...]`, a key such as
    `"perf/tokens"`) or comparisons; and a tensor sized by a maximum over
    lengths (`torch.zeros(n, max(total_lengths))`) that only ever reaches
    those, and that no token tensor is stored into. Returning such a value,
    or passing it to any other call, counts as using it for the layout.

    ## Why it matters
    `P` is layout metadata, not a memory hint: tokens, log-probs, MoE routing
    replay and response offsets of one sample must all use the same `P`,
    because CP slicing depends on it. A second place that re-derives `P`
    (from `args`, from the sample's own `T`, from the batch's longest sample)
    agrees with the owner only by luck; when the owner changes (per-sample
    padding, a new alignment unit `A`, buckets), it silently disagrees.

    ## Example
    ```python
    def fill_replay_data(*, args, data_iterator, ...):
        ...
        pad_size = parallel_state.tp.size * args.data_pad_size_multiplier
        pad = (pad_size - replay_data.size(0) % pad_size) % pad_size
    ```

    ## How to fix
    Read the owner's value: `P = batch["max_seq_lens"][i]` (BSHD), or take the
    stream padding from the batch the builder returned (`cu_seqlens`) under
    THD. If this function really decides the layout, list it in `owners`.

    ## Configuration
    `owners` (per layout), `sources`, `packed-sources`, `length-names`,
    `token-names`, `pad-multiplier-names`, `foreign-unit-names`,
    `config-roots` (attributes of `args` are configuration, not lengths) and
    `cp-helpers` (helpers taking `P`: the parameter named like a padded length).

    ## Fix safety
    No autofix: the right value lives in another function.
    """

    code = "LC102"
    message = (
        "`(n + m - 1) // m * m` decides a padded sequence length outside the owner of "
        "`max_seq_lens`. Read the sample's `max_seq_lens` entry, or list this function in `owners`."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        names = (*settings.length_names, *settings.token_names, *settings.pad_multiplier_names)
        if not text_mentions(source, names):
            return False
        return any(h in source for h in _HINTS) or any(f in source for f in vocabulary(settings).padded_params)

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self._claim: cst.CSTNode | None = None
        """The idiom being walked: its inner parts are not judged again."""
        self._seen: set[tuple[int, int]] = set()
        self._reported: set[int] = set()
        self._bodies: list[cst.CSTNode] = []
        """The functions (and the module) being walked, innermost last."""
        self._source = self.vocab.source

    # -- candidates wait for the function's end: only then is its owner status known --

    def _candidate(self, node: cst.CSTNode, message: str, carrier: cst.CSTNode | None = None) -> None:
        """Report ``node`` at the function's end unless the value of ``carrier`` (the
        round-up, or the tensor a maximum sizes) only feeds metrics (`layoutcheck.lint.sinks`)."""
        key = (id(node), id(carrier))
        if key not in self._seen:
            self._seen.add(key)
            self.flow.frame.state(self).append((node, message, carrier))

    def visit_Module(self, node: cst.Module) -> None:
        super().visit_Module(node)
        self._bodies.append(node)

    def leave_Module(self, node: cst.Module) -> None:
        super().leave_Module(node)
        self._bodies.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self._bodies.append(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().leave_FunctionDef(node)
        self._bodies.pop()

    def on_frame_exit(self, frame: Frame) -> None:
        pending = frame.data.pop(self, None)
        if not pending or frame.is_owner or frame.in_model or frame.layout_helper:
            # An owner decides; model code pads locally for its kernels; a CP helper
            # that takes `P` defines the packed rule it falls back to.
            return
        if any(carrier is not None for _, _, carrier in pending):
            # Judged in the function that holds the value; an enclosing one only
            # decides ownership (carrier None).
            sinks = Sinks(self._bodies[-1], self.flow.imports, self.flow.classify)
            pending = [(n, m, None) for n, m, c in pending if c is None or not sinks.metric_only(c)]
        if frame.parent is not None:  # an owner around a nested function owns it too
            frame.parent.state(self).extend(pending)
            return
        for node, message, _ in pending:
            if id(node) not in self._reported:
                self._reported.add(id(node))
                self.report(node, message)

    # -- round-ups and pad amounts --

    def _judge(self, idiom: Idiom, verb: str) -> None:
        flow = self.flow
        value, unit = flow.classify(idiom.values[0]), flow.classify(idiom.unit)
        for extra in idiom.values[1:]:
            value = value | flow.classify(extra)
        if value.has(Tag.SRC) or unit.has(Tag.FOREIGN) or value.has(Tag.FOREIGN):
            return  # a consumer of the owner's P, or a kernel/quantisation multiple
        if not (value.has(Tag.SEQ | Tag.TOK) or unit.has(Tag.UNIT)):
            return
        self._candidate(
            idiom.node,
            f"`{snippet(idiom.node)}` {verb} outside the owner of "
            f"`{self._source}`. Read the sample's `{self._source}` entry, or list this function in `owners`.",
            carrier=idiom.node,
        )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if self._claim is not None:
            return
        idiom = match_round_up(node, self.flow.imports)
        verb = "rounds a sequence length up to a padded length"
        if idiom is None:
            idiom, verb = match_pad_amount(node), "computes a sequence pad"
        if idiom is not None:
            self._claim = node
            self._judge(idiom, verb)

    def leave_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if node is self._claim:
            self._claim = None

    # -- pad targets --

    def _pad_target(self, expr: cst.BaseExpression, tensor: cst.Call | None = None) -> None:
        """``expr`` sizes a pad (or, ``tensor``, a new tensor whose fate decides)."""
        found = self.flow.classify(expr)
        if found.has(Tag.MAX) and not found.has(Tag.PAD | Tag.SRC | Tag.BCAST | Tag.FOREIGN):
            origin = found.origin or expr
            self._candidate(
                origin,
                f"`{snippet(origin)}`, a maximum over sequence lengths, is a pad target outside the owner "
                f"of `{self._source}`. Pad each sample to its `{self._source}` entry instead.",
                carrier=tensor,
            )

    def _padded_argument(self, call: cst.Call, helper: str, param: str, arg: cst.BaseExpression) -> None:
        found = self.flow.classify(arg)
        if found.has(Tag.SRC | Tag.PAD):
            return
        if isinstance(arg, cst.Name) and self.flow.is_parameter(arg.value) and arg.value.startswith(_CARRIERS):
            return  # forwards the caller's padded length; the caller is judged where it calls
        if found.has(Tag.MAX):
            self._pad_target(arg)
        elif found.has(Tag.SEQ):
            self._candidate(
                arg,
                f"`{helper}` gets `{snippet(arg)}`, a true length, as its padded length `{param}`. "
                f"Pass the sample's `{self._source}` entry.",
            )

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if self._claim is not None:
            return
        imports = self.flow.imports
        idiom = match_round_up(node, imports)
        if idiom is not None:
            self._claim = node
            self._judge(idiom, "rounds a sequence length up to a padded length")
            return
        name = imports.qualify(node.func) or ""
        tail = last_name(node.func) or ""
        args = positional(node)
        if name in _PAD:
            amount = argument(node, "pad", 1)
            if amount is not None:
                self._pad_target(amount)
        elif name in _FILLED or tail == "new_full":
            size = argument(node, "size", 0)
            if size is not None:
                self._pad_target(size, node)
        elif name in _SIZED or (tail in _NEW and isinstance(node.func, cst.Attribute)):
            for size in (*args, argument(node, "size", len(args))):
                if size is not None:
                    self._pad_target(size, node)
        elif tail == "pad_sequence":
            sequences = argument(node, "sequences", 0)
            if sequences is not None and self.flow.classify(sequences).has(Tag.TOK):
                self._candidate(
                    node,
                    f"`pad_sequence` pads `{snippet(sequences, 24)}` to the longest sample outside the owner "
                    f"of `{self._source}`. Pad each sample to its `{self._source}` entry instead.",
                )
        for param, index in self.vocab.padded_params.get(tail, {}).items():
            arg = argument(node, param, index)
            if arg is not None:
                self._padded_argument(node, tail, param, arg)

    def leave_Call(self, node: cst.Call) -> None:
        if node is self._claim:
            self._claim = None

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
"""
        ),
        Valid(
            """
def zigzag_chunk(max_seq_len, cp_size):
    chunk_size = (max_seq_len + 2 * cp_size - 1) // (2 * cp_size)
    return chunk_size, 2 * cp_size * chunk_size
"""
        ),
        Valid(
            """
import triton

def launch(kernel, x, num_tokens, BLOCK_M=128):
    grid = (triton.cdiv(num_tokens, BLOCK_M),)
    padded = triton.cdiv(x.size(0), BLOCK_M) * BLOCK_M
    kernel[grid](x, padded, BLOCK_M=BLOCK_M)
"""
        ),
        Valid(
            """
import math

def num_micro_batches(samples, micro_batch_size):
    return math.ceil(len(samples) / micro_batch_size)
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_weight(weight, group_size=128):
    pad = (group_size - weight.size(1) % group_size) % group_size
    return F.pad(weight, (0, pad))
"""
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
"""
        ),
        Valid(
            """
import torch
import torch.nn.functional as F

def get_batch(batch, pad_size):
    tokens = torch.cat(batch["tokens"])
    cu_seqlens = [0]
    for t in batch["tokens"]:
        cu_seqlens.append(cu_seqlens[-1] + t.size(0))
    pad = (pad_size - tokens.size(0) % pad_size) % pad_size
    batch["cu_seqlens"] = torch.tensor(cu_seqlens + [cu_seqlens[-1] + pad])
    batch["tokens"] = F.pad(tokens, (0, pad))
    return batch
"""
        ),
        Valid(
            """
def pack(tokens, unit):
    lengths = [len(t) for t in tokens]
    return [(n + unit - 1) // unit * unit for n in lengths]
""",
            settings={"owners": {"thd": ("example.py:pack",)}},
        ),
        Valid(
            """
def layout_length(total_length, cp_size, qkv_format, max_seq_len=None):
    # A CP helper: BSHD takes the owner's P, THD defines the packed rule.
    if qkv_format == "bshd":
        return max_seq_len
    return -(-total_length // (2 * cp_size)) * (2 * cp_size)
"""
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
"""
        ),
        Valid(
            """
def log_throughput(total_lengths, elapsed, log):
    padded_tokens = sum(-(-t // 128) * 128 for t in total_lengths)
    log({"perf/padded_tokens_per_s": padded_tokens / elapsed})
    print(f"{sum(-(-t // 128) * 128 for t in total_lengths)} padded tokens")
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def fill_replay_data(*, args, replay_data, parallel_state):
    pad_size = parallel_state.tp.size * args.data_pad_size_multiplier
    pad = (pad_size - replay_data.size(0) % pad_size) % pad_size
    return pad
""",
            line=4,
            column=11,
            message="outside the owner of `max_seq_lens`",
        ),
        Invalid(
            """
def debug_layout(tokens, unit=128):
    return [-(-len(t) // unit) * unit for t in tokens]
""",
            line=3,
            column=13,
        ),
        Invalid(
            """
import math

def padded_total_lengths(total_lengths, tp_size, cp_size):
    align = tp_size * cp_size * 2
    return [math.ceil(t / align) * align for t in total_lengths]
""",
            line=6,
            column=13,
        ),
        Invalid(
            """
from torch.nn import functional as Fn

def collate(tokens, pad_token_id):
    longest = max(t.size(0) for t in tokens)
    return [Fn.pad(t, (0, longest - t.size(0)), value=pad_token_id) for t in tokens]
""",
            line=5,
            column=15,
            message="a maximum over sequence lengths, is a pad target",
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
        ),
        Invalid(
            """
def dump_local_logprobs(total_length, response_length, cp_rank, cp_size, log_probs):
    _, _, logits_offset, _ = get_logits_and_tokens_offset_with_cp(
        total_length, response_length, cp_rank, cp_size, "bshd", total_length
    )
    return logits_offset
""",
            line=4,
            column=66,
            message="as its padded length `max_seq_len`",
        ),
        Invalid(
            """
def packed_lengths(batch, cp_size):
    return [((t - 1) // (2 * cp_size) + 1) * (2 * cp_size) for t in batch["total_lengths"]]
""",
            line=3,
            column=13,
        ),
        Invalid(
            """
def stream_pad(cu_seqlens, pad_multiplier):
    return (-int(cu_seqlens[-1])) % pad_multiplier
""",
            line=3,
            column=12,
        ),
    ]
