from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries
from layoutcheck.model.vocabulary import Tag

_SEQ, _ENTRY, _PAD = int(Tag.SEQ), int(Tag.ENTRY), int(Tag.PAD)


class NegativeSliceMayBeZero(ModelRule):
    """`x[-n:]` or `x[:-n]` with an `n` that can be 0.

    ## What it does
    Flags a slice whose start is `-n` (with no end) or whose end is `-n`
    (with no start) when `n` is a per-sample length (one sample's size,
    response length or mask sum, an entry of a list of lengths, or a
    parameter every caller passes one to) or a pad amount
    (`(m - n % m) % m`), and no test in the function says `n` is positive
    (`if n > 0:`, `assert n`, `max(n, 1)`).

    ## Why it matters
    `x[-0:]` is all of `x`, not none of it, and `x[:-0]` is empty, not all
    of it: a response of length 0 reads all `T` positions, and a sample whose
    `T` is already a multiple of `A` (pad amount 0) unpads to nothing. An empty response (a generation cut at its first token) or a
    sample already aligned (pad amount 0) then takes the whole sequence as
    its response, or unpads to nothing, with no error (docs/design.md#layout-spaces-and-bug-classes,
    class 7).

    ## Example
    ```python
    response_log_probs = [lp[-r:] for lp, r in zip(log_probs, response_lengths)]
    unpadded = stream[:-pad]
    ```

    ## How to fix
    Slice from an explicit start: `lp[len(lp) - r:]`, `stream[: stream.size(0) - pad]`, or test
    `r > 0` first.

    ## Known problems
    A length the function receives from outside the project (no caller in
    the tree) is judged by its own uses only.

    ## Fix safety
    No autofix: `x[len(x) - n:]` is the same slice only when `n <= len(x)`, which the linter cannot see.
    """

    code = "LC111"
    message = (
        "`lp[-r:]` takes the whole of `lp` when `r` is 0. Slice from an explicit start (`lp[len(lp) - r:]`) "
        "or test `r > 0` first."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "[-" in source or ":-" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        spaces = file.project.spaces
        for found in file.facts.clashes:
            if found.kind == "zero_slice?":
                ref = file.ref(found.function)
                tags = spaces.resolve(0, found.fields, found.params, ref)
                if not (tags & _SEQ and tags & _ENTRY) and not tags & _PAD:
                    continue
            elif found.kind != "zero_slice":
                continue
            whole = "the whole of the value" if found.detail.startswith("[-") else "nothing"
            yield self.report(
                found.span,
                f"`{found.text}` takes {whole} when its length is 0 (`{found.detail}` with a length that can be "
                "0). Slice from an explicit start (`x[len(x) - n:]`, `x[: len(x) - n]`), or test `n > 0` first.",
            )

    valid = [
        Valid(
            """
def responses(log_probs, loss_masks):
    out = []
    for lp, mask in zip(log_probs, loss_masks):
        n = max(int(mask.sum()), 1)
        out.append(lp[-n:])
    return out
"""
        ),
        Valid(
            """
def response(log_prob, loss_mask):
    n = int(loss_mask.sum())
    assert n > 0, "an empty response has no log-probs to take"
    return log_prob[-n:]
"""
        ),
        Valid(
            """
def responses(log_probs, response_lengths):
    return [lp[len(lp) - r:] for lp, r in zip(log_probs, response_lengths)]
"""
        ),
        Valid(
            """
def responses(log_probs, response_lengths):
    out = []
    for lp, r in zip(log_probs, response_lengths):
        if r > 0:
            out.append(lp[-r:])
    return out
"""
        ),
        Valid(
            """
def last_tokens(batch, k):
    return batch[:, -k:]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def response_tail(log_prob, response_length):
    return log_prob[-response_length:]


def responses(rollout_data):
    rollout_data["response_lengths"] = [int(m.sum()) for m in rollout_data["loss_masks"]]
    return [
        response_tail(lp, r) for lp, r in zip(rollout_data["log_probs"], rollout_data["response_lengths"])
    ]
""",
            line=3,
            column=12,
        ),
        Invalid(
            """
def response_columns(values, masks, i):
    n = int(masks[i].sum())
    return values[:, -n:]
""",
            line=4,
            column=12,
        ),
        Invalid(
            """
def responses(log_probs, loss_masks):
    response_lengths = [m.sum() for m in loss_masks]
    return [lp[-r:] for lp, r in zip(log_probs, response_lengths)]
""",
            line=4,
            column=13,
            message="takes the whole of the value when its length is 0",
        ),
        Invalid(
            """
import torch.nn.functional as F

def unpad(stream, unit):
    pad = (unit - stream.numel() % unit) % unit
    padded = F.pad(stream, (0, pad))
    return padded[:-pad]
""",
            line=7,
            column=12,
            message="takes nothing",
        ),
    ]
