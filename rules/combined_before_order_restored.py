from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class CombinedBeforeOrderRestored(ModelRule):
    """Outputs in a regrouped order combined with the batch's own data before the order is restored.

    ## What it does
    Follows the order of samples through one function: a call that
    regroups the batch returns the groups and the order it used
    (`groups, order = regroup(batch)`), a value is built from the groups
    (`out = torch.cat([model(g) for g in groups])`) and later put back in the
    batch's order by an index computed from that order
    (`out = out[inverse(order)]`). Combining the value elementwise (`*`,
    `+`, `-`, `/`) with anything else in between (a mask, a field of the
    batch) is flagged: one side is in the regrouped order, the other in the
    batch's.

    ## Why it matters
    Dynamic batching regroups samples by length to fill a token budget; the
    outputs come back in the regrouped order until the inverse permutation
    is applied. A mask applied before that multiplies sample `i`'s values
    with sample `j`'s mask, silently: the shapes agree whenever the padded
    widths do (docs/design.md#layout-spaces-and-bug-classes, class 9; volcengine/verl f147ede20
    masked the critic's values before restoring their order). The invariant
    is the sample order of the layout: entry `i` is sample `i`.

    ## Example
    ```python
    groups, order = regroup(batch["input_ids"], budget)
    values = torch.cat([critic(g) for g in groups])
    values = values * batch["response_mask"]
    values = values[torch.tensor(inverse(order))]
    ```

    ## How to fix
    Restore the order first, then combine:
    ```python
    values = values[torch.tensor(inverse(order))]
    values = values * batch["response_mask"]
    ```

    ## Known problems
    Within one function, and only for an order returned beside the groups
    by one call (the values may be built from the groups by a comprehension
    or by `append` in a loop over them).

    ## Fix safety
    No autofix: moving the combination changes what the function computes in between.
    """

    code = "LC120"
    message = (
        "`values * batch[\"mask\"]` combines values in the regrouped order with the batch's own data before "
        "`values[inverse(order)]` restores their order. Restore the order first."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "," in source and "=" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "combined_before_restore":
                yield self.report(
                    found.span,
                    f"`{found.text}` combines a value built from regrouped samples, still in the regrouped "
                    f"order, with data in the batch's order: `{found.detail}` restores its order only later. "
                    "Restore the order first, then combine.",
                )

    valid = [
        Valid(
            """
import torch

def predict(head, batch, regroup, budget, inverse):
    groups, order = regroup(batch["input_ids"], budget)
    values = torch.cat([head(g) for g in groups], dim=0)
    values = values[torch.tensor(inverse(order))]
    values = values * batch["response_mask"]
    return values
"""
        ),
        Valid(
            """
import torch

def predict(head, batch, regroup, budget, inverse, scale):
    groups, order = regroup(batch["input_ids"], budget)
    values = torch.cat([head(g) for g in groups], dim=0)
    values = values * 2.0
    return values[torch.tensor(inverse(order))]
"""
        ),
        Valid(
            """
import torch

def predict(head, batch, regroup, budget):
    groups, order = regroup(batch["input_ids"], budget)
    values = torch.cat([head(g) for g in groups], dim=0)
    restored = values[torch.argsort(torch.tensor(order))]
    return restored * batch["response_mask"]
"""
        ),
        Valid(
            """
import torch

def predict(head, rows, regroup, budget):
    # never put back: the caller receives the order and restores it
    groups, order = regroup(rows, budget)
    values = torch.cat([head(g) for g in groups], dim=0)
    return values, order
"""
        ),
        Valid(
            """
import torch

def predict(head, rows, regroup, budget, inverse):
    groups, order = regroup(rows, budget)
    values = torch.cat([head(g) for g in groups], dim=0)
    values = values[torch.tensor(inverse(order))]
    values = values - values.mean()
    return values
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch

def predict(head, batch, regroup, budget, inverse):
    groups, order = regroup(batch["input_ids"], budget)
    values = torch.cat([head(g) for g in groups], dim=0)
    values = values * batch["response_mask"]
    values = values[torch.tensor(inverse(order))]
    return values
""",
            line=7,
            column=14,
            message="still in the regrouped order",
        ),
        Invalid(
            """
import itertools

import torch

def log_probs(model, rows, mask, rearrange, restore):
    parts, index = rearrange(rows)
    out = torch.cat([model(p) for p in parts])
    out = out - mask.float()
    flat = list(itertools.chain.from_iterable(index))
    out = out[restore(flat)]
    return out
""",
            line=9,
            column=11,
        ),
        Invalid(
            """
import torch

def entropies(model, rows, weights, regroup, inverse):
    chunks, perm = regroup(rows)
    ent = torch.cat([model(c) for c in chunks])
    ent = ent + weights
    ent = ent[torch.tensor(inverse(perm))]
    return ent
""",
            line=7,
            column=11,
            message="`ent + weights` combines",
        ),
        Invalid(
            """
import torch

def rewards(head, batch, regroup, budget, inverse):
    groups, order = regroup(batch["ids"], budget)
    scores = torch.cat([head(g) for g in groups])
    scores = scores / batch["lengths"]
    scores = scores[torch.tensor(inverse(order))]
    return scores
""",
            line=7,
            column=14,
        ),
        Invalid(
            """
import torch

class Critic:
    def values(self, batch, budget):
        groups, order = self.regroup(batch["ids"], budget)
        out = torch.cat([self.head(g) for g in groups])
        out = out * batch["mask"]
        out = out[torch.tensor(self.inverse(order))]
        return out
""",
            line=8,
            column=15,
        ),
    ]
