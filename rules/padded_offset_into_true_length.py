from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class PaddedOffsetIntoTrueLength(ModelRule):
    """A sample's true tokens sliced at offsets computed from its padded length.

    ## What it does
    Flags a slice of data selected by a mask (`d = input_ids[i, attention_mask[i]]`,
    exactly the sample's `T` true tokens) whose end comes from a padded length
    (a round-up, a pad amount added, or what is derived from one: a CP chunk of
    the padded length), unless the end is clamped to the data's own size
    (`min(end, d.shape[0])`).

    ## Why it matters
    Offsets in padded space (`P`, its CP chunks) run past the end of `T`-long
    data: a CP rank whose chunk lies in the padding slices fewer tokens than
    its chunk holds, or none, and the packed buffer is filled short or
    misaligned, silently, for every sample shorter than its padding
    (docs/design.md#layout-spaces-and-bug-classes, class 3: volcengine/verl b178a3cd5,
    `preprocess_packed_seqs`, fixed in verl 0.9.1 by clamping each chunk's end
    to `d.shape[0]`).

    ## Example
    ```python
    seqlen = seqlens_padded[i] // cp_size
    half = seqlen // 2
    d = input_ids[i, attention_mask[i]]
    out[start : start + half] = d[half * cp_rank : half * (cp_rank + 1)]
    ```

    ## How to fix
    Clamp to the data and skip empty chunks:
    ```python
    end = min(half * (cp_rank + 1), d.shape[0])
    if end > half * cp_rank:
        out[start : start + end - half * cp_rank] = d[half * cp_rank : end]
    ```
    or pad the sample to its padded length before slicing it in padded space
    (also under a test: after `if len(d) < p: d = F.pad(d, (0, p - len(d)))`,
    `d` is at least `p` long on both paths, so it is not flagged).

    ## Known problems
    Only mask-selected data is known to be `T` long here; a sample that is
    padded later in another function is not followed.

    ## Fix safety
    No autofix: whether to clamp or to pad first depends on what the buffer expects.
    """

    code = "LC110"
    message = (
        "`d[half * cp_rank : half * (cp_rank + 1)]` slices a sample's true tokens at an offset computed from "
        "its padded length. Clamp the end to the data's size, or pad the sample first."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "[" in source and ":" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        seen: set[int] = set()
        for found in file.facts.clashes:
            if found.kind != "padded_offset" or found.function in seen:
                continue
            seen.add(found.function)  # one per function: the later slices share its offsets
            yield self.report(
                found.span,
                f"`{found.text}` slices a sample's true tokens (selected by a mask) up to `{found.detail}`, "
                "computed from its padded length, so chunks past the sample's end come out short or empty. "
                "Clamp the end to the data's size (`min(end, d.shape[0])`), or pad the sample first.",
            )

    valid = [
        Valid(
            """
import torch.nn.functional as F

def pack(input_ids, attention_mask, unit, cp_size, cp_rank, out, starts):
    seqlens = attention_mask.sum(dim=-1)
    padded = seqlens + (unit - seqlens % unit) % unit
    for i in range(input_ids.shape[0]):
        half = int(padded[i]) // cp_size // 2
        d = input_ids[i, attention_mask[i]]
        # the fix the message recommends: padded here, or already at least as long (the test says so)
        if len(d) < padded[i]:
            d = F.pad(d, (0, int(padded[i]) - len(d)))
        out[starts[i] : starts[i] + half] = d[half * cp_rank : half * (cp_rank + 1)]
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pack(input_ids, attention_mask, padded, cp_size, cp_rank, out, starts):
    for i in range(input_ids.shape[0]):
        half = padded[i] // cp_size // 2
        d = F.pad(input_ids[i, attention_mask[i]], (0, padded[i] - int(attention_mask[i].sum())))
        out[starts[i] : starts[i] + half] = d[half * cp_rank : half * (cp_rank + 1)]
"""
        ),
        Valid(
            """
def local_rows(input_ids, padded, cp_size, cp_rank):
    # rows of the padded batch: they are padded-length long, so padded offsets fit them
    chunk = padded // (2 * cp_size)
    return [row[chunk * cp_rank : chunk * (cp_rank + 1)] for row in input_ids]
"""
        ),
        Valid(
            """
def head(input_ids, attention_mask, unit):
    n = int(attention_mask.sum())
    padded = (n + unit - 1) // unit * unit
    d = input_ids[attention_mask.bool()]
    return d[:padded]
"""
        ),
        Valid(
            """
def pack(input_ids, attention_mask, seqlens, pad_size, cp_size, cp_rank, out, starts):
    padded = seqlens + pad_size
    for i in range(input_ids.shape[0]):
        half = padded[i] // cp_size // 2
        d = input_ids[i, attention_mask[i]]
        end = min(half * (cp_rank + 1), d.shape[0])
        if end > half * cp_rank:
            out[starts[i] : starts[i] + end - half * cp_rank] = d[half * cp_rank : end]
"""
        ),
        Valid(
            """
def pack(input_ids, attention_mask, out, starts, lengths):
    for i in range(input_ids.shape[0]):
        d = input_ids[i, attention_mask[i]]
        out[starts[i] : starts[i] + lengths[i]] = d[: lengths[i]]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
from layoutcheck.geometry import round_up


def local_tokens(input_ids, attention_mask, cp_size, cp_rank):
    out = []
    for i in range(input_ids.shape[0]):
        chunk = round_up(int(attention_mask[i].sum()), 2 * cp_size) // (2 * cp_size)
        d = input_ids[i, attention_mask[i]]
        out.append(d[chunk * cp_rank : chunk * (cp_rank + 1)])
    return out
""",
            line=10,
            column=20,
        ),
        Invalid(
            """
def local_chunk(tokens, mask, unit, cp_size, cp_rank):
    padded = -(-int(mask.sum()) // unit) * unit
    chunk = padded // (2 * cp_size)
    d = tokens[mask.bool()]
    return d[chunk * cp_rank : chunk * (cp_rank + 1)]
""",
            line=6,
            column=12,
        ),
        Invalid(
            """
def second_chunk(input_ids, attention_mask, padded, cp_size, cp_rank, unit):
    seqlens = attention_mask.sum(-1)
    padded = seqlens + (unit - seqlens % unit) % unit
    rows = []
    for i in range(input_ids.shape[0]):
        chunk = (padded[i] + 2 * cp_size - 1) // (2 * cp_size)
        d = input_ids[i, attention_mask[i]]
        rows.append(d[chunk * (2 * cp_size - cp_rank - 1) : chunk * (2 * cp_size - cp_rank)])
    return rows
""",
            line=9,
            column=21,
        ),
        Invalid(
            """
def pack(input_ids, attention_mask, unit, cp_size, cp_rank, out, starts):
    seqlens = attention_mask.sum(dim=-1)
    padded = seqlens + (unit - seqlens % unit) % unit
    for i in range(input_ids.shape[0]):
        half = padded[i] // cp_size // 2
        d = input_ids[i, attention_mask[i]]
        out[starts[i] : starts[i] + half] = d[half * cp_rank : half * (cp_rank + 1)]
""",
            line=8,
            column=45,
            message="slices a sample's true tokens",
        ),
    ]
