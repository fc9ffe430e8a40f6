from __future__ import annotations

from collections.abc import Iterable, Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.facts import element_call
from layoutcheck.model.project import FunctionRef, Project
from layoutcheck.model.queries import FileQueries


class PositionsInAnotherSpace(ModelRule):
    """Positions computed in one space used in another: whole-sequence against response, data against its labels.

    ## What it does
    Flags two ways a position leaves the space it was computed in, read
    from what the code does:

    * a slice whose two bounds are moved to a new origin by the same
      amount, `x[a - q : b - q]`, where `q` is one length less another (a
      prompt's length: a sample's total less its response), with no clamp
      at 0: neither `max(0, a - q)` nor a bound already computed as
      `max(..., q)`, nor a test `a >= q` around it. Bounds that a function
      of the project computes (a CP offset helper that clamps its offsets)
      are that function's to clamp and are not flagged here, unless its
      summary shows the element they come from returned as the literal
      `(0, 0)` on some path (an empty chunk): clamped on one path only,
      so `0 - q` is a negative bound on the other. The helper may be in
      any module, called directly or through `functools.partial`. Both
      ends of one such pair (`x[p[0] - q : p[1] - q]`) are not flagged:
      on the `(0, 0)` path the bounds are equal, and the slice is empty
      as the empty chunk's should be;
    * positions stored beside a window of data, into the same slots of
      another buffer (`ids[w] = row[lo:hi]` then `pos[w] = arange(a, b)`),
      whose start is neither 0 (positions counted from each piece's own
      start) nor computed from the window's start (`lo`, or `lo + offset`
      for another origin);
    * positions for several slices stored beside one slice's tokens: a
      record field stored as `torch.arange(a, a + w)` whose width `w` is
      (through locals) a product of the width of another field of the same
      record (`r["ids"].shape[1] - overlap`) and a factor that is not a
      constant (`peers = world // ring`);
    * next-token targets cut at a length counted in the tokens: `y[:n]`
      or `y[n:]` (read or written, `y[:n] = ignore`) of `y = x[1:]` whose
      `x` the same function also cuts `x[:-1]` (the inputs: the pair that
      makes `[1:]` a next-token shift), with `n` a length (`len(prompt)`,
      through locals and `min`/`max`) that is neither the targets' own nor
      already moved back one (`n - 1`).

    ## Why it matters
    A context-parallel rank holds chunks of the whole sequence, so its
    bounds are whole-sequence positions; the response starts at the prompt's
    length. A chunk that lies (partly) in the prompt moves to a negative
    start, and a negative bound counts from the end in Python: the rank
    reads the wrong part of the response mask, silently (thudm/slime
    afda55394): the rank's positions run over `P` (or `T`), the response's
    over `R` (`T - R` later). Positions written beside a chunk of tokens must be those
    tokens' own: when the back chunk of a zigzag split gets the positions of
    the sequence's last chunk on every rank, rotary embeddings place the
    tokens wrongly and nothing fails (volcengine/verl b916f6036; docs/design.md#layout-spaces-and-bug-classes, class 6).
    Positions as wide as a group of slices, beside one slice's tokens, number
    every rank of the group from the group's start: peers get the same
    positions for different tokens (sgl-project/SpecForge bcb2ec2a, Ulysses
    peers inside one ring group). Target `i` is token `i + 1`: the prompt's
    first `p` tokens are the first `p - 1` targets, so masking `labels[:p]`
    hides the first answer token, which is never trained (pytorch/torchtitan
    8184d44e3, class 5).

    ## Example
    ```python
    prompt = total - response
    (lo, hi), (lo2, hi2) = chunk_bounds(total, response)
    local = torch.cat([mask[lo - prompt : hi - prompt], mask[lo2 - prompt : hi2 - prompt]])
    ```
    ```python
    tokens[dst : dst + n] = row[back_lo:back_hi]
    positions[dst : dst + n] = torch.arange(padded - n, padded)
    ```
    ```python
    inputs, labels = ids[:-1], ids[1:]
    labels[: len(prompt_ids)] = IGNORE
    ```

    ## How to fix
    Clamp the moved bounds and skip empty parts:
    `lo, hi = max(0, lo - prompt), max(0, hi - prompt)`. Give a window the
    positions it was read from: `torch.arange(back_lo, back_hi)`. Number
    one slice, from the rank's own start:
    `torch.arange(start + peer * own, start + peer * own + own)`. Cut the
    targets at `len(prompt_ids) - 1` (clamped at 0), or mask the tokens
    first and shift the mask with them.

    ## Known problems
    Only the spellings above are read (a bound may be a local:
    `s, e = a - q, b - q` then `x[s:e]` reads as `x[a - q : b - q]`): bounds
    moved inside a helper, or positions computed in another function
    (beyond a helper's `(0, 0)` path), are not followed. Positions
    meant for a sequence gathered later (as wide as the group's slices on
    purpose) but stored in the record of one rank's tokens are flagged all
    the same; store them apart. Targets shifted in another function than the
    one that cuts them are not read.

    ## Fix safety
    No autofix: whether an empty part is skipped or kept depends on the caller.
    """

    code = "LC116"
    message = (
        "`mask[lo - prompt : hi - prompt]` moves whole-sequence positions to the response's origin with no clamp "
        "at 0: a chunk in the prompt gets a negative bound, which counts from the end. Clamp them first."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "arange(" in source or " - " in source or ("1:]" in source and ":-1]" in source)

    def check(self, file: FileQueries) -> Iterator[Report]:
        project = file.project
        for found in file.facts.clashes:
            if found.kind == "moved_origin":
                ref = file.ref(found.function)
                unclamped = self._unclamped_by(project, ref, found.calls)
                if unclamped is None:
                    continue  # positions the project's own function computes: judged where it clamps them
                if unclamped and found.one_pair:
                    continue  # both ends of the `(0, 0)` pair: `x[-q:-q]` is empty, as the empty range's slice is
                if unclamped:
                    yield self.report(
                        found.span,
                        f"`{found.text}` moves positions that {unclamped} returns to an origin `{found.detail}` "
                        "later, but on one path it returns them as `(0, 0)`, not clamped into the range: there "
                        f"`0 - {found.detail}` is a negative bound, which counts from the end. Clamp each bound "
                        f"(`max(0, a - {found.detail})`) and skip empty parts.",
                    )
                    continue
                yield self.report(
                    found.span,
                    f"`{found.text}` moves whole-sequence positions to an origin `{found.detail}` later (a length "
                    "less another) with no clamp at 0: a position before it becomes a negative bound, which "
                    f"counts from the end. Clamp each bound (`max(0, a - {found.detail})`) and skip empty parts.",
                )
            elif found.kind == "wide_positions":
                factor, partner = found.detail.split("|", 1)
                yield self.report(
                    found.span,
                    f"`{found.text}` gives `{factor}` slices' positions, but it is stored beside `{partner}`, which "
                    "holds one slice's tokens: every rank of the group gets the group's positions. Number this "
                    "rank's slice only, from its own start.",
                )
            elif found.kind == "shifted_prefix":
                yield self.report(
                    found.span,
                    f"`{found.text}` cuts next-token targets (tokens shifted `[1:]`, the inputs cut `[:-1]`) at "
                    f"`{found.detail}`, a length counted in the tokens: target `i` is token `i + 1`, so the first "
                    f"`{found.detail}` tokens are the first `{found.detail} - 1` targets, and the cut is one "
                    f"position late. Cut at `{found.detail} - 1` (clamped at 0), or cut the tokens before shifting.",
                )
            elif found.kind == "misplaced_positions":
                yield self.report(
                    found.span,
                    f"`{found.text}` fills the slots that the window starting at `{found.detail}` fills with data, "
                    f"but its positions do not start at `{found.detail}`: each token gets another token's position. "
                    "Give the window the positions it was read from.",
                )

    @staticmethod
    def _unclamped_by(project: Project, ref: FunctionRef, calls: Iterable[str]) -> str | None:
        """"" when no callee of ``calls`` is the project's; the label of the project's function whose
        returned element holds ``(0, 0)`` on some path (`Function.zero_elements`: it clamps on one path
        only); None when the project's function computes the positions (its clamp is judged there)."""
        for callee in calls:
            target = project.resolve_callee(ref, callee)
            if target is None:
                continue
            index, _ = element_call(callee)
            if index is not None and index >= 0 and index in project.function(target).zero_elements:
                return project.label(target)
            return None
        return ""

    valid = [
        Valid(
            """
IGNORE = -100

def chat_example(tok, conversation):
    ids = tok.encode(conversation)
    inputs, labels = ids[:-1], ids[1:]
    # the prompt's last token predicts the first answer token: that target stays
    asked = len(tok.encode(conversation[:1]))
    hide = min(max(asked - 1, 0), len(labels))
    labels[:hide] = [IGNORE] * hide
    return inputs, labels
"""
        ),
        Valid(
            """
import torch

def local_mask(mask, total, response, lo, hi):
    prompt = total - response
    lo, hi = max(0, lo - prompt), max(0, hi - prompt)
    return mask[lo:hi] if hi > lo else mask[:0]
"""
        ),
        Valid(
            """
def token_offsets(total, response, rank, chunk):
    prompt = total - response
    lo = max(rank * chunk, prompt)
    return lo, max(lo, (rank + 1) * chunk)


def local_mask(mask, total, response, rank, chunk):
    prompt = total - response
    lo, hi = token_offsets(total, response, rank, chunk)
    return mask[lo - prompt : hi - prompt]
"""
        ),
        Valid(
            """
def chunk_logits(logits, start, end, chunk_start):
    # the position is clamped to the chunk first: never before the new origin
    s = max(start, chunk_start)
    return logits[s - chunk_start : end - chunk_start]
"""
        ),
        Valid(
            """
def chunk_logits(logits, s, e, rank, chunk):
    # the origin is a chunk's start (a product), not a prompt: the bounds come from the chunk
    chunk_start = rank * chunk
    return logits[s - chunk_start : e - chunk_start]
"""
        ),
        Valid(
            """
import torch

def place(row, out, positions, dst, lo, hi):
    out[dst : dst + hi - lo] = row[lo:hi]
    positions[dst : dst + hi - lo] = torch.arange(lo, hi)
"""
        ),
        Valid(
            """
import torch

def to_global(row, out, positions, dst, lo, hi, offset):
    # a rank's piece, labelled with whole-sequence positions: the window's start moved by its offset
    out[dst : dst + hi - lo] = row[lo:hi]
    positions[dst : dst + hi - lo] = torch.arange(lo + offset, hi + offset)
"""
        ),
        Valid(
            """
import torch

def pack(rows, out, positions, starts):
    for row, dst in zip(rows, starts):
        n = row.shape[0]
        out[dst : dst + n] = row[0:n]
        positions[dst : dst + n] = torch.arange(0, n)  # each sample's own positions, from 0
"""
        ),
        Valid(
            """
import torch

def shard(sample, rank, world, ring_rank, ring_world, overlap):
    ids = sample["ids"]
    chunk = (ids.shape[1] + world - 1) // world
    out = {"ids": ids[:, rank * chunk : rank * chunk + chunk + overlap]}
    peers = max(1, world // ring_world)
    own = max(out["ids"].shape[1] - overlap, 0)
    start = ring_rank * own * peers + (rank % peers) * own
    out["positions"] = torch.arange(start, start + own).unsqueeze(0)
    return out
"""
        ),
        Valid(
            """
import torch

def gathered(record, world):
    # positions for the whole gathered sequence, stored apart from the local tokens
    width = record["ids"].shape[1] * world
    full = {"positions": torch.arange(width)}
    return full
"""
        ),
    ]
    invalid = [
        Invalid(
            """
IGNORE = -100

def chat_example(tok, conversation):
    ids = tok.encode(conversation)
    inputs, labels = ids[:-1], ids[1:]
    asked = len(tok.encode(conversation[:1]))
    hide = min(asked, len(labels))
    labels[:hide] = [IGNORE] * hide
    return inputs, labels
""",
            line=9,
            column=5,
            message="a length counted in the tokens: target `i` is token `i + 1`",
        ),
        Invalid(
            """
import torch

def answer_targets(row: torch.Tensor, question: torch.Tensor):
    feed = row[:, :-1]
    want = row[:, 1:]
    start = question.size(1)
    return feed, want[:, start:]
""",
            line=8,
            column=18,
        ),
        Invalid(
            """
import torch

def response_mask_chunks(masks, totals, responses, bounds_of):
    pieces = []
    for mask, total, response in zip(masks, totals, responses):
        prompt = total - response
        lo, hi = bounds_of(total, response)
        pieces.append(mask[lo - prompt : hi - prompt])
    return torch.cat(pieces)
""",
            line=9,
            column=23,
            message="moves whole-sequence positions to an origin `prompt` later",
        ),
        Invalid(
            """
def response_window(mask, total, response, lo, hi):
    return mask[lo - (total - response) : hi - (total - response)]
""",
            line=3,
            column=12,
        ),
        Invalid(
            """
import torch

def back_chunk(row, out, positions, dst, half, padded, back_lo, back_hi):
    n = back_hi - back_lo
    out[dst + half : dst + half + n] = row[back_lo:back_hi]
    positions[dst + half : dst + half + n] = torch.arange(padded - n, padded)
""",
            line=7,
            column=46,
            message="its positions do not start at `back_lo`",
        ),
        Invalid(
            """
import torch

def place_chunks(rows, out, positions, starts, bounds):
    for row, dst, (lo, hi) in zip(rows, starts, bounds):
        n = hi - lo
        out[dst : dst + n] = row[lo:hi]
        positions[dst : dst + n] = torch.arange(row.shape[0] - n, row.shape[0])
""",
            line=8,
            column=36,
            message="its positions do not start at `lo`",
        ),
        Invalid(
            """
import torch

def shard(sample, rank, world, ring_rank, ring_world, overlap):
    ids = sample["ids"]
    chunk = (ids.shape[1] + world - 1) // world
    out = {"ids": ids[:, rank * chunk : rank * chunk + chunk + overlap]}
    peers = max(1, world // ring_world)
    own = max(out["ids"].shape[1] - overlap, 0)
    span = own * peers
    start = ring_rank * span
    out["positions"] = torch.arange(start, start + span).unsqueeze(0)
    return out
""",
            line=12,
            column=24,
            message="gives `peers` slices' positions, but it is stored beside `ids`",
        ),
        Invalid(
            """
import torch

def local_rows(batch, group):
    batch["tokens"] = batch["tokens"][:, : batch["width"]]
    n = batch["tokens"].size(1)
    batch["pos"] = torch.arange(n * group)
    return batch
""",
            line=7,
            column=20,
        ),
    ]
