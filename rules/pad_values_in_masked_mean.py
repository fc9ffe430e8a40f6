from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class PadValuesInMaskedMean(ModelRule):
    """A per-sample mean that sums the pad positions and divides by the real tokens' count.

    ## What it does
    Reads a masked mean from the code: `x.sum(-1) / n` where `n` is a
    mask's sum (`n = mask.sum(-1).clamp(min=1)`: how many real tokens each
    row has). When, over the same count in one function, one numerator is
    masked (`(y * mask).sum(-1) / n`, `torch.where(mask, y, 0)`) and another
    is not, the unmasked sum is flagged: its pad positions are summed too.

    ## Why it matters
    A padded row holds `P` positions of which `T` are real; the mean over
    the real tokens divides by `T`, so every pad position in the sum must be
    0. A partner summed unmasked adds whatever sits at the pad positions
    (advantages broadcast over the row, stale values), silently, and only on
    the padded path: the packed path of the same function is right.
    docs/design.md#layout-spaces-and-bug-classes, class 7; inclusionAI/AReaL b2fb234d9 masked the
    advantages before its sequence-level mean.

    ## Example
    ```python
    counts = mask.sum(dim=-1, keepdim=True).clamp(min=1)
    ratio = (log_ratio * mask).sum(dim=-1, keepdim=True) / counts
    gains = gains.sum(dim=-1, keepdim=True) / counts
    ```

    ## How to fix
    ```python
    gains = torch.where(mask, gains, 0.0).sum(dim=-1, keepdim=True) / counts
    ```

    ## Known problems
    Judged within one function, and only next to a sum over a count of the
    same mask that is masked (the count spelled either way: inline, or a
    local, over `dim=1` or `dim=-1`): a lone `x.sum(-1) / mask.sum(-1)` may
    have been masked where `x` was computed.

    ## Fix safety
    No autofix: which value the pad positions should hold is the caller's.
    """

    code = "LC119"
    message = (
        "`gains.sum(dim=-1)` is divided by the real tokens' count `mask.sum(-1)` but is not masked, while "
        "its partner over the same count is: the pad positions are summed too. Mask it like its partner."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "sum(" in source and "/" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "unmasked_mean":
                yield self.report(
                    found.span,
                    f"`{found.text}` is divided by the count of `{found.detail}`'s real tokens but sums every "
                    f"position, while another sum over that count is masked by `{found.detail}`: the pad "
                    f"positions' values are counted in. Mask it by `{found.detail}` first.",
                )

    valid = [
        Valid(
            """
import torch

def sequence_means(log_ratio, gains, mask):
    counts = mask.sum(dim=-1, keepdim=True).clamp(min=1)
    ratio = (log_ratio * mask).sum(dim=-1, keepdim=True) / counts
    gains = torch.where(mask, gains, 0.0).sum(dim=-1, keepdim=True) / counts
    return ratio, gains
"""
        ),
        Valid(
            """
def token_mean(values, mask):
    # one sum over the count, nothing to compare it with: masked where `values` was computed, maybe
    return values.sum(-1) / mask.sum(-1).clamp(min=1)
"""
        ),
        Valid(
            """
def sequence_means(a, b, mask):
    n = mask.sum(-1).clamp(min=1)
    return (a * mask).sum(-1) / n, (b * mask).sum(-1) / n
"""
        ),
        Valid(
            """
def two_counts(a, b, mask, other):
    # each sum over its own mask's count
    n = mask.sum(-1).clamp(min=1)
    m = other.sum(-1).clamp(min=1)
    return (a * mask).sum(-1) / n, b.sum(-1) / m
"""
        ),
        Valid(
            """
def totals(a, b, mask):
    # nothing masked, nothing divided by a mask's count: plain sums
    return a.sum(-1) + b.sum(-1), mask.sum(-1)
"""
        ),
        Valid(
            """
def means(a, b, mask):
    n = mask.sum(-1).clamp(min=1)
    return a.masked_fill(~mask, 0).sum(-1) / n, b.masked_fill(~mask, 0).sum(-1) / n
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch

def sequence_means(log_ratio, gains, mask):
    # the same count spelled two ways: inline over dim 1, and a local over dim -1
    ratio = torch.where(mask, log_ratio, 0.0).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    counts = mask.sum(dim=-1, keepdim=True).clamp(min=1)
    gains = gains.sum(dim=-1, keepdim=True) / counts
    return ratio, gains
""",
            line=8,
            column=13,
            message="is divided by the count of `mask`'s real tokens but sums every position",
        ),
        Invalid(
            """
def sequence_means(log_ratio, gains, mask):
    counts = mask.sum(dim=-1, keepdim=True).clamp(min=1)
    ratio = (log_ratio * mask).sum(dim=-1, keepdim=True) / counts
    gains = gains.sum(dim=-1, keepdim=True) / counts
    return ratio, gains
""",
            line=5,
            column=13,
            message="is divided by the count of `mask`'s real tokens but sums every position",
        ),
        Invalid(
            """
def losses(pg, kl, mask):
    n = mask.float().sum(-1)
    return (pg * mask).sum(-1) / n + kl.sum(-1) / n
""",
            line=4,
            column=38,
        ),
        Invalid(
            """
import torch

def sequence_means(ratio, gains, mask):
    counts = mask.sum(dim=1).clamp(min=1)
    ratio = torch.where(mask, ratio, 0.0).sum(dim=1) / counts
    gains = gains.sum(dim=1) / counts
    return ratio, gains
""",
            line=7,
            column=13,
            message="`gains.sum(dim=1)` is divided by the count of `mask`'s real tokens",
        ),
        Invalid(
            """
def per_sample(entropy, adv, loss_mask):
    valid = loss_mask.sum(-1)
    ent = (entropy * loss_mask).sum(-1) / valid
    adv_mean = adv.sum(-1) / valid
    return ent, adv_mean
""",
            line=5,
            column=16,
        ),
        Invalid(
            """
def means(a, b, mask):
    n = mask.sum(-1).clamp(min=1)
    return a.masked_fill(~mask, 0).sum(-1) / n, b.sum(-1) / n
""",
            line=4,
            column=49,
        ),
    ]
