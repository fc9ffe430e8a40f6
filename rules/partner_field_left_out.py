from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries

_CP_UTILS = '''
from .state import cp_rank, cp_size


def slice_log_prob_with_cp(values, total_length, response_length):
    chunk = (total_length + 2 * cp_size() - 1) // (2 * cp_size())
    start = chunk * cp_rank() - (total_length - response_length)
    return values[max(start, 0) : max(start + chunk, 0)]


def all_gather_with_cp(values, total_length, response_length):
    return values
'''
_MM_DATA = '''
from .cp_utils import all_gather_with_cp, slice_log_prob_with_cp


def reslice_after_expansion(rollout_data, old_lengths, new_lengths, response_lengths):
    for key in ("rollout_log_probs", "teacher_log_probs"):
        values = rollout_data.get(key)
        if not values:
            continue
        rollout_data[key] = [
            slice_log_prob_with_cp(all_gather_with_cp(v, old, r), new, r)
            for v, old, new, r in zip(values, old_lengths, new_lengths, response_lengths)
        ]
'''


class PartnerFieldLeftOut(ModelRule):
    """A per-sample transform applied to some co-indexed fields and not to their partners.

    ## What it does
    Learns which fields of a record are partners from the code itself: the
    fields one loop transforms alike (`for key in ("rollout_log_probs",
    "teacher_log_probs"): data[key] = [f(v, ...) for v in data[key]]`). A
    function elsewhere that applies the same transform (a call of the same
    function, per sample: `data["rollout_log_probs"] = [f(v, ...) for ...]`)
    to some of those fields and not to the others is flagged, at its
    transform, naming the partner it leaves out.

    ## Why it matters
    Co-indexed per-sample fields must stay in one layout (invariant O4: after
    CP slicing, each response field holds the count the CP offset rule gives
    for `(P, cp, r)`): when the rollout's
    log-probs are sliced for context parallelism and the teacher's log-probs
    are not, each rank pairs its local log-probs with the whole response's
    teacher log-probs, and the distillation loss reads the wrong positions
    (DESIGN.md section 10, class 2; radixark/miles 9469b7239 added the
    teacher's log-probs, and a third partner, to the producer's CP slicing).

    ## Example
    ```python
    rollout_data["rollout_log_probs"] = [
        slice_log_prob_with_cp(lp, t, r) for lp, t, r in zip(rollout_data["rollout_log_probs"], totals, responses)
    ]
    ```
    while another function slices both partners alike
    (`for key in ("rollout_log_probs", "teacher_log_probs"): ...`).

    ## How to fix
    Transform every partner the same way, in one loop over the keys that
    both places share:
    ```python
    for key in ("rollout_log_probs", "teacher_log_probs"):
        if key in rollout_data:
            rollout_data[key] = [slice_log_prob_with_cp(v, t, r) for v, t, r in zip(rollout_data[key], totals, responses)]
    ```

    ## Known problems
    Partners are learnt from loops over literal keys; fields that are never
    transformed together anywhere in the project are not known to be
    partners.

    ## Fix safety
    No autofix: adding a field to a transform changes what the loss reads.
    """

    code = "LC112"
    message = (
        "`rollout_data[\"rollout_log_probs\"]` is sliced for CP here but its partner `teacher_log_probs` is not. "
        "Transform every partner the same way."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return " for " in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for transform, missing, where in file.partners_left_out():
            names = ", ".join(f"`{m}`" for m in missing)
            yield self.report(
                transform.span,
                f"`{transform.key}` is transformed by `{transform.callee.rsplit('.', 1)[-1]}` here, but its "
                f"partner{'s' if len(missing) > 1 else ''} {names} (transformed with it by {where}) "
                f"{'are' if len(missing) > 1 else 'is'} not. Transform every partner the same way.",
            )

    valid = [
        Valid(
            """
from .cp_utils import all_gather_with_cp, slice_log_prob_with_cp


def reslice_after_expansion(rollout_data, old_lengths, new_lengths, response_lengths):
    # the loop that makes the two fields partners: every key is transformed alike
    for key in ("rollout_log_probs", "teacher_log_probs"):
        values = rollout_data.get(key)
        if not values:
            continue
        rollout_data[key] = [
            slice_log_prob_with_cp(all_gather_with_cp(v, old, r), new, r)
            for v, old, new, r in zip(values, old_lengths, new_lengths, response_lengths)
        ]
""",
            path="mm_data.py",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
import torch


def to_device(rollout_data, device):
    # a conversion, not a per-sample transform of the project's
    rollout_data["rollout_log_probs"] = [torch.as_tensor(v, device=device) for v in rollout_data["rollout_log_probs"]]
    return rollout_data
""",
            path="data.py",
            files={"cp_utils.py": _CP_UTILS, "mm_data.py": _MM_DATA},
        ),
        Valid(
            """
from .cp_utils import slice_log_prob_with_cp


def get_rollout_data(rollout_data, totals, responses):
    rollout_data["rollout_log_probs"] = [
        slice_log_prob_with_cp(v, t, r) for v, t, r in zip(rollout_data["rollout_log_probs"], totals, responses)
    ]
    rollout_data["teacher_log_probs"] = [
        slice_log_prob_with_cp(v, t, r) for v, t, r in zip(rollout_data["teacher_log_probs"], totals, responses)
    ]
    return rollout_data
""",
            path="data.py",
            files={"cp_utils.py": _CP_UTILS, "mm_data.py": _MM_DATA},
        ),
        Valid(
            """
from .cp_utils import slice_log_prob_with_cp


def get_rollout_data(rollout_data, totals, responses):
    # no loop anywhere makes these fields partners: nothing to leave out
    rollout_data["rollout_log_probs"] = [
        slice_log_prob_with_cp(v, t, r) for v, t, r in zip(rollout_data["rollout_log_probs"], totals, responses)
    ]
    return rollout_data
""",
            path="data.py",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
from .cp_utils import slice_log_prob_with_cp


def get_rollout_data(rollout_data, totals, responses):
    for key in ("rollout_log_probs", "teacher_log_probs"):
        if key in rollout_data:
            rollout_data[key] = [
                slice_log_prob_with_cp(v, t, r) for v, t, r in zip(rollout_data[key], totals, responses)
            ]
    return rollout_data
""",
            path="data.py",
            files={"cp_utils.py": _CP_UTILS, "mm_data.py": _MM_DATA},
        ),
    ]
    invalid = [
        Invalid(
            """
from .cp_utils import all_gather_with_cp


def full_responses(rollout_data, totals, responses):
    rollout_data["teacher_log_probs"] = [
        all_gather_with_cp(v, t, r) for v, t, r in zip(rollout_data["teacher_log_probs"], totals, responses)
    ]
    return rollout_data
""",
            path="data.py",
            files={"cp_utils.py": _CP_UTILS, "mm_data.py": _MM_DATA},
            line=6,
            column=5,
            message="partner `rollout_log_probs`",
        ),
        Invalid(
            """
from .cp_utils import slice_log_prob_with_cp


def get_rollout_data(rollout_data, totals, responses):
    rollout_data["opd_reverse_kl"] = [
        slice_log_prob_with_cp(v, t, r) for v, t, r in zip(rollout_data["opd_reverse_kl"], totals, responses)
    ]
    return rollout_data


def reslice(rollout_data, totals, responses):
    for key in ("rollout_log_probs", "teacher_log_probs", "opd_reverse_kl"):
        rollout_data[key] = [slice_log_prob_with_cp(v, t, r) for v, t, r in zip(rollout_data[key], totals, responses)]
""",
            path="data.py",
            files={"cp_utils.py": _CP_UTILS},
            line=6,
            column=5,
            message="partners `rollout_log_probs`, `teacher_log_probs`",
        ),
        Invalid(
            """
from .cp_utils import slice_log_prob_with_cp


class Producer:
    def localise(self, rollout_data, totals, responses):
        rollout_data["rollout_log_probs"] = [
            slice_log_prob_with_cp(v, t, r) for v, t, r in zip(rollout_data["rollout_log_probs"], totals, responses)
        ]
        return rollout_data
""",
            path="data.py",
            files={"cp_utils.py": _CP_UTILS, "mm_data.py": _MM_DATA},
            line=7,
            column=9,
        ),
        Invalid(
            """
from .cp_utils import slice_log_prob_with_cp


def get_rollout_data(rollout_data, totals, responses):
    rollout_data["rollout_log_probs"] = [
        slice_log_prob_with_cp(v, t, r) for v, t, r in zip(rollout_data["rollout_log_probs"], totals, responses)
    ]
    return rollout_data
""",
            path="data.py",
            files={"cp_utils.py": _CP_UTILS, "mm_data.py": _MM_DATA},
            line=6,
            column=5,
            message="partner `teacher_log_probs`",
        ),
    ]
