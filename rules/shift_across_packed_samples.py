from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.packedlocals import LOCAL_CONCATENATIONS
from layoutcheck.model.packedrows import CONCATENATIONS, ROW_SHIFTS, packed_shifts
from layoutcheck.model.queries import FileQueries

_SPELLINGS = ROW_SHIFTS + CONCATENATIONS + LOCAL_CONCATENATIONS
"""A shift along a row, or a concatenation onto a record's field or of collected pieces: what a shifted
read or a packed field needs (`layoutcheck.model.packedrows`, `layoutcheck.model.packedlocals`)."""
_DROPS = {"first": "drops the first position", "last": "drops the last position"}


class ShiftAcrossPackedSamples(ModelRule):
    """A next-token shift applied to a row that packs several samples.

    ## What it does
    Finds *packers*: a loop over samples that concatenates each sample's
    sequence onto a field of one record that starts as an empty list
    (`pack["labels"] += labels`, `pack["labels"].extend(labels)`, the value
    read from the sample the loop walks) and records one entry per sample in another field of the same
    record (`pack["lengths"] += [len(tokens)]`, `.append(n)`): each row of the
    concatenated fields holds several samples back to back. The same packing
    written with locals counts alike: pieces collected per sample in a local
    list (`rows.append(sample["labels"])`, `.extend`, `+= [x]`) or a
    comprehension, joined (`torch.cat(rows)`, or the list extended as is),
    stored into a field of a record that also stores a size of each of the
    same samples (`lengths.append(len(x))`, `[len(x) for x in samples]`,
    converted or accumulated); pieces given a leading axis first
    (`x.unsqueeze(0)`) make a batch of rows, not a packed row. Flags a field
    read from a record (`batch["labels"]`, `batch.pop("labels")`, through a
    local and conversions) and shifted by one position along each row of a
    batch (`labels[..., 1:]`, `x[:, :-1]`, `torch.roll(x, -1, dims=-1)`; a
    bare `x[1:]` is one sample's shift, left alone) when that field is
    one a packer fills, in the reader's module or in a module it imports
    (directly or through others). Names play no part: the packer is the
    loop's shape, and the two meet through the field.

    ## Why it matters
    A next-token shift belongs to each sample: its `T` tokens give `T - 1`
    targets. Shifted along a packed row, the
    last position of every sample but the last is trained to predict the
    first token of the next sample, and the loss has no way to tell: no error,
    a few wrong targets per row (docs/design.md#layout-spaces-and-bug-classes,
    class 5; pytorch/torchtune b18312c7d: the recipes shifted the labels of
    rows `PackedDataset` had packed, and the fix shifted each sample's labels
    where the sample is built).

    ## Example
    ```python
    def pack(samples):
        pack = {"tokens": [], "labels": [], "lengths": []}
        for sample in samples:
            pack["tokens"] += sample["tokens"]
            pack["labels"] += sample["labels"]
            pack["lengths"] += [len(sample["tokens"])]
        return pack

    def loss_step(model, batch):
        labels = batch.pop("labels")
        logits = model(**batch)
        return cross_entropy(logits[:, :-1], labels[:, 1:])  # across the samples' boundaries
    ```

    ## How to fix
    Shift each sample before it is packed (`labels = tokens[1:] + [ignore]`)
    and read the packed labels as they are; or mask each sample's last
    position with the lengths the packer recorded.

    ## Known problems
    The field is the meeting point: a module that reads a field of that name
    from unpacked batches only, in a project that also packs it, is flagged
    too (the same loop often receives both, as it did in torchtune). A local
    list grown by `+=` and stored without `cat` is read only in a function
    that also joins or extends a list (the functions read are found by those
    spellings); a record built by a constructor (`Batch(labels=...)`) is not
    read.

    ## Fix safety
    No autofix: where each sample's shift belongs is the data pipeline's call.
    """

    code = "LC133"
    message = (
        "`labels[..., 1:]` shifts a row that packs several samples: each sample's last position learns the next "
        "sample's first token. Shift each sample before packing."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # a shift to flag here, or a packer another module's shift meets
        return any(spelling in source for spelling in _SPELLINGS)

    def check(self, file: FileQueries) -> Iterator[Report]:
        for read, packer, packed in packed_shifts(file.project, file.index):
            field, kind, line, column, end_line, end_column, text, _ = read
            where = f"{file.project.files[packer].display}:{packed[1]}"
            yield self.report(
                (line, column + 1, end_line, end_column + 1),
                f"`{text}` {_DROPS[kind]} of the field `{field}` as a whole, and `{field}` packs several "
                f"samples into one row (`{packed[2]}` in `{packed[3]}`, {where}): each sample's last "
                "position then learns the next sample's first token. Shift each sample before it is packed, "
                "or mask the positions at the samples' boundaries.",
            )

    valid = [
        Valid(
            """
def pack(samples):
    pack = {"tokens": [], "labels": [], "lengths": []}
    for sample in samples:
        tokens = sample["tokens"]
        pack["tokens"] += tokens
        pack["labels"] += tokens[1:] + [-100]
        pack["lengths"] += [len(tokens)]
    return pack


def loss_step(model, loss_fn, batch):
    # each sample was shifted before packing: the packed labels are read as they are
    labels = batch.pop("labels")
    return loss_fn(model(**batch), labels)
"""
        ),
        Valid(
            """
def concat(samples):
    # one stream, no record of where each sample ends: not a pack of samples
    out = {"tokens": []}
    for sample in samples:
        out["tokens"] += sample["tokens"]
    return out


def loss_step(model, loss_fn, batch):
    labels = batch["tokens"][:, 1:]
    return loss_fn(model(batch["tokens"])[:, :-1], labels)
"""
        ),
        Valid(
            """
def pack(samples):
    pack = {"tokens": [], "lengths": []}
    for sample in samples:
        pack["tokens"] += sample["tokens"]
        pack["lengths"].append(len(sample["tokens"]))
    return pack


def loss_step(model, loss_fn, batch):
    # another field, not packed here
    labels = batch["labels"][:, 1:]
    return loss_fn(model(batch["tokens"])[:, :-1], labels)
"""
        ),
        Valid(
            """
def pack(samples):
    pack = {"labels": [], "lengths": []}
    for sample in samples:
        pack["labels"] += sample["labels"]
        pack["lengths"] += [len(sample["labels"])]
    return pack


def shift_sample(sample):
    # one sample, before it is packed: its own shift
    return sample["labels"][1:] + [-100]
"""
        ),
        Valid(
            """
def count(samples):
    # running totals per sample, not a row of samples
    stats = {"labels": 0, "lengths": []}
    for sample in samples:
        stats["labels"] += sample["n_labels"]
        stats["lengths"].append(sample["n_tokens"])
    return stats


def loss_step(model, loss_fn, batch):
    labels = batch["labels"][:, 1:]
    return loss_fn(model(batch["tokens"])[:, :-1], labels)
"""
        ),
        Valid(
            """
def loss_step(model, loss_fn, batch):
    # `labels` is packed in a module this one does not import
    labels = batch["labels"][:, 1:]
    return loss_fn(model(batch["tokens"])[:, :-1], labels)
""",
            files={
                "packing.py": """
def pack_rows(samples):
    pack = {"labels": [], "lengths": []}
    for sample in samples:
        pack["labels"].extend(sample["labels"])
        pack["lengths"].append(len(sample["labels"]))
    return pack
""",
            },
        ),
        Valid(
            """
import torch


def collate(samples):
    # each sample given a leading axis, then joined: a batch of rows, one sample each
    rows, lengths = [], []
    for sample in samples:
        rows.append(sample["labels"].unsqueeze(0))
        lengths.append(len(sample["labels"]))
    return {"labels": torch.cat(rows), "lengths": torch.tensor(lengths)}


def step(model, batch):
    return model(batch["tokens"]), batch["labels"][:, 1:]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def pack(samples):
    pack = {"tokens": [], "labels": [], "lengths": []}
    for sample in samples:
        tokens, labels = sample["tokens"], sample["labels"]
        pack["tokens"] += tokens
        pack["labels"] += labels
        pack["lengths"] += [len(tokens)]
    return pack


def loss_step(model, loss_fn, batch):
    labels = batch.pop("labels")
    logits = model(**batch)
    return loss_fn(logits[:, :-1], labels[:, 1:])
""",
            line=15,
            column=36,
            message="packs several samples into one row",
        ),
        Invalid(
            """
import torch

from packing import pack_rows


def targets(batch):
    return torch.roll(batch["labels"], shifts=-1, dims=-1)
""",
            line=8,
            column=12,
            message="drops the first position of the field `labels`",
            files={
                "packing.py": """
def pack_rows(samples):
    pack = {"labels": [], "lengths": []}
    for sample in samples:
        pack["labels"].extend(sample["labels"])
        pack["lengths"].append(len(sample["labels"]))
    return pack
""",
            },
        ),
        Invalid(
            """
def pack(samples):
    rows = {"tokens": [], "starts": []}
    for sample in samples:
        rows["starts"].append(len(rows["tokens"]))
        rows["tokens"].extend(sample.tokens)
    return rows


def inputs(batch, device):
    tokens = batch["tokens"].to(device)
    return tokens[..., :-1]
""",
            line=12,
            column=12,
            message="drops the last position of the field `tokens`",
        ),
        Invalid(
            """
from data import load


def step(model, batch):
    if model.training:
        labels = batch.get("labels")
        return model(batch["tokens"]), labels[:, 1:]
""",
            line=8,
            message="packs several samples into one row",
            files={
                "data.py": "from packing import pack_rows\n\n\ndef load(samples):\n    return pack_rows(samples)\n",
                "packing.py": """
def pack_rows(samples):
    pack = {"labels": [], "lengths": []}
    for sample in samples:
        pack["labels"] += sample["labels"]
        pack["lengths"] += [len(sample["labels"])]
    return pack
""",
            },
        ),
        Invalid(
            """
from packing import pack_rows


def step(model, batch):
    labels = batch["labels"]
    return model(batch["tokens"]), labels[:, 1:]
""",
            line=7,
            message="`rows.append(sample[\"labels\"])` in `pack_rows`",
            files={
                "packing.py": """
import torch


def pack_rows(samples):
    rows, lengths = [], []
    for sample in samples:
        rows.append(sample["labels"])
        lengths.append(len(sample["labels"]))
    return {"labels": torch.cat(rows), "lengths": torch.tensor(lengths)}
""",
            },
        ),
        Invalid(
            """
import torch


def pack_rows(samples):
    labels = torch.cat([s["labels"] for s in samples])
    return {"labels": labels, "cu_seqlens": torch.cumsum(torch.tensor([len(s["labels"]) for s in samples]), 0)}


def step(model, batch):
    return model(batch["tokens"]), batch["labels"][..., 1:]
""",
            line=11,
            message="`[s[\"labels\"] for s in samples]` in `pack_rows`",
        ),
    ]
