from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries
from layoutcheck.model.vocabulary import Tag, text_mentions

_MAX = int(Tag.MAX)


class GlobalMaxPadding(ModelRule):
    """One padded length given to every sample: the rollout-global padding bug.

    ## What it does
    Flags one padded length given to every sample: a list (or tensor) that
    repeats one value, stored as the per-sample padded lengths (a source
    such as `max_seq_lens`), or repeating a maximum over sequence lengths as
    per-sample lengths. Spellings: `[m] * n`, `[m for _ in xs]`,
    `torch.full((n,), m)`, `x.new_full(...)`, `dict.fromkeys(ks, m)`,
    `itertools.repeat(m, n)`, `torch.ones(n) * m`, directly or through a local.

    A maximum repeated over something that is not the samples (one
    `max_seqlen` per attention layer or head: the kernel's per-micro-batch
    scalar) is not per-sample padding and is left alone, and so is a
    placeholder filled in later (`[0] * n`).

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

    def check(self, file: FileQueries) -> Iterator[Report]:
        sources = file.vocab.sources
        for found in file.facts.broadcasts:
            if found.target in sources:
                if found.placeholder:
                    continue  # `[0] * n`, filled per sample later
            elif not (found.value_tags & _MAX and found.count_per_sample):
                continue  # a configured length repeated, or one kernel scalar per layer
            yield self.report(
                found.span,
                f"`{found.text}` gives every sample the same length in `{found.target}`, so one long "
                "sample pads them all. Round each sample's own total length up to the alignment unit instead.",
            )

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
        Valid(
            """
def attention_metadata(cu_seqlens, seq_lens, num_layers):
    # the kernel's per-micro-batch scalar, one per layer: not a per-sample length
    max_seqlen = max(seq_lens)
    return {"cu_seqlens": cu_seqlens, "max_seqlens": [max_seqlen] * num_layers}
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
