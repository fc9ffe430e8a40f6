from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries
from layoutcheck.model.vocabulary import vocabulary

_CP_UTILS = '''
def get_logits_and_tokens_offset_with_cp(
    total_length, response_length, qkv_format="thd", max_seq_len=None, cp_rank=None, cp_size=None
):
    return total_length, response_length


def slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None, parallel_state=None):
    if qkv_format == "bshd":
        assert max_seq_len is not None
    return tokens
'''
_PACKED_ONLY = '''
def get_logits_and_tokens_offset_with_cp(total_length, response_length):
    # reads the CP rank from global state and only ever serves packed batches
    return total_length, response_length
'''


class CpHelperWithoutGeometry(ModelRule):
    """A CP slicing/offset helper called without its layout arguments.

    ## What it does
    Flags a call to a CP slicing/offset helper (`cp-helpers`: by default
    `get_logits_and_tokens_offset_with_cp`, `slice_with_cp`,
    `slice_log_prob_with_cp`, `all_gather_with_cp`) that omits its layout
    kind (`qkv_format`), unless the call sits where the layout is known to be
    packed: `if qkv_format == "thd":`, the `else` of
    `if qkv_format == "bshd":`, `if cp_size > 1 and qkv_format == "thd":`,
    after `assert qkv_format == "thd"` or an early `return` under BSHD. Where
    the layout is BSHD (a branch, or `"bshd"` passed as a literal) it also
    flags a call without the padded length `P` (`max_seq_len`).

    The helper's parameters are read from its own `def` when the checked
    tree has it: which parameter is the layout kind, which one is `P`, and
    their positions, so positional calls are judged against the real
    signature. A helper whose `def` has no layout parameters (a packed-only
    helper that reads the CP rank from global state) has nothing to forget,
    and its calls are never flagged. For a helper defined outside the tree,
    the positions configured in `cp-helpers` are used. An argument counts as
    passed by keyword, positionally when the call reaches its position, or
    through a `**kwargs` dict whose keys are known (`**dict(qkv_format=...)`);
    `*args` and a `**kwargs` of unknown keys get the benefit of the doubt.
    Calls inside `with pytest.raises(...)` are meant to fail and are left alone.

    ## Why it matters
    These helpers default to the packed (THD) rule: the zigzag chunk size
    comes from the sample's own length `T` instead of the padded length `P`.
    Under BSHD with CP > 1 the offsets are then wrong for every sample whose
    `P` is not `T` rounded to `2 cp`, and response-space fields (log-probs,
    loss masks, advantages) are sliced at the wrong positions, silently
    (invariants O4 and G4).

    ## Example
    ```python
    _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(total_len, response_len)
    ```

    ## How to fix
    Pass the layout and the owner's padded length, even where the layout is
    THD (then `max_seq_len=None`):
    ```python
    max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
    _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(
        total_len, response_len, qkv_format, max_seq_len
    )
    ```

    ## Configuration
    `cp-helpers` names the helpers; the positions it gives are a fallback for
    helpers whose `def` is not in the checked tree (the defaults are the
    signatures of DESIGN.md's appendix):
    ```toml
    [tool.layoutcheck.cp-helpers.get_logits_and_tokens_offset_with_cp]
    qkv_format = 2
    max_seq_len = 3
    ```

    ## Fix safety
    No autofix: the right layout and padded length are not known at the call.
    """

    code = "LC104"
    message = (
        "`get_logits_and_tokens_offset_with_cp(...)` is called without `qkv_format` and "
        "`max_seq_len`, so under BSHD it silently uses the packed rule. Pass both explicitly."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return any(helper in source for helper in vocabulary(settings).helpers)

    def check(self, file: FileQueries) -> Iterator[Report]:
        project = file.project
        for found in file.helper_calls():
            missing = file.missing_layout_arguments(found)
            if not missing:
                continue
            signature = found.signature
            names = " and ".join(f"`{name}`" for name in missing)
            if signature.ref is not None:
                where = f" (`{signature.text()}`, {project.where(signature.ref)})"
            else:
                where = " (from `cp-helpers`: its `def` is not in the checked tree)"
            if signature.layout is not None and signature.layout[0] not in missing:
                if found.layout == "bshd":
                    problem = "where the layout is BSHD, so it has no padded length to lay the sample out with"
                elif signature.padded is not None and signature.padded[0] in signature.none_checked:
                    problem = (f"so a BSHD run fails there (the helper requires `{signature.padded[0]}` under "
                               "BSHD)")
                else:
                    problem = "so under BSHD it has no padded length and falls back to the packed rule"
            else:
                problem = "so under BSHD it silently uses the packed rule"
            hint = f"Pass {names} explicitly."
            if signature.padded is not None and signature.padded[0] in missing:
                hint += f" For `{signature.padded[0]}`: {_lower(file.source_hint('bshd'))}."
            yield self.report(
                found.call.span,
                f"`{signature.name}(...)`{where} is called without {names}, {problem}. {hint}",
            )

    valid = [
        Valid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def local_masks(total_lengths, response_lengths, qkv_format, max_seq_lens):
    for i, (t, r) in enumerate(zip(total_lengths, response_lengths)):
        max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
        _, _, _, offsets = get_logits_and_tokens_offset_with_cp(t, r, qkv_format, max_seq_len)
""",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
from miles.backends.training_utils import cp_utils

def offsets(t, r, args, max_seq_len):
    return cp_utils.get_logits_and_tokens_offset_with_cp(t, r, qkv_format=args.qkv_format, max_seq_len=max_seq_len)
"""
        ),
        Valid(
            """
def offsets(t, r, layout):
    return get_logits_and_tokens_offset_with_cp(t, r, **layout)
"""
        ),
        Valid(
            """
def offsets(t, r, *layout):
    return get_logits_and_tokens_offset_with_cp(t, r, *layout)
"""
        ),
        Valid(
            """
from cp_utils import slice_with_cp

def get_batch(tokens, qkv_format, pad_token_id):
    if qkv_format == "thd":
        return [slice_with_cp(t, pad_token_id, qkv_format) for t in tokens]
    raise ValueError(qkv_format)
""",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
from cp_utils import slice_with_cp

def pack(tokens, qkv_format, cp_size, pad_token_id):
    if qkv_format == "bshd":
        raise NotImplementedError("BSHD goes through pad_rectangular")
    return [slice_with_cp(t, pad_token_id) for t in tokens]
""",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def loss_masks(total_lengths, response_lengths, loss_masks):
    # this trainer's helper has no layout arguments: it only ever serves packed batches
    for t, r, mask in zip(total_lengths, response_lengths, loss_masks):
        _, _, _, offsets = get_logits_and_tokens_offset_with_cp(t, r)
""",
            files={"cp_utils.py": _PACKED_ONLY},
        ),
        Valid(
            """
def offsets(t, r, fmt, p):
    return my_offsets(t, r)
""",
            settings={"cp_helpers": {"my_offsets": {}}},
        ),
        Valid(
            """
import pytest

def check_bshd_needs_the_padded_length():
    with pytest.raises(ValueError, match="max_seq_len"):
        get_logits_and_tokens_offset_with_cp(10, 4, "bshd")
"""
        ),
    ]
    invalid = [
        Invalid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def gather_kl(kl, total_lengths, response_lengths):
    for total_len, response_len in zip(total_lengths, response_lengths):
        _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(total_len, response_len)
""",
            line=6,
            column=34,
            message="without `qkv_format` and `max_seq_len`, so under BSHD it silently uses the packed rule",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
def gather_kl(kl, total_len, response_len):
    return get_logits_and_tokens_offset_with_cp(total_len, response_len)
""",
            line=3,
            column=12,
            message="from `cp-helpers`: its `def` is not in the checked tree",
        ),
        Invalid(
            """
from cp_utils import slice_with_cp

def pad_and_slice(tokens, qkv_format, max_seq_len, pad_token_id):
    if qkv_format == "bshd":
        return [slice_with_cp(t, pad_token_id, qkv_format) for t in tokens]
    return tokens
""",
            line=6,
            column=17,
            message="without `max_seq_len`, where the layout is BSHD",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def offsets(t, r, max_seq_len):
    return get_logits_and_tokens_offset_with_cp(t, r, max_seq_len=max_seq_len)
""",
            line=5,
            column=12,
            message="without `qkv_format`, so",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def offsets(t, r, qkv_format):
    if qkv_format == "thd":
        return None
    return get_logits_and_tokens_offset_with_cp(t, r)
""",
            line=7,
            column=12,
            message="(`get_logits_and_tokens_offset_with_cp(total_length, response_length, qkv_format=\"thd\"",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
def slice_rows(self, t, r, layout):
    return self.slicer.offsets(t, r, layout)
""",
            line=3,
            column=12,
            settings={"cp_helpers": {"offsets": {"layout": 2, "padded_length": 3}}},
            message="without `padded_length`",
        ),
    ]


def _lower(sentence: str) -> str:
    return sentence[:1].lower() + sentence[1:]
