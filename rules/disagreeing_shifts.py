from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.piecereach import called_back_pieces, passed_pieces
from layoutcheck.model.queries import FileQueries


class DisagreeingShifts(ModelRule):
    """Two of the batch's own tensors shifted opposite ways, then combined.

    ## What it does
    Marks each slice that drops the first position of an axis (`x[:, 1:]`,
    `torch.roll(x, -1)`: the targets' shift) or the last (`x[:, :-1]`: the
    inputs' shift), and whether the sliced value is the batch's own data (read
    from a field or a parameter, through locals and conversions) or what a
    call computed (a model's logits). The marks follow the values through
    calls and arithmetic. Combining, elementwise (`*`, `+`, `-`, `/`), a
    value whose data was shifted one way only with one whose data was shifted
    the other way only is flagged: a loss computed from `labels[:, 1:]` masked
    with `loss_mask[:, :-1]`. The finding points at the shift like the
    inputs' (`loss_mask[:, :-1]`), the one to change, and names the line
    where the two meet.

    It also flags a window whose two ends sit in different spaces:
    `x[:, n:-1]` with `n` a length (a prompt's, `prompt_ids.size(1)`). The
    start counts tokens, the end drops the last position as the logits do,
    so the window is one position off either way: the response's tokens
    are `x[:, n:]`, the logits that predict them `x[:, n - 1 : -1]`
    (openrlhf/OpenRLHF 37aad73e: an action mask one position late).

    And a roll of one piece of a split sequence: a function of the module
    that returns the `k`-th of equal pieces of its argument's last axis
    (`x[..., k * w : (k + 1) * w]`, or `w = x.shape[-1] // n`: a sequence-
    or context-parallel split, not a split of the batch's rows) gives a
    piece that must not be rolled along that axis
    (`torch.roll(piece, -1, dims=-1)`, or flattened), here
    or in a function it is passed to (unless the call passes
    the argument that skips that roll: `if targets is None: targets =
    ids.roll(-1)`). Across modules the piece is followed
    (`layoutcheck.model.piecereach`) out of a splitter's return, also one
    element of a returned tuple and a split along an axis a parameter names
    (`idx[dim] = slice(k * w, (k + 1) * w)`, `x[tuple(idx)]`, the call
    passing a literal axis other than 0); into a call by keyword or
    position, or as an entry of a dict spread with `**` (built in the
    calling function, or returned by another); to a function that module
    imports (also through a package that re-exports it,
    `from .dp_actor import Actor` in its `__init__`), a module called (`self.module(**inputs)` reaches the
    `forward` of its class, or the `forward` assigned onto an instance's
    class through a local, `model.__class__.forward = fn`, in a class that
    applies that patch, or in a class whose `__init__` stores the module
    from a parameter that a class applying the patch gives it:
    `Actor(module=self.module)`). It is flagged where the piece is placed: the
    argument, or the dict's entry. A splitter may also cut such a window
    out of each row of its argument and pack them (into a buffer's slices,
    or appended to a list then concatenated: a context-parallel rank's
    chunks of every sample). And the other way round: a callback handed
    beside a dict to a forward that cuts each of the dict's entries with a
    splitter and calls the callback with them (`fn(out, **{k: split(v)[0]
    for k, v in args.items()})`), the forward called by name or picked from
    a module's dict of forwards, is flagged where it rolls one of those
    entries (verl-project/verl f19c1162a: the labels rolled in the loss
    callback after the zigzag split).

    And a next-token offset converted with a token bound: a function of
    the module clamps an offset pair into the logits' range,
    `(max(a, p - 1), min(b, t - 1))` (a logit at `i` predicts token
    `i + 1`, so the logits that score the positions `[p, t)` sit at
    `[p - 1, t - 1)`), and returns it; where a caller takes the pair from
    the result (by position: `_, spans = f(...)`, `spans[0][1]`) and
    subtracts the token bound, `start - p` or `t - end`, instead of
    `p - 1` or `t - 1`, the conversion is flagged (the bounds compared as
    expressions, the callee's parameters read as the call's arguments).

    ## Why it matters
    Every field aligned with the targets (loss masks, advantages, old
    log-probs) must be shifted like the targets: of a sample's `T` positions,
    both keep `T - 1`, but only one of the two windows holds the targets. A mask shifted like the
    inputs is one position off: the first generated token is never trained
    and a prompt token is (docs/design.md#layout-spaces-and-bug-classes, class 5; volcengine/verl
    2d6c6dbb3 fixed the SFT loss mask, which masked the first generated token).
    A piece rolled after the split wraps its own first token to its last
    position: on every rank but the last, the last target is wrong
    (volcengine/verl 575d5a8ab rolled the labels inside the fused kernel,
    after the sequence-parallel split).
    Logit offsets placed with the token bounds land one position early in
    the response (THUDM/slime e9e42e5e8: a CP rank's log-probs put back
    into the response buffer one position off).

    ## Example
    ```python
    labels = input_ids[:, 1:]
    loss_mask = batch.pop("loss_mask")[:, :-1].reshape(-1)
    loss = loss_fct(logits[..., :-1, :].reshape(-1, vocab), labels.reshape(-1))
    loss = loss * loss_mask
    ```

    ## How to fix
    Shift the partner like the targets: `batch.pop("loss_mask")[:, 1:]`.
    For a window, pick one space: `seqs[:, prompt_len - 1 : -1]` for what
    the logits at those positions predict. Roll before splitting:
    `split(torch.roll(ids, -1, dims=-1), world, rank)`. Convert logit
    offsets with the logits' bounds: `start - (p - 1)`, `t - 1 - end`.

    ## Known problems
    Within one function (a split piece's roll: through calls, but a module called is followed only where its
    class is known, the class applies the patch that assigns its forward, or the module was handed to the
    class's constructor by one that does; a dict's entries are followed
    on every path, whatever branch stored them); values mixing both shifts already (a loss computed
    from inputs `x[:, :-1]` and targets `y[:, 1:]`) are not judged further.

    ## Fix safety
    No autofix: which side is right depends on what the mask marks.
    """

    code = "LC109"
    message = (
        "`loss_mask[:, :-1]` drops the last position (the inputs' shift), but it is combined with `loss`, whose "
        "data is shifted `[..., 1:]` (the targets'). Shift it like the targets."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # the last two: where a piece from another module's split is placed into a call or a spread dict
        return ":-1" in source or "1:" in source or "roll(" in source or ("min(" in source and "max(" in source) \
            or "**" in source or "slice" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        reported: set[tuple[int, int]] = set()
        for found in file.facts.clashes:
            if found.kind == "rolled_piece":
                reported.add((found.span[0], found.span[1]))
            if found.kind == "token_bound_on_logits":
                yield self.report(
                    found.span,
                    f"`{found.text}` converts an offset that its function clamps into the logits' range (a logit "
                    "predicts the next token, so the range runs one behind the tokens') with a token bound: it "
                    f"lands one position off. Write `{found.detail}`.",
                )
                continue
            if found.kind == "rolled_piece":
                yield self.report(
                    found.span,
                    f"`{found.text}`, one piece of a sequence split by `{found.detail}`, is rolled by one position "
                    "(here or where it is passed): its first token wraps to its last position, where the next "
                    "piece's first token belongs. Roll the whole sequence, then split it.",
                )
            if found.kind == "mixed_window":
                yield self.report(
                    found.span,
                    f"`{found.text}` starts at `{found.detail}`, a length counted in tokens, but ends at `-1` as the "
                    "logits do: the window is one position off in either space. Take the tokens' window "
                    f"(`[..., {found.detail}:]`) or the logits' (`[..., {found.detail} - 1 : -1]`).",
                )
                continue
            if found.kind != "shift_mismatch":
                continue
            yield self.report(
                found.span,
                f"`{found.text}` drops the last position (the inputs' shift), but {found.detail} (the targets'): "
                "the two are one position apart. Shift it like the targets (`[..., 1:]`).",
            )
        for (line, column, end_line, end_column), text, split, roller in passed_pieces(file.project, file.index):
            if (line, column + 1) in reported:
                continue
            yield self.report(
                (line, column + 1, end_line, end_column + 1),
                f"`{text}`, one piece of a sequence split by `{split}`, reaches {roller}, which rolls it by one "
                "position: its first token wraps to its last position, where the next piece's first token "
                "belongs. Roll the whole sequence, then split it (and pass the rolled piece where the callee "
                "takes one).",
            )
        for (line, column, end_line, end_column), text, split, forward in called_back_pieces(file.project, file.index):
            if (line, column + 1) in reported:
                continue
            yield self.report(
                (line, column + 1, end_line, end_column + 1),
                f"`{text}` rolls by one position what {forward} hands this callback: one piece of a sequence, "
                f"each entry of the dict given with it cut by `{split}`. The piece's first token wraps to its "
                "last position, where the next piece's first token belongs. Roll the whole sequence before "
                "it is cut (where the forward cuts it), not the piece here.",
            )

    valid = [
        Valid(
            """
import torch

def sample_lengths(lengths):
    cu_seqlens = torch.cumsum(lengths, dim=0)
    return cu_seqlens[1:] - cu_seqlens[:-1]
"""
        ),
        Valid(
            """
def midpoints(bins):
    return (bins[:-1] + bins[1:]) / 2
"""
        ),
        Valid(
            """
def masked_logits(model, batch):
    # the model's logits (computed, not read) against the targets' mask: the right pairing
    logits = model(batch["input_ids"]).logits
    return logits[:, :-1] * batch["loss_mask"][:, 1:].unsqueeze(-1)
"""
        ),
        Valid(
            """
def sft_loss(batch, model, loss_fct, vocab):
    input_ids = batch["input_ids"]
    logits = model(input_ids=input_ids).logits
    labels = input_ids[:, 1:]
    loss_mask = batch.pop("loss_mask")[:, 1:].reshape(-1)
    loss = loss_fct(logits[..., :-1, :].reshape(-1, vocab), labels.reshape(-1))
    return (loss * loss_mask).sum()
"""
        ),
        Valid(
            """
def teacher_forcing(batch, model, loss_fct):
    logits = model(batch["input_ids"][:, :-1]).logits
    loss = loss_fct(logits, batch["labels"][:, 1:])
    return loss * batch["loss_mask"][:, 1:]
"""
        ),
        Valid(
            """
def action_mask(sequences, prompt_ids, eos_id):
    # the logits' window of the response: positions prompt - 1 .. T - 2 predict its tokens
    start = prompt_ids.size(1)
    return sequences[:, start - 1 : -1].ne(eos_id)
"""
        ),
        Valid(
            """
def strip_braces(s, left):
    # a string's window, not a tensor axis
    return s[len(left) : -1]
"""
        ),
        Valid(
            """
import torch


def my_piece(seq, world, rank):
    width = seq.shape[-1] // world
    return seq[..., rank * width : (rank + 1) * width]


def local_targets(ids, world, rank):
    # rolled whole, then split: each piece's last target is the next piece's first token
    return my_piece(torch.roll(ids, shifts=-1, dims=-1), world, rank)
"""
        ),
        Valid(
            """
import torch


def my_piece(seq, world, rank):
    width = seq.shape[-1] // world
    return seq[..., rank * width : (rank + 1) * width]


def token_logp(model, ids, targets=None):
    if targets is None:
        targets = torch.roll(ids, shifts=-1, dims=-1)
    return model(ids).log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def forward(model, ids, world, rank):
    # the targets are rolled whole and split like the inputs: the callee's roll is skipped
    targets = my_piece(torch.roll(ids, shifts=-1, dims=-1), world, rank)
    return token_logp(model, my_piece(ids, world, rank), targets=targets)
"""
        ),
        Valid(
            """
import torch


def micro_batch(batch, i, size):
    # a split of the batch's rows: each row keeps its whole sequence
    return batch[i * size : (i + 1) * size]


def targets(batch, i, size):
    rows = micro_batch(batch, i, size)
    return torch.roll(rows, shifts=-1, dims=-1)
"""
        ),
        Valid(
            """
import torch


def take_slice(x, world, rank):
    width = x.shape[-1] // world
    return x[..., rank * width : (rank + 1) * width]


def rows_rolled(x, world, rank):
    # rolled along the rows, not the sequence
    return torch.roll(take_slice(x, world, rank), shifts=-1, dims=0)
"""
        ),
        Valid(
            """
def windows(total, answer, lo, hi):
    prompt = total - answer
    return (max(lo, prompt - 1), min(hi, total - 1))

def place(chunk, total, answer, lo, hi):
    start, end = windows(total, answer, lo, hi)
    # converted with the logits' bounds
    return start - (total - answer - 1), total - 1 - end
"""
        ),
        Valid(
            """
def token_window(total, answer, lo, hi):
    prompt = total - answer
    return (max(lo, prompt), min(hi, total))

def place(total, answer, lo, hi):
    # a window clamped to the tokens' range, converted with the tokens' bounds
    start, end = token_window(total, answer, lo, hi)
    return start - (total - answer), total - end
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def action_mask(sequences, prompt_ids, eos_id):
    start = prompt_ids.size(1)
    return sequences[:, start:-1].ne(eos_id)
""",
            line=4,
            column=12,
            message="a length counted in tokens, but ends at `-1` as the logits do",
        ),
        Invalid(
            """
def kl_penalty(batch):
    old = batch["old_log_probs"][:, 1:]
    ref = batch["ref_log_probs"][:, :-1]
    return ref - old
""",
            line=4,
            column=11,
            message="combined at line 5 (`ref - old`) with `old`",
        ),
        Invalid(
            """
def policy_loss(batch, log_probs_of):
    labels = batch["input_ids"][:, 1:]
    advantages = batch["advantages"][:, :-1]
    log_probs = log_probs_of(labels)
    return -(log_probs * advantages).mean()
""",
            line=4,
            column=18,
        ),
        Invalid(
            """
import torch

def rolled_loss(batch, loss_fct, logits):
    targets = torch.roll(batch["input_ids"], shifts=-1, dims=-1)
    loss = loss_fct(logits, targets)
    return loss * batch["loss_mask"][:, :-1]
""",
            line=7,
            column=19,
        ),
        Invalid(
            """
def sft_loss(batch, model, loss_fct, vocab):
    input_ids = batch["input_ids"]
    logits = model(input_ids=input_ids).logits
    labels = input_ids[:, 1:]
    loss_mask = batch.pop("loss_mask")[:, :-1].reshape(-1)
    loss = loss_fct(logits[..., :-1, :].reshape(-1, vocab), labels.reshape(-1))
    return (loss * loss_mask).sum()
""",
            line=6,
            column=17,
            message="drops the last position (the inputs' shift)",
        ),
        Invalid(
            """
import torch


def my_piece(seq, world, rank):
    width = seq.shape[-1] // world
    return seq[..., rank * width : (rank + 1) * width]


def local_targets(ids, world, rank):
    local = my_piece(ids, world, rank)
    return torch.roll(local, shifts=-1, dims=-1)
""",
            line=12,
            column=23,
            message="`local`, one piece of a sequence split by `my_piece`",
        ),
        Invalid(
            """
import torch


def my_piece(seq, world, rank):
    width = seq.shape[-1] // world
    return seq[..., rank * width : (rank + 1) * width]


def token_logp(model, ids, targets=None):
    if targets is None:
        targets = ids.roll(-1, dims=-1)
    return model(ids).log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def forward(model, ids, world, rank):
    return token_logp(model, my_piece(ids, world, rank))
""",
            line=17,
            column=30,
        ),
        Invalid(
            """
import torch


def take_slice(stream, world, rank):
    width = stream.shape[-1] // world
    return stream[rank * width : (rank + 1) * width]


def targets(stream, world, rank):
    return torch.roll(take_slice(stream, world, rank), shifts=-1, dims=-1)
""",
            line=11,
            column=23,
        ),
        Invalid(
            """
def offsets(total, answer, lo, hi):
    first = total - answer
    logit = (max(lo, first - 1), min(hi, total - 1))
    if logit[0] >= logit[1]:
        logit = (0, 0)
    return hi - lo, logit

def fill_sizes(total, answer, lo, hi):
    _, span = offsets(total, answer, lo, hi)
    return span[0] - (total - answer)
""",
            line=11,
            column=12,
            message="Write `span[0] - (total - answer - 1)`",
        ),
        Invalid(
            """
def spans(total, answer, r, w):
    prompt = total - answer
    a = (max(r * w, prompt - 1), min((r + 1) * w, total - 1))
    return (a,)

def right_fill(total, answer, r, w):
    ((s, e),) = spans(total, answer, r, w)
    return total - e
""",
            line=9,
            column=12,
        ),
    ]
