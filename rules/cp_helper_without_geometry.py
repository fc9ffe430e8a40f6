from __future__ import annotations

import libcst as cst

from layoutcheck.lint.names import vocabulary
from layoutcheck.lint.nodes import expects_error, last_name, passes
from layoutcheck.lint.rule import Invalid, LintContext, LintRule, Valid
from layoutcheck.lint.settings import LintSettings


class CpHelperWithoutGeometry(LintRule):
    """A CP slicing/offset helper called without its layout arguments.

    ## What it does
    Flags a call to a configured CP slicing/offset helper that does not pass
    its layout arguments (by default `get_logits_and_tokens_offset_with_cp`
    without `qkv_format` and `max_seq_len`): every parameter of the helper's
    `cp-helpers` spec, when the spec names the layout kind. An argument
    counts as passed by keyword, or positionally when the call has enough
    positional arguments to reach its configured position; a call with
    `*args` or `**kwargs` is given the benefit of the doubt. Direct calls
    and attribute calls (`cp_utils.get_logits_and_tokens_offset_with_cp(...)`)
    are both checked.

    A spec that names only the padded length (`slice_with_cp =
    { max_seq_len = 3 }`) tells `padding-outside-owner` where `P` goes:
    packed (THD) calls of such a helper omit it, and this rule leaves them
    alone. So does it leave calls inside `with pytest.raises(...)`, which
    are meant to fail.

    ## Why it matters
    These helpers default to the packed (THD) rule: the zigzag chunk size
    comes from the sample's own length `T` instead of the padded length `P`.
    Under BSHD with CP > 1 the offsets are then wrong for every sample whose
    `P` is not `T` rounded to `2 cp`, and response-space fields (log-probs,
    loss masks, advantages) are sliced at the wrong positions, silently
    (invariants O4 and G4).

    ## Example
    ```python
    _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(total_len, response_len, cp_rank, cp_size)
    ```

    ## How to fix
    Pass the layout and the owner's padded length, even where the layout is
    THD (then `max_seq_len=None`):
    ```python
    max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
    _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(
        total_len, response_len, cp_rank, cp_size, qkv_format, max_seq_len
    )
    ```

    ## Configuration
    `cp-helpers` maps each helper to its layout parameters and their 0-based
    positions among a call's arguments; the default is the real signature,
    `get_logits_and_tokens_offset_with_cp(total_length, response_length,
    cp_rank, cp_size, qkv_format="thd", max_seq_len=None)`:
    ```toml
    [tool.layoutcheck.cp-helpers.get_logits_and_tokens_offset_with_cp]
    qkv_format = 4
    max_seq_len = 5
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
        return any(helper in source for helper in vocabulary(settings).required_args)

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self._expecting_error = 0
        """Inside ``with pytest.raises(...)``: a call meant to fail is the test's point."""

    def visit_With(self, node: cst.With) -> None:
        self._expecting_error += expects_error(node)

    def leave_With(self, original_node: cst.With) -> None:
        self._expecting_error -= expects_error(original_node)

    def visit_Call(self, node: cst.Call) -> None:
        if self._expecting_error:
            return
        helper = last_name(node.func) or ""
        vocab = vocabulary(self.settings)
        spec = vocab.required_args.get(helper)
        if not spec:
            return
        missing = [name for name, index in spec.items() if not passes(node, name, index)]
        if not missing:
            return
        names = " and ".join(f"`{name}`" for name in missing)
        # A missing padded length gets a pointer to where its value lives.
        entry = any(name in vocab.padded_params[helper] for name in missing)
        hint = f"Pass {names} explicitly" + (f", with the sample's `{vocab.source}` entry." if entry else ".")
        self.report(
            node,
            f"`{helper}(...)` is called without {names}, so under BSHD it silently uses the packed rule. {hint}",
        )

    valid = [
        Valid(
            """
def local_masks(total_lengths, response_lengths, qkv_format, max_seq_lens, cp_rank, cp_size):
    for i, (t, r) in enumerate(zip(total_lengths, response_lengths)):
        max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
        _, _, _, offsets = get_logits_and_tokens_offset_with_cp(t, r, cp_rank, cp_size, qkv_format, max_seq_len)
"""
        ),
        Valid(
            """
from miles.backends.training_utils import cp_utils

def offsets(t, r, args, ps, max_seq_len):
    return cp_utils.get_logits_and_tokens_offset_with_cp(
        t, r, ps.cp.rank, ps.cp.size, qkv_format=args.qkv_format, max_seq_len=max_seq_len
    )
"""
        ),
        Valid(
            """
def offsets(t, r, rank, size, layout):
    return get_logits_and_tokens_offset_with_cp(t, r, rank, size, **layout)
"""
        ),
        Valid(
            """
def offsets(t, r, *where_and_layout):
    return get_logits_and_tokens_offset_with_cp(t, r, *where_and_layout)
"""
        ),
        Valid(
            """
def get_logits_and_tokens_offset_with_cp(
    total_length, response_length, cp_rank, cp_size, qkv_format="thd", max_seq_len=None
):
    return total_length, response_length, qkv_format, max_seq_len
"""
        ),
        Valid(
            """
def offsets(t, r):
    return slice_with_cp(t, 0)
"""
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

def test_bshd_needs_the_padded_length():
    with pytest.raises(ValueError, match="max_seq_len"):
        get_logits_and_tokens_offset_with_cp(10, 4, 1, 2, "bshd")
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def gather_kl(kl, total_lengths, response_lengths, cp):
    for total_len, response_len in zip(total_lengths, response_lengths):
        # the rank arguments are passed, the layout arguments are not
        _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(total_len, response_len, cp.rank, cp.size)
""",
            line=5,
            column=34,
            message="without `qkv_format` and `max_seq_len`",
        ),
        Invalid(
            """
def gather_kl(kl, total_len, response_len):
    return get_logits_and_tokens_offset_with_cp(total_len, response_len)
""",
            line=3,
            column=12,
            message="with the sample's `max_seq_lens` entry",
        ),
        Invalid(
            """
from miles.backends.training_utils import cp_utils

def offsets(t, r, ps, qkv_format):
    return cp_utils.get_logits_and_tokens_offset_with_cp(t, r, ps.cp.rank, ps.cp.size, qkv_format)
""",
            line=5,
            column=12,
            message="without `max_seq_len`",
        ),
        Invalid(
            """
def offsets(t, r, rank, size, max_seq_len):
    return get_logits_and_tokens_offset_with_cp(t, r, rank, size, max_seq_len=max_seq_len)
""",
            line=3,
            column=12,
            message="without `qkv_format`, so",
        ),
        Invalid(
            """
def offsets(self, t, r, layout):
    return self.slicer.offsets(t, r, layout)
""",
            line=3,
            column=12,
            settings={"cp_helpers": {"offsets": {"layout": 2, "padded_length": 3}}},
            message="without `padded_length`",
        ),
    ]
