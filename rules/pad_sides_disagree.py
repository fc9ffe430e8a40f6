from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries

_CONSUMER = '''
def align_routing(routing, cu_seqlens, max_len):
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    out = routing.new_zeros(len(lengths), max_len, *routing.shape[2:])
    for i, length in enumerate(lengths):
        n = min(length, routing.shape[1], max_len)
        out[i, :n] = routing[i, :n]
    return out


def replay_inputs(batch, cu_seqlens, max_len):
    return align_routing(batch["routing"], cu_seqlens, max_len)
'''
"""The trainer reads each sample's routing rows from the start of the row (right padding)."""


class PadSidesDisagree(ModelRule):
    """A tensor padded on one side where the rest of its layout takes the other.

    ## What it does
    Finds where each padded row's real tokens sit from what the code does:
    `F.pad(x, (0, k))` and `pad_sequence(xs)` pad on the right,
    `F.pad(x, (k, 0))` and `pad_sequence(xs, padding_side="left")` on the
    left; a store into a buffer built in the function, `P` wide, places a
    sample's `T` real tokens on the right (`buf[i, :n] = x`) or on the left
    (`buf[i, P - n:] = x`, `buf[i, off:off + n] = x` with `off = P - n`); a
    row read `x[i, :n]` with a true length `n` (`T`: a mask's sum, a
    difference of cumulative offsets, a size) assumes the right side,
    `x[i, -n:]` the left. The
    side follows the tensor into the fields it is stored in, out of the
    functions that return it and through the parameters it is passed as;
    a row read from a field stored from other fields reads theirs, except
    through a field that only ever holds a size (`batch["prompt_length"] =
    batch["prompts"].shape[-1]`), which copies no row.
    Flagged, at the placement:

    * a field placed on one side and read, elsewhere, assuming the other;
    * a field placed on both sides by different code (the fewer placements,
      or the later one);
    * two tensors padded to the same length on different sides in one
      function (partners: `input_ids` right-padded, its mask left-padded);
    * fields stored into one record in one expression (a dict literal:
      partners, which every consumer indexes alike) from placements on
      different sides, traced through the functions that return them (an
      element of a returned tuple included): the fewer side is flagged;
    * a pad whose side a parameter selects (`F.pad(x, (k, 0) if side ==
      "left" else (0, k))`, in a function of the module), called with the
      value, or left at the default, that pads on the left, whose tensor
      (through locals and a returned tuple) reaches a function that zips its
      rows with a list and reads each row's head (`for row, n in zip(mask,
      sizes): row[:n] = False`): flagged at the call that pads.

    `F.pad(cu_seqlens, (1, 0))` (a leading zero of cumulative lengths) is
    no row padding, and neither is a window copied into a buffer with both
    bounds moved by one base (`out[lo - first:hi - first] = ...`: a rank's
    slice of a packed stream). Placements in different arms of one `if`
    (`if padding_side == "right": ... elif padding_side == "left": ...`)
    never both run, so they are not partners; and a left-padded tensor
    joined before a right-padded one along their rows
    (`torch.cat([prompts, responses], dim=-1)`: verl's record, each row's
    real tokens contiguous) is a segment of the row, not a partner of the
    fields padded with the other segment. Names play no part.

    ## Why it matters
    Partner tensors of one layout must hold each sample's tokens at the same
    positions: a mask, labels or per-token routing data padded on the other
    side than the tokens pairs every real token with padding, and nothing
    fails (the shapes agree). docs/design.md#layout-spaces-and-bug-classes, class 7;
    inclusionAI/AReaL 52dac7f29 moved per-token router choices, placed at the
    end of each row, to its start, where the trainer reads them;
    OpenRLHF/OpenRLHF a32a7322 padded preference rows on the left (its
    helper's default) for a DPO loss that hides each row's prompt as the
    row's first columns.

    ## Example
    ```python
    start = seq_len - real
    out[0, start : start + n] = choices[:n]   # left-padded...
    ...
    out[i, :n] = routing[i, :n]                # ...read from the row's start
    ```

    ## How to fix
    Pad every partner on one side, the side the consumers read:
    ```python
    out[0, :n] = choices[:n]
    ```

    ## Known problems
    A field joins a placement and a read only through the field's key and
    the calls that carry the tensor: a tensor handed on through containers
    the model does not follow (a list split by a helper, a side channel on an
    object) is not linked. A buffer padded on both sides is not judged. A
    side selected by a parameter is judged across modules only where the
    call leaves it to its default (a side given by a variable, or as a
    constant in another module than the reader's, is not judged); rows
    handed on by a data loader are followed when the loop binds its collate
    function's result.

    ## Fix safety
    No autofix: which side is right is the consumers' choice.
    """

    code = "LC113"
    message = (
        "`out[0, start : start + n]` pads field `routing` on the left, but it is read on the right at "
        "replay.py:9. Pad partners on one side, the side their consumers read."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "pad" in source or "] =" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for clash in file.facts.clashes:
            if clash.kind == "left_into_head":
                reader, line = clash.detail.split("|", 1)
                yield self.report(
                    clash.span,
                    f"`{clash.text}` pads on the left (the side its parameter selects, by default or as passed), "
                    f"but `{reader}` (called at line {line}) reads each row from its start, `row[:n]`, as if the "
                    "real tokens began at column 0. Pad on the right where the rows are read from their start.",
                )
        # a function whose left padding the module's own reader named (it names the very calls) is
        # left to it: across modules the padding call is the first one the returned rows come from
        named = {clash.function for clash in file.facts.clashes if clash.kind == "left_into_head"}
        for ref, call, reader in file.left_into_heads():
            if ref[1] in named:
                continue
            yield self.report(
                call.span,
                f"`{call.text or call.callee}` pads on the left (the side its parameter selects by default), but its "
                f"rows reach {file.project.label(reader)}, which reads each row from its start, `row[:n]`, as if "
                "the real tokens began at column 0. Pad on the right where the rows are read from their start.",
            )
        for found in file.side_disagreements():
            place = found.place
            subject = f"field `{found.field}`" if found.field is not None else "this tensor"
            yield self.report(
                place.span,
                f"`{place.text}` pads {subject} on the {place.side}, but it is {found.other}. "
                "Pad partners on one side, the side their consumers read.",
            )

    valid = [
        Valid(
            """
import torch


def pack_rank_window(rows, lengths, starts, width, rank):
    # this rank's window of the packed stream: `lo - first` moves global offsets into the buffer
    out = torch.zeros(width, dtype=rows.dtype)
    first = width * rank
    for i, n in enumerate(lengths):
        lo = max(first, starts[i])
        hi = min(first + width, starts[i] + n)
        if lo < hi:
            out[lo - first:hi - first] = rows[i, lo - starts[i]:hi - starts[i]]
    return out


def build(batch, lengths, starts, width, rank):
    batch["tokens"] = pack_rank_window(batch["rows"], lengths, starts, width, rank)
    return batch


def first_row(batch, mask):
    n = int(mask[0].sum())
    return batch["tokens"][0, :n]
"""
        ),
        Valid(
            """
import torch


def routing_tensor(choices, input_ids, attention_mask):
    seq_len = input_ids.shape[1]
    out = torch.zeros(1, seq_len, choices.shape[1], dtype=torch.int32)
    n = min(choices.shape[0], int(attention_mask.sum()))
    out[0, :n] = choices[:n]
    return out


def finish_sample(sample, choices):
    sample["routing"] = routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
    return sample
""",
            path="rollout.py",
            files={"replay.py": _CONSUMER},
        ),
        Valid(
            """
import torch.nn.functional as F


def pad_prompt_and_response(prompt, response, max_prompt, max_response, pad_id):
    # prompts left-padded, responses right-padded: two layouts, two lengths
    prompt = F.pad(prompt, (max_prompt - prompt.size(0), 0), value=pad_id)
    response = F.pad(response, (0, max_response - response.size(0)), value=pad_id)
    return prompt, response
""",
        ),
        Valid(
            """
import torch
import torch.nn.functional as F


def packed_offsets(lengths):
    # a leading zero of cumulative lengths is no row padding
    cu_seqlens = F.pad(torch.cumsum(lengths, 0), (1, 0))
    return cu_seqlens


def pad_row(x, length):
    return F.pad(x, (0, length - x.size(0)))
""",
        ),
        Valid(
            """
import torch.nn.functional as F


def pad_partners(input_ids, mask, length):
    input_ids = F.pad(input_ids, (0, length - input_ids.size(0)))
    mask = F.pad(mask, (0, length - mask.size(0)))
    return input_ids, mask
""",
        ),
        Valid(
            """
from torch.nn.utils.rnn import pad_sequence


def collate(batch):
    # left-padded prompts, read from the end of each row
    batch["prompts"] = pad_sequence([s["prompt"] for s in batch["samples"]], batch_first=True, padding_side="left")
    return batch


def last_prompt_tokens(batch, lengths):
    return [batch["prompts"][i, -n:] for i, n in enumerate(lengths)]
""",
        ),
        Valid(
            """
import torch

def padded_row(tokens, width, pad_id):
    row = torch.full((1, width), pad_id)
    row[0, : len(tokens)] = torch.tensor(tokens)
    mask = torch.zeros((1, width), dtype=torch.bool)
    mask[0, : len(tokens)] = True
    return row, mask


def choices_grid(raw, width, n):
    out = torch.zeros(1, width, raw.shape[1])
    out[0, :n] = raw[:n]
    return out


def sample(tokens, raw, width, pad_id):
    row, mask = padded_row(tokens, width, pad_id)
    return {"ids": row, "mask": mask, "choices": choices_grid(raw, width, len(tokens))}
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_rows(rows, side="left"):
    width = max(r.size(-1) for r in rows)
    return [F.pad(r, (width - r.size(-1), 0) if side == "left" else (0, width - r.size(-1))) for r in rows]

def hide_heads(mask, sizes):
    for row, n in zip(mask, sizes):
        row[:n] = 0
    return mask

def policy_masks(rows, sizes):
    mask = pad_rows(rows, side="right")
    return hide_heads(mask, sizes)
"""
        ),
        Valid(
            """
import torch.nn.functional as F

def pad_rows(rows, side="left"):
    width = max(r.size(-1) for r in rows)
    return [F.pad(r, (width - r.size(-1), 0) if side == "left" else (0, width - r.size(-1))) for r in rows]

def hide_tails(mask, sizes):
    # reads each row's end: right for left-padded rows
    for row, n in zip(mask, sizes):
        row[-n:] = 0
    return mask

def reward_masks(rows, sizes):
    mask = pad_rows(rows)
    return hide_tails(mask, sizes)
"""
        ),
        Valid(
            """
import torch

def packed_to_padded(packed, num_tokens, padding_value, padding_side="right"):
    # one side or the other, by the parameter: exclusive arms, never both on one tensor
    pieces = list(torch.split(packed, num_tokens, dim=1))
    out = torch.full((len(num_tokens), max(num_tokens)), padding_value, dtype=packed.dtype)
    for i, seq in enumerate(pieces):
        if padding_side == "right":
            out[i, : num_tokens[i]] = seq[0]
        elif padding_side == "left":
            out[i, -num_tokens[i] :] = seq[0]
        else:
            raise ValueError(padding_side)
    return out
"""
        ),
        Valid(
            """
import torch
from torch.nn.utils.rnn import pad_sequence

def postprocess(prompt_ids, response_ids, log_probs, pad_id):
    # verl's record: prompts left-padded and responses right-padded, joined so that each row's real
    # tokens are contiguous; the response-side fields are the responses' partners, not the prompts'
    prompts = pad_sequence(prompt_ids, batch_first=True, padding_value=pad_id, padding_side="left")
    responses = pad_sequence(response_ids, batch_first=True, padding_value=pad_id, padding_side="right")
    logprobs = pad_sequence(log_probs, batch_first=True, padding_value=0.0, padding_side="right")
    response_mask = pad_sequence([torch.ones_like(r) for r in response_ids], batch_first=True,
                                 padding_value=0, padding_side="right")
    input_ids = torch.cat([prompts, responses], dim=1)
    return {"prompts": prompts, "responses": responses, "rollout_log_probs": logprobs,
            "response_mask": response_mask, "input_ids": input_ids}


def measure(batch):
    # a size measured from the prompts, stored as a field: it holds no row of them
    batch["prompt_length"] = batch["prompts"].shape[-1]


def score(batch, critic):
    batch["values"] = critic(batch["input_ids"], skip=batch["prompt_length"])


def response_sums(batch):
    lengths = batch["response_mask"].sum(-1)
    return [batch["values"][i, : lengths[i]].sum() for i in range(lengths.shape[0])]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
import torch

def padded_row(tokens, width, pad_id):
    row = torch.full((1, width), pad_id)
    row[0, : len(tokens)] = torch.tensor(tokens)
    mask = torch.zeros((1, width), dtype=torch.bool)
    mask[0, : len(tokens)] = True
    return row, mask


def choices_grid(raw, width, n):
    out = torch.zeros(1, width, raw.shape[1])
    lead = width - n
    out[0, lead : lead + n] = raw[:n]
    return out


def sample(tokens, raw, width, pad_id):
    row, mask = padded_row(tokens, width, pad_id)
    return {"ids": row, "mask": mask, "choices": choices_grid(raw, width, len(tokens))}
""",
            line=15,
            column=5,
            message="for `ids` in the same record",
        ),
        Invalid(
            """
import torch


def routing_tensor(choices, input_ids, attention_mask):
    seq_len = input_ids.shape[1]
    real = int(attention_mask.sum())
    out = torch.zeros(1, seq_len, choices.shape[1], dtype=torch.int32)
    start = seq_len - real
    n = min(choices.shape[0], real)
    out[0, start : start + n] = choices[:n]
    return out


def finish_sample(sample, choices):
    routing = routing_tensor(choices, sample["input_ids"], sample["attention_mask"])
    sample["routing"] = routing
    return sample
""",
            path="rollout.py",
            files={"replay.py": _CONSUMER},
            line=11,
            message="read on the right at replay.py:",
        ),
        Invalid(
            """
import torch.nn.functional as F


def pad_partners(input_ids, mask, length):
    input_ids = F.pad(input_ids, (0, length - input_ids.size(0)))
    mask = F.pad(mask, (length - mask.size(0), 0))
    return input_ids, mask
""",
            line=7,
            message="to the same length",
        ),
        Invalid(
            """
import torch
from torch.nn.utils.rnn import pad_sequence


def collate(samples):
    return {"tokens": pad_sequence([s["tokens"] for s in samples], batch_first=True)}


def collate_eval(samples, length):
    tokens = torch.zeros(len(samples), length, dtype=torch.long)
    for i, s in enumerate(samples):
        n = s["tokens"].size(0)
        tokens[i, length - n:] = s["tokens"]
    return {"tokens": tokens}


def score(batch):
    return [batch["tokens"][i, : int(m.sum())] for i, m in enumerate(batch["mask"])]
""",
            line=14,
            message="read on the right",
        ),
        Invalid(
            """
import torch
import torch.nn.functional as F


def collate_train(samples, length, ignore):
    labels = [F.pad(s["labels"], (0, length - s["labels"].size(0)), value=ignore) for s in samples]
    return {"labels": torch.stack(labels)}


def collate_eval(samples, length, ignore):
    labels = [F.pad(s["labels"], (length - s["labels"].size(0), 0), value=ignore) for s in samples]
    return {"labels": torch.stack(labels)}
""",
            line=12,
            message="placed on the right",
        ),
        Invalid(
            """
import torch.nn.functional as F

def pad_rows(rows, side="left"):
    width = max(r.size(-1) for r in rows)
    out = []
    for r in rows:
        gap = width - r.size(-1)
        amount = (gap, 0) if side == "left" else (0, gap)
        out.append(F.pad(r, amount))
    return out

def hide_heads(mask, sizes):
    for row, n in zip(mask, sizes):
        row[:n] = 0
    return mask

def policy_masks(rows, sizes):
    mask = pad_rows(rows)
    return hide_heads(mask, sizes)
""",
            line=19,
            column=12,
            message="reads each row from its start",
        ),
        Invalid(
            """
import torch.nn.functional as F

def pad_rows(rows, where="end"):
    width = max(r.size(-1) for r in rows)
    return [F.pad(r, (0, width - r.size(-1)) if where == "end" else (width - r.size(-1), 0)) for r in rows]

class Collator:
    def collate(self, rows, masks):
        ids = pad_rows(rows)
        mask = pad_rows(masks, "start")
        return ids, mask

def loss_mask(collator, rows, masks, sizes):
    ids, mask = collator.collate(rows, masks)
    return scored_rows(mask, sizes)

def scored_rows(mask, sizes):
    kept = mask.clone()
    for row, n in zip(kept, sizes):
        row[:n] = 0
    return kept
""",
            line=11,
            column=16,
        ),
    ]
