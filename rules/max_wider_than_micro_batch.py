from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class MaxWiderThanMicroBatch(ModelRule):
    """A maximum over the whole batch padding the samples of each micro-batch.

    ## What it does
    Flags `max(...)` over a collection of samples or lengths, computed
    before a loop over chunks of that collection (micro-batches:
    `for mb in split(samples, k)`, `samples.split(k)`,
    `for i in range(0, len(samples), k)`), when the maximum sizes a pad or a
    new tensor inside the loop (`F.pad(s, (0, longest - s.size(0)))`,
    `torch.full((n, longest), pad)`). A chunk is recognised by use: the loop
    body walks it. A maximum computed inside the loop, over the chunk, is
    the right one and is not flagged. Names play no part.

    ## Why it matters
    A rectangular micro-batch needs its samples padded to its own longest,
    `max(T)` over the micro-batch; the longest sample of the whole batch
    pads every micro-batch to its length, so one outlier multiplies the
    tokens every later micro-batch computes on (the rollout-global padding
    of docs/design.md#layout-spaces-and-bug-classes, class 1; radixark/miles e78cfb3 fixed its
    per-sample form, which `global-max-padding` flags). Invariant O3 bounds
    each sample's padded length `P` by its own `T`, `T <= P < T + A`.

    ## Example
    ```python
    longest = max(s.size(0) for s in samples)
    for batch in micro_batches(samples, size):
        ids = torch.stack([F.pad(s, (0, longest - s.size(0))) for s in batch])
    ```

    ## How to fix
    Take the maximum over the micro-batch that is padded:
    ```python
    for batch in micro_batches(samples, size):
        longest = max(s.size(0) for s in batch)
        ids = torch.stack([F.pad(s, (0, longest - s.size(0))) for s in batch])
    ```

    ## Known problems
    Only a maximum and a loop in one function are joined; a maximum passed
    to a function called per micro-batch is not followed. A batch padded to
    one length on purpose (a fixed shape for compiled kernels) should use
    a configured length rather than the batch's maximum.

    ## Fix safety
    No autofix: where the maximum belongs depends on the loop.
    """

    code = "LC115"
    message = (
        "`max(s.size(0) for s in samples)` is taken over the whole batch but pads the samples of each "
        "chunk of `micro_batches(samples, size)`. Take the maximum over the micro-batch that is padded."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "max" in source and "for " in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind != "wide_max":
                continue
            yield self.report(
                found.span,
                f"`{found.text}` is taken over the whole batch but pads the samples of each chunk of "
                f"`{found.detail}`. Take the maximum over the micro-batch that is padded.",
            )

    valid = [
        Valid(
            """
import torch
import torch.nn.functional as F


def train_step(model, samples, size, pad_id):
    for batch in [samples[i:i + size] for i in range(0, len(samples), size)]:
        longest = max(s.size(0) for s in batch)
        model(torch.stack([F.pad(s, (0, longest - s.size(0)), value=pad_id) for s in batch]))
"""
        ),
        Valid(
            """
import torch
import torch.nn.functional as F


def collate(samples, pad_id):
    # one batch, padded to its own longest sample
    longest = max(s.size(0) for s in samples)
    return torch.stack([F.pad(s, (0, longest - s.size(0)), value=pad_id) for s in samples])
"""
        ),
        Valid(
            """
import torch
import torch.nn.functional as F


def pad_all(samples, pad_id):
    longest = max(s.size(0) for s in samples)
    out = []
    for s in samples:  # each sample of the batch, not a chunk of it
        out.append(F.pad(s, (0, longest - s.size(0)), value=pad_id))
    return torch.stack(out)
"""
        ),
        Valid(
            """
def log_lengths(samples, size, log):
    longest = max(s.size(0) for s in samples)
    for batch in samples.split(size):
        log(longest, len(batch))
"""
        ),
        Valid(
            """
import torch


def buffers(lengths, chunks):
    longest = max(lengths)
    return [torch.zeros(longest) for _ in range(chunks)]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch
import torch.nn.functional as F


def micro_batches(samples, size):
    return [samples[i:i + size] for i in range(0, len(samples), size)]


def train_step(model, samples, size, pad_id):
    longest = max(s.size(0) for s in samples)
    for batch in micro_batches(samples, size):
        model(torch.stack([F.pad(s, (0, longest - s.size(0)), value=pad_id) for s in batch]))
""",
            line=11,
            message="pads the samples of each chunk of `micro_batches(samples, size)`",
        ),
        Invalid(
            """
import torch


def rectangular(samples, size, pad_id):
    lengths = [len(s) for s in samples]
    width = max(lengths)
    out = []
    for start in range(0, len(samples), size):
        chunk = samples[start:start + size]
        ids = torch.full((len(chunk), width), pad_id)
        for row, s in enumerate(chunk):
            ids[row, : len(s)] = s
        out.append(ids)
    return out
""",
            line=7,
        ),
        Invalid(
            """
import torch.nn.functional as F


def pad_chunks(tokens, k, pad_id):
    longest = max(t.numel() for t in tokens)
    padded = []
    for part in tokens.split(k):
        padded.append([F.pad(t, (0, longest - t.numel()), value=pad_id) for t in part])
    return padded
""",
            line=6,
        ),
        Invalid(
            """
import torch


def micro_batch_tensors(samples, n_micro, pad_id):
    width = max(map(len, samples))
    for index, batch in enumerate(torch.chunk(samples, n_micro)):
        ids = torch.full((len(batch), width), pad_id)
        for row, s in enumerate(batch):
            ids[row, : len(s)] = s
        yield index, ids
""",
            line=6,
        ),
    ]
