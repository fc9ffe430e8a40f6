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

    It also flags the length recorded for a piece of a packed stream when
    it counts another shape than the piece: in one block (a loop's body),
    `stream.append(x.flatten())` (or `x.view(-1)`, `x.reshape(-1)`) and
    `lengths.append(len(x))`. The stream holds every element of `x`, the
    length counts its rows; they agree only when `x` has one axis, where
    flattening it would change nothing.

    ## Why it matters
    A packed batch of one row holds every sample's tokens along its
    columns; its length `T` is `x.shape[-1]`, its samples are counted by
    their segment ids or lengths. `len(x)` is 1 whatever the batch holds:
    a pad segment's id computed from it (`len(tokens) + 1`) is 2, the id of
    a real sample, and the pad tokens join that sample's attention
    (docs/design.md#layout-spaces-and-bug-classes, class 7; openrlhf/OpenRLHF 6b1849b9 took the pad
    segment's id from `len()` of a one-row tensor, where the list branch of
    the same function counted the samples). Lengths that split a packed
    stream back into its samples must count what the stream holds: with
    one-row token tensors (`1 x L`) flattened into the stream and `len()`
    recorded, every sample's length is 1 and every sample after the first
    is read from the wrong tokens (openrlhf/OpenRLHF 43ace1e0, the packed
    preference pairs).

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
    concatenation along its columns, or flattened into a list beside the
    list its `len()` goes to, in the same block, is read.

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
        return "len(" in source and ("cat(" in source or "append(" in source)

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "row_count_as_size":
                yield self.report(
                    found.span,
                    f"`{found.text}` counts the rows of `{found.detail}`, which is one row (it is concatenated "
                    "along its columns with a block one row high): it is always 1, not a length or a count of "
                    f"samples. Count what you mean (`{found.detail}.shape[-1]`, the samples' ids or lengths).",
                )
            elif found.kind == "flattened_length":
                yield self.report(
                    found.span,
                    f"`{found.text}` records the length of a piece of a packed stream, which holds "
                    f"`{found.detail}` flattened, as `len({found.detail})`: the count of its rows, not of the "
                    f"elements the stream holds (1 for a one-row tensor). Record `{found.detail}.numel()` (or "
                    "the flattened piece's length).",
                )

    valid = [
        Valid(
            """
import torch

def pack(pieces):
    # the length recorded is the flattened piece's: the elements the stream holds
    stream, sizes = [], []
    for piece in pieces:
        flat = piece.flatten()
        stream.append(flat)
        sizes.append(len(flat))
    return torch.cat(stream), sizes
"""
        ),
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

def join_rows(rows):
    row, spans = [], []
    for one in rows:
        row.append(one.view(-1))
        spans.append(len(one))
    return torch.cat(row)[None], spans
""",
            line=8,
            column=22,
            message="as `len(one)`: the count of its rows",
        ),
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
