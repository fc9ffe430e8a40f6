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


def _names(fields: list[str]) -> str:
    return ", ".join(f"`{f}`" for f in fields)


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

    Two more ways a partner is left out, each read from one place:

    * a `zip` of a record's fields (`zip(data["score"], data["sizes"])`,
      entries paired as one sample's) where some field is reordered or
      partitioned elsewhere in the project by an index list
      (`data["sizes"] = [data["sizes"][i] for i in order]`) and another
      never is: the zip pairs one sample's entry with another's (a lookup
      in a dict, `[size_of[i] for i in ids]`, finds each entry by its key
      and reorders nothing);
    * a loop that rewrites every entry of a record while it compares each
      with one of those entries (`for k, v in d.items(): if v.shape ==
      d["mask"].shape: d[k] = v[:, :n]`): once the reference entry is cut,
      the entries after it no longer match it and stay whole;
    * a record built in one expression (keyword arguments, a dict literal)
      that cuts some fields to a bound (`reply=s.reply[:limit]`) and stores
      whole a field the code places into a window those fields' lengths
      size (`buf[a : a + len(r.prompt) + len(r.reply)] = r.trace`, in the
      same module): the whole field no longer fits its window;
    * rows stacked and their per-row list not: a function that gets two
      blocks of rows stacked (`torch.cat([a, b])`, along the rows, here or
      by a function of the module that returns them) and passes them to a
      function that zips their rows with another parameter
      (`for row, n in zip(mask, sizes)`), passing as that list one of its
      own parameters, unchanged: it has one entry per row of a block, and
      `zip` stops after the first block.

    ## Why it matters
    Co-indexed per-sample fields must stay in one layout (invariant O4: after
    CP slicing, each response field holds the count the CP offset rule gives
    for `(P, cp, r)`): when the rollout's
    log-probs are sliced for context parallelism and the teacher's log-probs
    are not, each rank pairs its local log-probs with the whole response's
    teacher log-probs, and the distillation loss reads the wrong positions
    (docs/design.md#layout-spaces-and-bug-classes, class 2; radixark/miles 9469b7239 added the
    teacher's log-probs, and a third partner, to the producer's CP slicing).

    The same holds for any per-sample reorder or truncation: fields that
    describe the same samples must move together, or entry `i` of one no
    longer describes sample `i` of the other (thudm/slime c1dd9ab24 paired
    each rank's share of the samples with the whole rollout's rewards;
    inclusionAI/AReaL a9b4b511d trimmed a record's fields against a mask it
    had already trimmed; volcengine/verl 2239fd0ff cut a finished episode's
    response to the length budget and kept its per-token routing record
    whole, which then overran the window the response's tokens size;
    OpenRLHF/OpenRLHF 6106fb22 stacked chosen and rejected rows for one
    forward pass and hid the prompts of the chosen rows only, so the rejected
    rows were scored on their prompts).

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
    Reorder a zipped field with its partners (or zip the reordered copy),
    and take a loop's reference before the loop rewrites it
    (`shape = d["mask"].shape`). Stack a per-row list with its rows
    (`sizes * 2`, or `sizes_a + sizes_b`).

    ## Known problems
    Partners are learnt from loops over literal keys; fields that are never
    transformed together anywhere in the project are not known to be
    partners. A per-row list that a caller already stacked before passing it
    in beside the blocks (as long as the stack) is flagged all the same: the
    function cannot show it; stack it where the rows are stacked.

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
        return " for " in source or "zip(" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found, moved, kept in file.zips_out_of_step():
            yield self.report(
                found.span,
                f"`{found.text}` pairs {_names(moved)}, which the project reorders per sample by an index list, "
                f"with {_names(kept)}, which it never does: entry `i` of one is not sample `i` of the other. "
                "Reorder every partner the same way.",
            )
        for found in file.facts.clashes:
            if found.kind == "moving_reference":
                yield self.report(
                    found.span,
                    f"`{found.text}` is the reference the loop compares every entry with, and the loop rewrites "
                    "it too: the entries after it are compared with the rewritten one and left out. Take the "
                    "reference before the loop.",
                )
            elif found.kind == "unstacked_rows":
                yield self.report(
                    found.span,
                    f"`{found.text}` is zipped with the rows of `{found.detail}`, which stacks blocks of rows, but "
                    "it came in beside the blocks and was not stacked with them: `zip` stops after the first "
                    "block, and the other rows are left out. Stack the list like its rows.",
                )
            elif found.kind == "record_cut_apart":
                yield self.report(
                    found.span,
                    f"`{found.text}` is stored whole while its partner {found.detail} is cut to a bound: the code "
                    "fills a window sized by the partners' lengths with it, which it no longer fits. Cut it to the "
                    "same bound.",
                )
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
        Valid(
            """
def solved_sizes(rollout, order):
    rollout["sizes"] = [rollout["sizes"][i] for i in order]
    rollout["rank_score"] = [rollout["score"][i] for i in order]
    return [size for score, size in zip(rollout["rank_score"], rollout["sizes"]) if score > 0]
"""
        ),
        Valid(
            """
def keep_share(rollout, order):
    # every field of the record is reordered alike: no zip can pair two orders
    for key in list(rollout):
        rollout[key] = [rollout[key][i] for i in order]
    return [s for s, n in zip(rollout["score"], rollout["sizes"]) if s > 0]
"""
        ),
        Valid(
            """
def trim(groups):
    for fields in groups:
        keep = int(fields["valid"].sum(-1).max())
        grid = fields["valid"].shape
        for name, value in fields.items():
            if value.shape[:2] == grid[:2]:
                fields[name] = value[:, :keep]
    return groups
"""
        ),
        Valid(
            """
from dataclasses import dataclass


@dataclass
class Finished:
    prompt: list
    reply: list
    trace: object


def finish(state, prompt, limit):
    return Finished(prompt=prompt, reply=state.reply[:limit], trace=state.trace[: len(prompt) + limit])


def place(buf, done, at):
    width = len(done.prompt) + len(done.reply)
    buf[0, at : at + width] = done.trace
"""
        ),
        Valid(
            """
def finish(state, limit):
    # the record's metadata is not placed beside the tokens: nothing sizes it
    return {"ids": state["ids"][:limit], "meta": state["meta"]}


def place(buf, rec, at):
    buf[at : at + len(rec["ids"])] = rec["ids"]
"""
        ),
        Valid(
            """
import torch

def stack(a, a_mask, b, b_mask, sizes):
    return torch.cat([a, b]), torch.cat([a_mask, b_mask]), sizes * 2

def hide(mask, sizes):
    out = mask.clone()
    for row, n in zip(out, sizes):
        row[:n] = 0
    return out

def both(a, a_mask, b, b_mask, sizes):
    ids, mask, sizes = stack(a, a_mask, b, b_mask, sizes)
    return hide(mask, sizes)
"""
        ),
        Valid(
            """
import torch

def hide(mask, sizes):
    out = mask.clone()
    for row, n in zip(out, sizes):
        row[:n] = 0
    return out

def side_by_side(a_mask, b_mask, sizes):
    # stacked along the columns: the rows are the same rows
    mask = torch.cat([a_mask, b_mask], dim=1)
    return hide(mask, sizes)
"""
        ),
        Valid(
            """
def attach_sizes(table, kept, ids):
    # a lookup by id, not a reorder by position: each entry is found wherever it sits
    size_of = {i: s for i, s in zip(table["id"], table["sizes"])}
    kept["sizes"] = [size_of[i] for i in ids]
    return kept


def solved_sizes(kept):
    return [size for score, size in zip(kept["score"], kept["sizes"]) if score > 0]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def keep_share(rollout, order):
    for key in ("sizes", "weights"):
        rollout[key] = [rollout[key][i] for i in order]
    return rollout


def solved_sizes(rollout):
    return [size for score, size in zip(rollout["score"], rollout["sizes"]) if score > 0]
""",
            line=9,
            column=37,
            message="pairs `sizes`, which the project reorders per sample by an index list, with `score`",
        ),
        Invalid(
            """
def trim(groups):
    for fields in groups:
        keep = int(fields["valid"].sum(-1).max())
        for name, value in fields.items():
            if value.shape[:2] == fields["valid"].shape[:2]:
                fields[name] = value[:, :keep]
    return groups
""",
            line=6,
            column=35,
            message="the loop rewrites it too",
        ),
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
        Invalid(
            """
from dataclasses import dataclass


@dataclass
class Finished:
    prompt: list
    reply: list
    trace: object


def finish(state, prompt, limit):
    return Finished(prompt=prompt, reply=state.reply[:limit], trace=state.trace)


def place(buf, done, at):
    width = len(done.prompt) + len(done.reply)
    buf[0, at : at + width] = done.trace
""",
            line=13,
            column=69,
            message="`state.trace` is stored whole while its partner `reply` is cut",
        ),
        Invalid(
            """
def finish(state, limit):
    return {"ids": state["ids"][:limit], "logp": state["logp"][:limit], "scores": state["scores"]}


def place(buf, rec, at):
    n = len(rec["ids"])
    buf[at : at + n] = rec["scores"]
""",
            line=3,
            column=83,
        ),
        Invalid(
            """
import torch

def stack(a, a_mask, b, b_mask):
    return torch.cat([a, b]), torch.cat([a_mask, b_mask])

def hide(mask, sizes):
    out = mask.clone().bool()
    for row, n in zip(out, sizes):
        row[:n] = False
    return out

def both(a, a_mask, b, b_mask, sizes):
    ids, mask = stack(a, a_mask, b, b_mask)
    return hide(mask, sizes)
""",
            line=15,
            column=23,
            message="`sizes` is zipped with the rows of `mask`",
        ),
        Invalid(
            """
import torch

def per_row_sums(values, lengths):
    return [v[:n].sum() for v, n in zip(values, lengths)]

def pair_sums(first, second, lengths):
    values = torch.cat((first, second), dim=0)
    return per_row_sums(values, lengths)
""",
            line=9,
            column=33,
        ),
    ]
