from __future__ import annotations

import libcst as cst

from layoutcheck.lint.patterns import Tag, last_name, passes, vocabulary
from layoutcheck.lint.rule import Invalid, LintRule, Valid
from layoutcheck.lint.settings import LintSettings


class CpHelperWithoutGeometry(LintRule):
    """A CP slicing/offset helper called without its layout arguments.

    ## What it does
    Flags a call to a configured CP slicing/offset helper that does not pass
    its layout arguments (by default `get_logits_and_tokens_offset_with_cp`
    without `qkv_format` and `max_seq_len`). An argument counts as passed by
    keyword, or positionally when the call has enough positional arguments
    to reach its configured position; a call with `*args` or `**kwargs` is
    given the benefit of the doubt. Direct calls and attribute calls
    (`cp_utils.get_logits_and_tokens_offset_with_cp(...)`) are both checked.

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
    `cp-helpers` maps each helper to its layout parameters and their 0-based
    positions among a call's arguments, for example
    `get_logits_and_tokens_offset_with_cp = { qkv_format = 2, max_seq_len = 3 }`.

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
        return any(helper in source for helper in settings.cp_helpers)

    def visit_Call(self, node: cst.Call) -> None:
        helper = last_name(node.func)
        spec = self.settings.cp_helpers.get(helper or "")
        if not spec:
            return
        missing = [name for name, index in spec.items() if not passes(node, name, index)]
        if not missing:
            return
        names = " and ".join(f"`{name}`" for name in missing)
        vocab = vocabulary(self.settings)
        source = self.settings.sources[0] if self.settings.sources else "max_seq_lens"
        # A missing padded length gets a pointer to where its value lives.
        entry = any(vocab.tags(name) & (Tag.SEQ | Tag.SRC) for name in missing)
        hint = f"Pass {names} explicitly" + (f", with the sample's `{source}` entry." if entry else ".")
        self.report(
            node,
            f"`{helper}(...)` is called without {names}, so under BSHD it silently uses the packed rule. {hint}",
        )

    valid = [
        Valid(
            """
def local_masks(total_lengths, response_lengths, qkv_format, max_seq_lens):
    for i, (t, r) in enumerate(zip(total_lengths, response_lengths)):
        max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
        _, _, _, offsets = get_logits_and_tokens_offset_with_cp(t, r, qkv_format, max_seq_len)
"""
        ),
        Valid(
            """
from miles.backends.training_utils import cp_utils

def offsets(t, r, args, max_seq_len):
    return cp_utils.get_logits_and_tokens_offset_with_cp(
        t, r, qkv_format=args.qkv_format, max_seq_len=max_seq_len
    )
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
def get_logits_and_tokens_offset_with_cp(total_length, response_length, qkv_format="thd", max_seq_len=None):
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
    ]
    invalid = [
        Invalid(
            """
def gather_kl(kl, total_lengths, response_lengths):
    for total_len, response_len in zip(total_lengths, response_lengths):
        _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(total_len, response_len)
""",
            line=4,
            column=34,
            message="without `qkv_format` and `max_seq_len`",
        ),
        Invalid(
            """
from miles.backends.training_utils import cp_utils

def offsets(t, r, qkv_format):
    return cp_utils.get_logits_and_tokens_offset_with_cp(t, r, qkv_format)
""",
            line=5,
            column=12,
            message="without `max_seq_len`",
        ),
        Invalid(
            """
def offsets(t, r, max_seq_len):
    return get_logits_and_tokens_offset_with_cp(t, r, max_seq_len=max_seq_len)
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
