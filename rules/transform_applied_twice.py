from __future__ import annotations

import re
from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries

_STORED_CALL = re.compile(r"""(?:\]\s*=|["']\s*:)\s*[\w.]+\(""")
"""A call's result stored into a field (``d["ids"] = f(x)``, ``{"ids": f(x)}``)."""
_WHAT = {"first": "drops the first position again (`[..., 1:]`)", "last": "drops the last position again (`[..., :-1]`)"}


class TransformAppliedTwice(ModelRule):
    """A next-token shift applied to a value that is already shifted.

    ## What it does
    Follows each value through its function: a slice that drops the first
    position of one axis (`x[:, 1:]`, `x[..., 1:, :]`), or the last
    (`x[:-1]`, `logits[..., :-1, :]`), marks the value as shifted, through
    rebinding (`logits = logits[:-1]`, also under a condition:
    `logits = logits if last else logits[:-1]`), conversions and arithmetic.
    A second slice of the same kind on a shifted value is flagged. Names play
    no part: the shift is what the code does.

    Across functions of one module, through a record: a function that
    returns a one-position shift of its argument (`cat([t[:, 1:], pad])`)
    shifts; a record field stored as its result (`{"ids": shift(ids)}`)
    and read back into a shift of the same kind (`shift(item["ids"])`, or a
    function that applies one to that parameter) is flagged at the store.

    Across modules, by the project's summaries: a function of any module that
    returns a one-position shift of a parameter, also when another parameter
    picks the side (`if left: ... else: ...`, read at each call from the
    literal passed or the default); a field stored as such a call's result in
    one module, read in a module that imports it (directly or through others)
    and given to a shifter of the same kind or to a function that passes that
    parameter to one (`head.prepare(batch["ids"])`; a method of an instance
    whose class is not known counts when every method of that name in the
    project shifts the parameter so) is flagged at the store.

    ## Why it matters
    A language model's logit at position `t` predicts the token at `t + 1`,
    so logits lose their last position once, targets their first. Shifting
    twice drops a real token (a sample of `T` tokens yields `T - 2` positions
    where `T - 1` are meant):
    the last CP rank's log-probs and entropy are one position short, or misaligned with their targets, with no error
    (docs/design.md#layout-spaces-and-bug-classes, class 4; THUDM/slime 2a3969205 fixed such a double
    trim in the entropy computation of the last CP rank; sgl-project/SpecForge
    20924186 stored shifted targets in an offline dataset whose consumer
    shifted them again).

    ## Example
    ```python
    logits = logits if cp_rank < cp_size - 1 else logits[:-1, :]
    log_probs = gather(logits, tokens)
    shifted = logits[:-1, :] if cp_rank == cp_size - 1 else logits  # trimmed again
    entropy = entropy_of(shifted)
    ```

    ## How to fix
    Shift once, into a new name, and use that name everywhere:
    ```python
    shifted = logits if cp_rank < cp_size - 1 else logits[:-1, :]
    log_probs = gather(shifted, tokens)
    entropy = entropy_of(shifted)
    ```

    ## Known problems
    Within one function, or through a record's field; a value shifted in a
    callee and returned, then shifted again by its caller, is not followed,
    nor a field read that goes through another call (a model's forward)
    before its second shift. A loop that trims one position per iteration
    is walked once, so it is not flagged.

    ## Fix safety
    No autofix: which of the two shifts is meant is the author's call.
    """

    code = "LC108"
    message = (
        "`logits[:-1, :]` drops the last position of a value already shifted that way. Shift once, into "
        "a new name, and use it everywhere."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        # a shift spelled here, or a call's result stored into a field (a shifter of another module's)
        return ":-1" in source or "1:" in source or _STORED_CALL.search(source) is not None

    def check(self, file: FileQueries) -> Iterator[Report]:
        # A store the module's own reader flags (at its value) is not reported twice.
        stored = {found.span[0] for found in file.facts.clashes if found.kind == "reshifted_field"}
        for store in file.reshifted_stores():
            if store.write.span[0] in stored:
                continue
            stored.add(store.write.span[0])
            yield self.report(
                store.write.span,
                f"`{store.write.text}` stores a value already shifted by one position, and "
                f"{file.project.label(store.again)} shifts the field again where it is read back: each position "
                "then holds the value two ahead, not the next. Shift in one place only.",
            )
        for found in file.facts.clashes:
            if found.kind == "reshifted_field":
                yield self.report(
                    found.span,
                    f"`{found.text}` stores a value already shifted by one position, and `{found.detail}` shifts "
                    "the field again once it is read back: each position then holds the value two ahead, not the "
                    "next. Shift in one place only.",
                )
                continue
            if found.kind != "double_shift":
                continue
            yield self.report(
                found.span,
                f"`{found.text}` {_WHAT.get(found.detail, 'shifts again')} on a value already shifted that way, "
                "so a real token is dropped. Shift once, into a new name, and use it everywhere.",
            )

    valid = [
        Valid(
            """
def next_token_targets(batch):
    labels = batch["input_ids"][:, 1:]
    loss_mask = batch["loss_mask"][:, 1:]
    return labels, loss_mask
"""
        ),
        Valid(
            """
import torch

def rolled_targets(input_ids):
    # rolled left, then the wrapped-around last position dropped: one shift, not two
    targets = torch.roll(input_ids, shifts=-1, dims=-1)
    return targets[:, :-1]
"""
        ),
        Valid(
            """
def log_probs_and_entropy(logits, tokens, cp_rank, cp_size):
    shifted = logits if cp_rank < cp_size - 1 else logits[:-1, :]
    log_probs = shifted.log_softmax(-1).gather(-1, tokens.unsqueeze(-1))
    entropy = -(shifted.softmax(-1) * shifted.log_softmax(-1)).sum(-1)
    return log_probs, entropy
"""
        ),
        Valid(
            """
def next_token_pairs(logits, input_ids):
    return logits[:, :-1], input_ids[:, 1:]
"""
        ),
        Valid(
            """
def strip_trailing(ids, pad_id):
    while len(ids) and ids[-1] == pad_id:
        ids = ids[:-1]
    return ids
"""
        ),
        Valid(
            """
import torch


def next_tokens(t):
    return torch.cat([t[:, 1:], torch.zeros_like(t[:, :1])], dim=1)


def make_item(row):
    # stored unshifted; the consumer shifts once
    return {"ids": row, "targets": row}


def consume(item):
    return item["ids"], next_tokens(item["targets"])
"""
        ),
        Valid(
            """
def drop_first(t):
    return t[..., 1:]


def make_item(row):
    # the stored targets are shifted; what is read back is used as it is
    return {"ids": row[..., :-1], "targets": drop_first(row)}


def consume(item):
    return item["ids"], item["targets"]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch

def targets(input_ids):
    rolled = torch.roll(input_ids, shifts=-1, dims=-1)
    return rolled[:, 1:]
""",
            line=6,
            column=12,
            message="drops the first position again",
        ),
        Invalid(
            """
def token_log_probs(model, batch):
    logits = model(batch["input_ids"]).logits[:, :-1].float()
    return logits[:, :-1].log_softmax(-1)
""",
            line=4,
            column=12,
        ),
        Invalid(
            """
def log_probs_and_entropy(logits, tokens, cp_rank, cp_size):
    logits = logits if cp_rank < cp_size - 1 else logits[:-1, :]
    log_probs = logits.log_softmax(-1).gather(-1, tokens.unsqueeze(-1))
    shifted = logits[:-1, :] if cp_rank == cp_size - 1 else logits
    entropy = -(shifted.softmax(-1) * shifted.log_softmax(-1)).sum(-1)
    return log_probs, entropy
""",
            line=5,
            column=15,
            message="drops the last position again",
        ),
        Invalid(
            """
def targets(batch):
    labels = batch["input_ids"][:, 1:]
    labels = labels.contiguous()
    return labels[:, 1:]
""",
            line=5,
            column=12,
        ),
        Invalid(
            """
import torch


def next_tokens(t):
    return torch.cat([t[:, 1:], torch.zeros_like(t[:, :1])], dim=1)


def make_item(row):
    return {"ids": row, "targets": next_tokens(row)}


def consume(item):
    return item["ids"], next_tokens(item["targets"])
""",
            line=10,
            column=36,
            message="`next_tokens(row)` stores a value already shifted by one position, and `consume`",
        ),
        Invalid(
            """
def drop_first(t):
    return t[..., 1:]


class Head:
    def prepare(self, targets, weights):
        return drop_first(targets), weights


def collate(rows, weights):
    batch = {}
    batch["targets"] = drop_first(rows)
    batch["weights"] = weights
    return batch


def step(head, batch):
    return head.prepare(batch["targets"], batch["weights"])
""",
            line=13,
            column=24,
        ),
    ]
