from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class RowCountAsSize(ModelRule):
    """`len(x)` of a tensor that is one row, used in arithmetic: the count of rows, always 1.

    ## What it does
    Reads from the code that a tensor is one row: it is concatenated along
    its columns (`dim=1`, `dim=-1`) with a block one row high (built with
    a leading 1, `x.new_full((1, k), v)`, `torch.ones(1, k)`, or given one,
    `t.unsqueeze(0)`, `t[None]`), which only a one-row tensor allows. `len(x)` of that tensor, used in arithmetic in the same
    function (`len(tokens) + 1`), is flagged: `len` counts rows, and there
    is one.

    ## Why it matters
    A packed batch of one row holds every sample's tokens along its
    columns; its length `T` is `x.shape[-1]`, its samples are counted by
    their segment ids or lengths. `len(x)` is 1 whatever the batch holds:
    a pad segment's id computed from it (`len(tokens) + 1`) is 2, the id of
    a real sample, and the pad tokens join that sample's attention
    (DESIGN.md section 10, class 7; openrlhf/OpenRLHF 6b1849b9 took the pad
    segment's id from `len()` of a one-row tensor, where the list branch of
    the same function counted the samples).

    ## Example
    ```python
    tokens = torch.cat([tokens, tokens.new_full((1, extra), pad_id)], dim=1)
    pad_segment = len(tokens) + 1
    ```

    ## How to fix
    Count what you mean: a fresh segment id past every id in use
    (`int(segments.max()) + 1`), or the row's length (`tokens.shape[-1]`).

    ## Known problems
    Only a tensor shown to be one row in the same function, by a
    concatenation along its columns, is read.

    ## Fix safety
    No autofix: what was meant to be counted is the author's.
    """

    code = "LC123"
    message = (
        "`len(tokens)` counts the rows of `tokens`, which is one row (it is concatenated along its columns with "
        "a `(1, k)` block): it is always 1. Count the samples or take `tokens.shape[-1]`."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "len(" in source and "cat(" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "row_count_as_size":
                yield self.report(
                    found.span,
                    f"`{found.text}` counts the rows of `{found.detail}`, which is one row (it is concatenated "
                    "along its columns with a block one row high): it is always 1, not a length or a count of "
                    f"samples. Count what you mean (`{found.detail}.shape[-1]`, the samples' ids or lengths).",
                )

    valid = [
        Valid(
            """
import torch

def pad_row(tokens, segments, extra, pad_id):
    tokens = torch.cat([tokens, tokens.new_full((1, extra), pad_id)], dim=1)
    fresh = int(segments.max()) + 1
    segments = torch.cat([segments, segments.new_full((1, extra), fresh)], dim=1)
    return tokens, segments
"""
        ),
        Valid(
            """
import torch

def grow_rows(batch, extra_rows):
    # concatenated along the rows: len() counts them, and there are more than one
    batch = torch.cat([batch, torch.zeros(extra_rows, batch.shape[1])], dim=0)
    return len(batch) - extra_rows
"""
        ),
        Valid(
            """
import torch

def pad_row(tokens, extra, pad_id):
    tokens = torch.cat([tokens, tokens.new_full((1, extra), pad_id)], dim=1)
    return tokens, tokens.shape[-1] + 1
"""
        ),
        Valid(
            """
import torch

def widen(rows, k):
    # the block is as tall as `rows`: nothing says there is one row
    rows = torch.cat([rows, torch.zeros(rows.shape[0], k)], dim=1)
    return len(rows) + 1
"""
        ),
        Valid(
            """
import torch

def pad_row(tokens, extra, pad_id):
    tokens = torch.cat([tokens, tokens.new_full((1, extra), pad_id)], dim=1)
    assert len(tokens) == 1
    return tokens
"""
        ),
        Valid(
            """
import torch

def stack(rows, extra):
    # a block of `extra` rows (not one): `len` counts real rows
    block = torch.zeros(extra, rows.shape[1])
    rows = torch.cat([rows, block], dim=1)
    return len(rows) + 1
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch

def pad_row(tokens, segments, extra, pad_id):
    tokens = torch.cat([tokens, tokens.new_full((1, extra), pad_id)], dim=1)
    fresh = len(tokens) + 1
    segments = torch.cat([segments, fresh * torch.ones(1, extra, dtype=segments.dtype)], dim=-1)
    return tokens, segments
""",
            line=6,
            column=13,
            message="`len(tokens)` counts the rows of `tokens`, which is one row",
        ),
        Invalid(
            """
import torch

def pad_row(ids, extra, pad_id):
    ids = torch.cat((ids, torch.full((1, extra), pad_id)), dim=-1)
    return ids, len(ids) - extra
""",
            line=6,
            column=17,
        ),
        Invalid(
            """
import torch

def pad_row(ids, extra):
    ids = torch.cat([ids, torch.zeros(1, extra, dtype=ids.dtype)], 1)
    offsets = [0, len(ids) * 1]
    return ids, offsets
""",
            line=6,
            column=19,
        ),
        Invalid(
            """
import torch

def pad_rows(ids, positions, extra):
    ids = torch.cat([ids, ids.new_zeros((1, extra))], dim=1)
    if extra:
        positions = torch.cat([positions, torch.arange(extra)[None] + len(ids)], dim=1)
    return ids, positions
""",
            line=7,
            column=71,
        ),
        Invalid(
            """
import torch

def pad_sequences(sequences, attention_mask, ring, pad_id):
    seqlen = sequences.shape[-1]
    pad_len = (ring - seqlen % ring) % ring
    padded = torch.tensor([pad_id] * pad_len, dtype=sequences.dtype).unsqueeze(0)
    sequences = torch.cat([sequences, padded], dim=1)
    attention_mask = torch.cat([attention_mask, (len(sequences) + 1) * torch.ones(1, pad_len)], dim=-1)
    return sequences, attention_mask
""",
            line=9,
            column=50,
            message="`len(sequences)` counts the rows of `sequences`",
        ),
    ]
