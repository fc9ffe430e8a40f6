from __future__ import annotations

import libcst as cst

from layoutcheck.lint.flowrule import FlowRule
from layoutcheck.lint.idioms import is_init_value, match_broadcast
from layoutcheck.lint.names import Tag, text_mentions
from layoutcheck.lint.nodes import snippet, string_value, target_name
from layoutcheck.lint.rule import Invalid, LintContext, Valid
from layoutcheck.lint.settings import LintSettings


class GlobalMaxPadding(FlowRule):
    """One padded length given to every sample: the rollout-global padding bug.

    ## What it does
    Flags one padded length given to every sample: a list (or tensor) that
    repeats one value, stored as the per-sample padded lengths (a source
    such as `max_seq_lens`), or repeating a maximum over sequence lengths as
    per-sample lengths. Spellings: `[m] * n`, `[m for _ in xs]`,
    `torch.full((n,), m)`, `x.new_full(...)`, `dict.fromkeys(ks, m)`,
    `itertools.repeat(m, n)`, `torch.ones(n) * m`, directly or through a local.

    ## Why it matters
    Each sample's padded length `P` must be its own total length `T` rounded
    up to the alignment unit `A` (invariant O3: `T <= P < T + A`). A
    rollout-wide maximum copied to every entry makes one long outlier pad
    every short sample: on a 128-GPU run a 14,010-token sample was padded to
    132,096 tokens and ran out of memory at 79 GB; per-sample padding needed
    38.5 GB. Pad tokens still go through attention and the MoE experts.

    ## Example
    ```python
    max_seq_len = max(rollout_data["total_lengths"])
    max_seq_len = (max_seq_len + pad_size - 1) // pad_size * pad_size
    rollout_data["max_seq_lens"] = [max_seq_len] * len(rollout_data["tokens"])
    ```

    ## How to fix
    Round each sample's own length up (`layoutcheck.geometry.padded_length`
    is the reference):
    ```python
    rollout_data["max_seq_lens"] = [
        (t + pad_size - 1) // pad_size * pad_size for t in rollout_data["total_lengths"]
    ]
    ```
    A rectangular (BSHD) micro-batch then needs samples of one padded length:
    see `unguarded-rectangular-batch`.

    ## Configuration
    `sources` names the per-sample padded lengths; `length-names` the other
    per-sample length lists that must not repeat a maximum.

    ## Fix safety
    No autofix: the per-sample rewrite needs the lengths and the unit, which
    the broadcast does not name.
    """

    code = "LC101"
    message = (
        "One padded length (`max(total_lengths)` rounded up) is copied to every sample's "
        "`max_seq_lens` entry. Round each sample's own total length up to the alignment unit instead."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # A broadcast into a source names it; a repeated maximum needs `max` and a length name.
        if any(s in source for s in settings.sources):
            return True
        return "max" in source and text_mentions(source, settings.length_names)

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self._seen: set[int] = set()

    def _check(self, value: cst.BaseExpression, target: str | None) -> None:
        if target is None:
            return
        is_source = target in self.vocab.sources
        if not is_source and not self.vocab.tags(target) & Tag.SEQ:
            return
        found = self.flow.classify(value)
        origin = found.origin
        if not found.has(Tag.BCAST) or origin is None or id(origin) in self._seen:
            return
        if is_source:
            if is_init_value(match_broadcast(origin, self.flow.imports)):
                return  # `[0] * n`, filled per sample later
        elif not found.has(Tag.MAX):
            return  # other length lists may legitimately repeat a configured length
        self._seen.add(id(origin))
        self.report(
            origin,
            f"`{snippet(origin)}` gives every sample the same length in `{target}`, so one long "
            "sample pads them all. Round each sample's own total length up to the alignment unit instead.",
        )

    def leave_Assign(self, node: cst.Assign) -> None:
        super().leave_Assign(node)
        for target in node.targets:
            name, entry = target_name(target.target)
            if not entry:
                self._check(node.value, name)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        super().leave_AnnAssign(node)
        name, entry = target_name(node.target)
        if node.value is not None and not entry:
            self._check(node.value, name)

    def visit_Dict(self, node: cst.Dict) -> None:
        super().visit_Dict(node)
        for element in node.elements:
            if isinstance(element, cst.DictElement):
                self._check(element.value, string_value(element.key))

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        for arg in node.args:  # `.update(max_seq_lens=...)`, `Batch(max_seq_lens=...)`
            if arg.keyword is not None:
                self._check(arg.value, arg.keyword.value)

    def visit_Return(self, node: cst.Return) -> None:
        frame = self.flow.frame
        if node.value is not None and frame.parent is not None and self.vocab.mentions_source(frame.name):
            # `def uniform_max_seq_lens(...): return [P] * n` produces the source.
            self._check(node.value, self.vocab.source_in(frame.name))

    valid = [
        Valid(
            """
def get_rollout_data(args, rollout_data, pad_size):
    rollout_data["max_seq_lens"] = [
        (t + pad_size - 1) // pad_size * pad_size for t in rollout_data["total_lengths"]
    ]
"""
        ),
        Valid(
            """
from layoutcheck.geometry import padded_length

def build(total_lengths, unit):
    return {"max_seq_lens": [padded_length(t, unit) for t in total_lengths]}
"""
        ),
        Valid(
            """
def build(tokens, unit):
    max_seq_lens = [0] * len(tokens)
    for i, t in enumerate(tokens):
        max_seq_lens[i] = -(-t.numel() // unit) * unit
    return max_seq_lens
"""
        ),
        Valid(
            """
def log_lengths(rollout_data, log):
    log["rollout/max_total_length"] = max(rollout_data["total_lengths"])
    log["rollout/mean_total_length"] = sum(rollout_data["total_lengths"]) / len(rollout_data["total_lengths"])
"""
        ),
        Valid(
            """
def capture_graph(runner, batch_size, max_seq_len):
    # CUDA-graph capture feeds dummy lengths: a configured length, not a maximum.
    seq_lens = [max_seq_len] * batch_size
    runner.capture(seq_lens=seq_lens)
"""
        ),
        Valid(
            """
def normalise(rewards):
    best = max(rewards)
    baselines = [best] * len(rewards)
    return [r - b for r, b in zip(rewards, baselines)]
"""
        ),
        Valid(
            """
import torch

def pad_tokens(tokens, pad_token_id, length):
    return torch.full((len(tokens), length), pad_token_id)
"""
        ),
        Valid(
            """
def micro_batch(batch):
    max_seq_lens = list(batch["max_seq_lens"])
    return {"max_seq_lens": max_seq_lens}
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def get_rollout_data(args, rollout_data, pad_size):
    max_seq_len = max(rollout_data["total_lengths"])
    max_seq_len = (max_seq_len + pad_size - 1) // pad_size * pad_size
    rollout_data["max_seq_lens"] = [max_seq_len] * len(rollout_data["tokens"])
""",
            line=5,
            column=36,
            message="`[max_seq_len] * len(rollout_data[\"tokens\"])` gives every sample",
        ),
        Invalid(
            """
def get_rollout_data(rollout_data, unit):
    longest = max(len(t) for t in rollout_data["tokens"])
    padded = -(-longest // unit) * unit
    rollout_data["max_seq_lens"] = [padded for _ in rollout_data["tokens"]]
""",
            line=5,
            column=36,
        ),
        Invalid(
            """
import torch

def make_batch(tokens):
    max_seq_lens = torch.full((len(tokens),), max(t.numel() for t in tokens))
    return tokens, max_seq_lens
""",
            line=5,
            column=20,
            message="in `max_seq_lens`",
        ),
        Invalid(
            """
from layoutcheck.geometry import round_up

def make_rollout(tokens, lengths):
    return {"tokens": tokens, "max_seq_lens": [round_up(max(lengths), 128)] * len(lengths)}
""",
            line=5,
            column=47,
        ),
        Invalid(
            """
def fill(batch, total_lengths):
    padded = [max(total_lengths)] * len(total_lengths)
    batch["max_seq_lens"] = padded
""",
            line=3,
            column=14,
        ),
        Invalid(
            """
def fill(rollout_data, args):
    rollout_data.update(max_seq_lens=[args.seq_length] * len(rollout_data["tokens"]))
""",
            line=3,
            column=38,
        ),
        Invalid(
            """
def lengths_for_attention(total_lengths):
    seq_lens = [max(total_lengths)] * len(total_lengths)
    return seq_lens
""",
            line=3,
            column=16,
            message="same length in `seq_lens`",
        ),
        Invalid(
            """
import itertools

def uniform_max_seq_lens(tokens, unit):
    longest = max(len(t) for t in tokens)
    return list(itertools.repeat((longest + unit - 1) // unit * unit, len(tokens)))
""",
            line=6,
            column=12,
        ),
    ]
